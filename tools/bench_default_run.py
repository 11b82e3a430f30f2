"""The default run (`python -m gpurl.train`, or any overrides) at several commits, seed by
seed, alternating: does a change make the run a user starts first faster, at the same
final return?

    python tools/bench_default_run.py --revs fedcc36 HEAD --seeds 0 1 2 3 4
    python tools/bench_default_run.py --revs HEAD~3 HEAD --seeds 0 -- experiment=acrobot_dqn

Each revision is checked out into its own git worktree (tracked files only, as a fresh
clone has them; the running Python and its packages are shared), and each run is
`python -m gpurl.train seed=S [overrides]` as its own process from that worktree. For
each seed the revisions run one after the other, their order reversed from one seed to
the next, so a drift of the machine's speed falls on every side. One JSON record per run
(the process's own wall time, the run's `wall_time_s` and final greedy return from its
summary.json), then one summary record per revision (medians and the returns per seed).

Time it alone: other processes on the machine move the figures more than most changes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.bench_commits import checkout, remove, resolve  # noqa: E402
from tools.common import pythonpath  # noqa: E402


def run_once(tree: Path, seed: int, overrides: list[str], run_dir: Path) -> dict:
    """One training run from `tree`: its process time and its summary's figures."""
    env = {**os.environ, "PYTHONPATH": pythonpath(tree)}
    command = [sys.executable, "-m", "gpurl.train", f"seed={seed}", *overrides]
    command += ["trainer.progress=false", f"hydra.run.dir={run_dir}"]
    start = time.perf_counter()
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    process_s = time.perf_counter() - start
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-3:]
        raise SystemExit(f"bench_default_run: the run failed in {tree}: {' | '.join(tail)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "seed": seed,
        "process_s": round(process_s, 2),
        "wall_time_s": summary.get("wall_time_s"),
        "eval_return": summary.get("eval_return"),
        "frames": summary.get("frames"),
        "stopped": summary.get("stopped"),
        "torch_threads": summary.get("torch_threads"),
        "device": summary.get("device"),
        "torch": summary.get("torch"),
        "date": summary.get("date"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--revs", nargs="+", default=["HEAD"], help="git revisions")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("overrides", nargs=argparse.REMAINDER, help="-- Hydra overrides")
    args = p.parse_args(argv)
    overrides = args.overrides[1:] if args.overrides[:1] == ["--"] else args.overrides
    commits = [resolve(rev) for rev in args.revs]
    runs: list[list[dict]] = [[] for _ in args.revs]  # per revision, in seed order
    with tempfile.TemporaryDirectory(prefix="gpurl-default-run-") as tmp:
        trees = [checkout(rev, Path(tmp) / f"tree{i}") for i, rev in enumerate(args.revs)]
        try:
            for n, seed in enumerate(args.seeds):
                order = list(range(len(trees)))
                for i in order if n % 2 == 0 else order[::-1]:
                    run_dir = Path(tmp) / f"run_{i}_s{seed}"
                    record = run_once(trees[i], seed, overrides, run_dir)
                    record.update(rev=args.revs[i], rev_commit=commits[i], overrides=overrides)
                    runs[i].append(record)
                    print(json.dumps({"tool": "bench_default_run", **record}), flush=True)
        finally:
            for tree in trees:
                remove(tree)
    for rev, commit, done in zip(args.revs, commits, runs, strict=True):
        summary = {
            "tool": "bench_default_run",
            "summary": True,
            "rev": rev,
            "rev_commit": commit,
            "overrides": overrides,
            "seeds": [r["seed"] for r in done],
            "eval_returns": [r["eval_return"] for r in done],
            "process_s_median": statistics.median(r["process_s"] for r in done),
            "wall_time_s_median": statistics.median(r["wall_time_s"] for r in done),
        }
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
