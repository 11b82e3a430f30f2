"""The Results and Benchmarks pages and the README's headline table are what
tools/report.py generates from the records in docs/bench/: a record changed without
its page regenerated fails here."""

import json
import shutil

from tools import report


def test_committed_pages_match_the_records():
    problems = report.check()
    assert not problems, "run python tools/report.py\n" + "\n".join(problems)[:4000]


def test_a_record_changed_without_its_page_fails_the_check(tmp_path, monkeypatch):
    copy = tmp_path / "bench"
    shutil.copytree(report.BENCH, copy)
    record = copy / "agents/cartpole/dqn_cartpole_s2_summary.json"
    data = json.loads(record.read_text())
    data["eval_metrics"]["return"] = 123.4
    record.write_text(json.dumps(data))
    monkeypatch.setattr(report, "BENCH", copy)
    problems = report.check()
    assert len(problems) == 2  # docs/results.md and the README's headline row
    assert all("123.4" in p for p in problems)


def test_missing_provenance_reads_not_recorded():
    assert report.provenance([{"device": "cpu"}]) == [
        "cpu",
        "not recorded",
        "not recorded",
        "not recorded",
    ]
    lines = [{"a": 1.0, "seed": 0}, {"a": 3.0, "seed": 1}]
    assert report.cell(lines, {"field": "a", "fmt": "{:.1f}"}) == "2.0 ± 1.4"
    assert report.cell(lines, {"field": "seed", "each": True}) == "0, 1"
    assert report.cell(lines[:1], {"field": "b"}) == "-"


def test_a_columns_where_narrows_the_rows_lines(tmp_path, monkeypatch):
    """Columns with their own `where`: one side per column, one game per row."""
    (tmp_path / "speed.jsonl").write_text(
        "\n".join(
            json.dumps({"game": g, "side": s, "steps_per_s": v, "device": "cpu"})
            for g, s, v in [("a", "x", 1.0), ("a", "y", 2.0), ("b", "x", 3.0)]
        )
    )
    monkeypatch.setattr(report, "BENCH", tmp_path)
    table = {
        "file": "speed.jsonl",
        "label": "game",
        "columns": [
            {"name": side, "field": "steps_per_s", "where": {"side": side}} for side in "xy"
        ],
        "rows": [{"label": g, "where": {"game": g}} for g in "ab"],
    }
    lines = report.lines_table(table, {}, {})
    assert "| a | 1.0 | 2.0 |" in lines and "| b | 3.0 | - |" in lines


def test_a_row_reads_a_list_of_files_as_one(tmp_path, monkeypatch):
    """Seeds recorded on two days, in two files: one row, every seed, both files named."""
    for name, seeds in (("day1.jsonl", (0, 1)), ("day2.jsonl", (2,))):
        (tmp_path / name).write_text(
            "\n".join(json.dumps({"seed": s, "ret": 10.0 * s, "device": "cpu"}) for s in seeds)
        )
    monkeypatch.setattr(report, "BENCH", tmp_path)
    table = {
        "file": ["day1.jsonl", "day2.jsonl"],
        "label": "run",
        "columns": [{"name": "return", "field": "ret", "fmt": "{:.0f}", "each": True}],
        "rows": [{"label": "all"}],
    }
    lines = report.lines_table(table, {}, {})
    assert "| all | 0, 10, 20 |" in lines
    assert "docs/bench/day1.jsonl, docs/bench/day2.jsonl" in lines[-2]


def test_a_rows_at_reads_its_fields_under_a_path_of_one_summary_record(tmp_path, monkeypatch):
    """One record holding every side (bench_pbt --summarize): a row per side."""
    summary = {"sides": {"a": {"iqm": 1.0}, "b": {"iqm": 2.0}}, "pairs": {"a - b": {"d": -1.0}}}
    (tmp_path / "s.jsonl").write_text(json.dumps(summary) + "\n")
    monkeypatch.setattr(report, "BENCH", tmp_path)
    table = {
        "file": "s.jsonl",
        "label": "side",
        "columns": [{"name": "IQM", "field": "iqm", "fmt": "{:.1f}"}],
        "rows": [{"label": "a", "at": "sides.a"}, {"label": "b", "at": "sides.b"}],
    }
    lines = report.lines_table(table, {}, {})
    assert "| a | 1.0 |" in lines and "| b | 2.0 |" in lines
    table["columns"] = [{"name": "d", "field": "d"}]
    table["rows"] = [{"label": "a - b", "at": "pairs.a - b"}]
    assert "| a - b | -1.0 |" in report.lines_table(table, {}, {})


def test_a_runs_table_shows_the_iqm_and_the_published_figures(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, value in enumerate([10.0, 20.0, 30.0, 40.0]):
        record = {"seed": seed, "frames": 100, "eval_metrics": {"return": value}}
        (runs / f"x_s{seed}_summary.json").write_text(json.dumps(record))
    monkeypatch.setattr(report, "BENCH", tmp_path)
    table = {
        "iqm": True,
        "published": {"section": "minatar", "impls": ["minatar-dqn", "gymnax-ppo"]},
        "runs": [{"label": "x", "records": "runs/x_s*_summary.json", "task": "seaquest"}],
    }
    head, _, row, *rest = report.runs_table(table, {}, {})
    assert "| IQM [95% CI] | minatar-dqn (published) | gymnax-ppo (published) |" in head
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2] == "10.0, 20.0, 30.0, 40.0" and cells[4].startswith("**25.0**")
    assert cells[5:7] == ["16.4", "-"]  # gymnax has no Seaquest
    sources = [line for line in rest if line.startswith("minatar-dqn (published)")]
    assert "arXiv:1903.03176" in sources[0] and "github.com/kenjyoung/MinAtar" in sources[0]


def test_a_runs_table_shows_the_last_training_episodes_where_asked(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, value in enumerate([10.0, 20.0, 30.0]):
        record = {
            "seed": seed,
            "frames": 100,
            "eval_metrics": {"return": value},
            "final_train_return": {"return": value / 2, "episodes": 120, "since_frames": 90},
        }
        if seed == 2:  # a record from before the figure was kept
            del record["final_train_return"]
        (runs / f"x_s{seed}_summary.json").write_text(json.dumps(record))
    monkeypatch.setattr(report, "BENCH", tmp_path)
    table = {"train_return": True, "runs": [{"label": "x", "records": "runs/x_s*_summary.json"}]}
    head, _, row, *_ = report.runs_table(table, {}, {})
    assert "| last 100+ training episodes per seed | their IQM [95% CI] |" in head
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[4] == f"5.0, 10.0, {report.NOT_RECORDED}"
    assert cells[5].startswith("**7.5**")
