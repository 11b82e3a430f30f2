"""tools/bench_default_run.py: one record per run from a worktree of each revision, in
alternating order, and a summary per revision."""

import json

import pytest

from tools import bench_default_run


@pytest.mark.slow  # two short training processes: about 20 s
def test_each_seed_runs_every_revision_and_a_summary_follows(capsys):
    args = ["--revs", "HEAD", "HEAD", "--seeds", "0", "1", "--", "trainer.total_frames=256"]
    assert bench_default_run.main(args) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs = [r for r in records if not r.get("summary")]
    assert [r["seed"] for r in runs] == [0, 0, 1, 1]
    assert all(r["frames"] == 256 and r["process_s"] >= r["wall_time_s"] > 0 for r in runs)
    summaries = [r for r in records if r.get("summary")]
    assert len(summaries) == 2 and summaries[0]["seeds"] == [0, 1]
    # seed 0 runs the revisions in order, seed 1 in reverse
    first = [runs[0], runs[3]]
    assert summaries[0]["eval_returns"] == [r["eval_return"] for r in first]
