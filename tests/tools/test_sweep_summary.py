"""tools/sweep_summary.py on a sweep laid out as Hydra's multirun leaves it, with
summaries this test writes: runs group by their overrides less seed, and the table,
records and plot carry the figures of those runs. No training."""

import json

import pytest

from tools import sweep_summary

SHARED = ["trainer.total_frames=400", "logger=none"]


def write_run(sweep, num, lr, seed, history):
    run = sweep / f"{num}_dqn_cartpole_s{seed}"
    (run / ".hydra").mkdir(parents=True)
    overrides = [f"agent.lr={lr}", f"seed={seed}", *SHARED]
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    summary = {
        "agent": "dqn",
        "env": "cartpole",
        "seed": seed,
        "frames": history[-1][0],
        "eval_return": history[-1][1],
        "best_eval_return": max(r for _, r in history),
        "eval_history": history,
        "wall_time_s": 2.0 + seed,
        "commit": "abc1234",
        "device": "cpu",
        "torch": "2.13.0+cpu",
    }
    (run / "summary.json").write_text(json.dumps(summary))


def test_groups_runs_by_config_and_writes_table_records_and_plot(tmp_path, capsys):
    sweep = tmp_path / "multirun"
    write_run(sweep, 0, 1e-3, 0, [[200, 10.0], [400, 30.0]])
    write_run(sweep, 1, 1e-3, 1, [[200, 20.0], [400, 50.0]])
    write_run(sweep, 2, 1e-3, 2, [[200, 15.0], [400, 40.0]])
    write_run(sweep, 3, 1e-4, 0, [[200, 9.0], [400, 8.0]])
    (sweep / "4_dqn_cartpole_s1").mkdir()  # a run stopped by a config mistake
    (sweep / "4_dqn_cartpole_s1" / "error.txt").write_text("gpurl: error: ...\n")

    assert sweep_summary.main([str(sweep), "--out", str(tmp_path / "out")]) == 0

    records = [json.loads(x) for x in (tmp_path / "out" / "sweep_summary.jsonl").open()]
    assert [r["config"] for r in records] == ["agent.lr=0.0001", "agent.lr=0.001"]
    slow, fast = records
    assert fast["seeds"] == [0, 1, 2] and fast["eval_returns"] == [30.0, 50.0, 40.0]
    assert fast["eval_return_mean"] == 40.0 and fast["eval_return_std"] == 10.0
    assert fast["best_eval_return"] == 50.0 and fast["wall_time_s_mean"] == 3.0
    assert slow["runs"] == 1 and slow["eval_return_std"] == 0.0 and slow["best_eval_return"] == 9.0
    assert fast["commit"] == "abc1234" and fast["torch"] == "2.13.0+cpu"
    # three runs: the IQM trims nothing (a quarter of 3 rounds to 0), so it is the mean;
    # its bootstrap interval lies within the runs' range
    assert fast["eval_return_iqm"] == 40.0
    low, high = fast["eval_return_iqm_ci"]
    assert 30.0 <= low <= 40.0 <= high <= 50.0 and low < high
    assert slow["eval_return_iqm"] == 8.0 and slow["eval_return_iqm_ci"] == [8.0, 8.0]
    table = (tmp_path / "out" / "sweep_summary.md").read_text()
    row = (
        f"| agent.lr=0.001 | dqn | cartpole | 3 | 0,1,2 | 40.0 [{low:.1f}, {high:.1f}] "
        "| 40.0 ± 10.0 | 50.0 | 400 | 3.0 |"
    )
    assert row in table
    assert "Overrides shared by every run: `trainer.total_frames=400 logger=none`" in table
    assert "stopped with an error (error.txt): 1" in table
    assert table in capsys.readouterr().out
    png = (tmp_path / "out" / "sweep_summary.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


@pytest.mark.parametrize("make", [lambda d: d.mkdir(), lambda d: None])
def test_a_directory_without_summaries_is_one_line_error(tmp_path, capsys, make):
    make(tmp_path / "sweep")
    assert sweep_summary.main([str(tmp_path / "sweep")]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("sweep_summary: error:") and "\n" not in err
