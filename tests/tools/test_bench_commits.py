"""tools/bench_commits.py: a tool at two commits, alternately, each record tagged."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two worktrees and four tool processes: about half a minute
def test_both_sides_run_alternately_and_the_metric_is_summarised():
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    tool = ["tools/bench_env.py", "cartpole", "--num-envs", "4", "--steps", "5", "--warmup", "1"]
    out = subprocess.run(
        [sys.executable, "tools/bench_commits.py", "--before", head, "--after", "HEAD"]
        + ["--rounds", "2", "--metric", "ms_per_step", "--", *tool],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    runs, summary = records[:-1], records[-1]
    assert [(r["side"], r["round"]) for r in runs] == [
        ("before", 0),
        ("after", 0),
        ("after", 1),
        ("before", 1),
    ]
    assert all(r["tool_args"] == tool and r["ms_per_step"] > 0 for r in runs)
    assert all(head.startswith(r["rev_commit"]) for r in runs)
    case = summary["summary"]["env=cartpole num_envs=4"]
    assert summary["metric"] == "ms_per_step" and case["after_over_before_median"] > 0
    worktrees = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert "gpurl-bench-commits-" not in worktrees  # removed after the run
