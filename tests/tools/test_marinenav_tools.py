"""The MarineNav tools on a tiny trained run: load_trained restores the agent the run
saved, eval_marinenav evaluates it beside the baselines and writes the grouped table,
plot_marinenav draws its trajectories, plot_marinenav_curves draws success curves."""

import json

import pytest
import torch
from omegaconf import OmegaConf

from gpurl.train import load_trained
from tools import eval_marinenav, plot_marinenav, plot_marinenav_curves

from ..conftest import train_run_dir


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A DQN trained for a few iterations on MarineNav, saved as a run directory."""
    run_dir = tmp_path_factory.mktemp("run")
    cfg, trainer, summary = train_run_dir(
        run_dir,
        [
            "experiment=marinenav_dqn",
            "env.num_envs=4",
            "env.max_episode_steps=20",
            "trainer.init_random_frames=8",
            "trainer.batch_size=16",
            "trainer.buffer_size=1000",
            "trainer.utd=1",
            "trainer.total_frames=32",
            "trainer.eval_interval=16",
            "logger=none",
            "trainer.progress=false",
        ],
    )
    assert [e["frames"] for e in summary["eval_log"]] == [16, 32]
    assert {"success", "stage0/success", "collisions", "wall_s"} <= set(summary["eval_log"][-1])
    assert 0 <= summary["eval_log"][0]["wall_s"] <= summary["eval_log"][1]["wall_s"]
    (run_dir / "summary.json").write_text(
        json.dumps({**summary, "config": OmegaConf.to_container(cfg)})
    )
    return run_dir, trainer


def test_load_trained_restores_the_saved_agent(tiny_run):
    run_dir, trainer = tiny_run
    cfg, agent = load_trained(run_dir)
    assert (
        cfg.agent.name == "dqn" and agent.progress.update_count == trainer.progress.update_count > 0
    )
    for a, b in zip(agent.q.parameters(), trainer.agent.q.parameters(), strict=True):
        assert torch.equal(a.cpu(), b.cpu())  # load_trained loads on the CPU by default


def test_load_trained_names_what_is_missing(tmp_path):
    from gpurl.errors import ConfigError

    with pytest.raises(ConfigError, match="checkpoint not found"):
        load_trained(tmp_path)


def test_eval_marinenav_table_groups_runs(tiny_run, tmp_path, capsys):
    run_dir, _ = tiny_run
    table = tmp_path / "t.md"
    eval_marinenav.main(
        [
            "--policies",
            "random",
            "--action",
            "discrete",
            "--runs",
            str(run_dir),
            str(run_dir),
            "--table",
            str(table),
            "--max-steps",
            "50",
        ]
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["policy"] for r in records} == {"random (discrete)", "dqn"}
    assert len(records) == 3 * 7  # three policies x (6 stages + all)
    text = table.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| dqn |")]
    assert len(rows) == 7 and all(r.startswith("| dqn | 2 |") for r in rows)
    # the same run twice: identical figures, so a zero spread
    assert "0.00 ± 0.00" in rows[-1]


def test_table_cells_are_mean_and_spread():
    records = [
        {
            "policy": "a",
            "stage": "all",
            "success_rate": s,
            "travel_time_s": None,
            "energy": None,
            "collisions": c,
            "timeouts": 0,
        }
        for s, c in ((0.9, 2), (1.0, 4))
    ]
    row = eval_marinenav.table(records).splitlines()[2]
    assert row == "| a | 2 | all | 0.95 ± 0.07 | - | - | 3.0 ± 1.4 | 0.0 ± 0.0 |"


def test_plot_tools_write_pngs(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    out = tmp_path / "traj.png"
    plot_marinenav.main(
        [
            "--run",
            str(run_dir),
            "--episode",
            "0",
            "--max-steps",
            "50",
            "--out",
            str(out),
        ]
    )
    assert out.stat().st_size > 10_000
    plot_marinenav_curves.main([str(run_dir / "summary.json"), "--out", str(tmp_path)])
    assert (tmp_path / "marinenav_dqn_success.png").stat().st_size > 10_000
    args = [str(run_dir / "summary.json"), "--out", str(tmp_path), "--suffix", "_gpu"]
    plot_marinenav_curves.main([*args, "--scripted", "0.92", "0.92"])
    assert (tmp_path / "marinenav_dqn_success_gpu.png").stat().st_size > 10_000


def train_tiny_preset(run_dir, preset: str, *overrides: str) -> None:
    """16 frames of experiment=<preset> with small networks, saved as a run directory."""
    train_run_dir(
        run_dir,
        [
            f"experiment={preset}",
            "env.num_envs=4",
            "env.max_episode_steps=20",
            "agent.hidden=[32]",
            *overrides,
            "trainer.init_random_frames=8",
            "trainer.batch_size=16",
            "trainer.buffer_size=1000",
            "trainer.total_frames=16",
            "trainer.eval_interval=16",
            "logger=none",
            "trainer.progress=false",
        ],
    )


def test_eval_marinenav_cvar_levels_on_a_validation_set(tmp_path, capsys):
    """--cvar evaluates an IQN run once per risk level, on the scenarios of
    --scenario-seed; a run of another agent is refused with a clear message."""
    train_tiny_preset(tmp_path, "marinenav_iqn")
    args = ["--policies", "--runs", str(tmp_path), "--max-steps", "20", "--scenario-seed", "7"]
    eval_marinenav.main([*args, "--cvar", "1", "0.25"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in records if r["stage"] == "all"] == ["iqn cvar 1", "iqn cvar 0.25"]
    assert {r["scenario_seed"] for r in records} == {7}
    with pytest.raises(SystemExit):
        eval_marinenav.main([*args, "--cvar", "0"])


@pytest.mark.slow
def test_eval_marinenav_search_on_an_acqin_run(tmp_path, capsys):
    """--search G --cvar A evaluates an AC-IQN run with the critic's pick among the
    actor's action and a G x G grid, once per (G, A); --search 0 is the actor alone;
    --cvar without --search is refused for AC-IQN (it would change nothing)."""
    from gpurl.errors import ConfigError

    train_tiny_preset(
        tmp_path, "marinenav_acqin", "agent.critic_width=32", "agent.critic_hidden=[32]"
    )
    args = ["--policies", "--runs", str(tmp_path), "--max-steps", "5"]
    eval_marinenav.main([*args, "--search", "0", "2", "--cvar", "0.25"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in records if r["stage"] == "all"] == [
        "acqin actor",
        "acqin search 2 cvar 0.25",
    ]
    with pytest.raises(ConfigError, match="--search"):
        eval_marinenav.main([*args, "--cvar", "0.25"])
    with pytest.raises(SystemExit):
        eval_marinenav.main([*args, "--search", "1"])


def test_eval_marinenav_cvar_refuses_other_agents(tiny_run):
    from gpurl.errors import ConfigError

    run_dir, _ = tiny_run
    with pytest.raises(ConfigError, match="--cvar applies to IQN runs"):
        eval_marinenav.main(["--policies", "--runs", str(run_dir), "--cvar", "0.5"])
