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
