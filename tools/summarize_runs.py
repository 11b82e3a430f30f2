"""Summarise finished runs: one JSON record per summary.json found, then a Markdown table.

    python tools/summarize_runs.py multirun/2026-11-21/12-00-00 [more dirs or files ...]
    python tools/summarize_runs.py runs/ --threshold 475 --within 50000

With --threshold, each record says whether the run's greedy evaluation reached it
(within --within frames), and the tool exits 1 when any run did not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def find_summaries(paths):
    for p in map(Path, paths):
        if p.is_file():
            yield p
        else:
            yield from sorted(p.rglob("summary.json"))


def first_frames_reaching(history, threshold):
    return next((f for f, r in history if r >= threshold), None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("paths", nargs="+")
    p.add_argument("--threshold", type=float, default=None)
    p.add_argument("--within", type=int, default=None, help="frames budget for the threshold")
    args = p.parse_args(argv)
    rows, ok = [], True
    for path in find_summaries(args.paths):
        s = json.loads(path.read_text())
        history = [
            (f, r) for f, r in s.get("eval_history", []) if args.within is None or f <= args.within
        ]
        record = {
            "summary": str(path),
            "agent": s["agent"],
            "env": s["env"],
            "seed": s["seed"],
            "frames": s["frames"],
            "eval_return": s["eval_return"],
            "best_eval_return": max((r for _, r in history), default=None),
            "wall_time_s": s["wall_time_s"],
            "device": s.get("device"),
            "torch_threads": s.get("torch_threads"),
        }
        if args.threshold is not None:
            record["threshold"] = args.threshold
            record["frames_to_threshold"] = first_frames_reaching(history, args.threshold)
            record["reached"] = record["frames_to_threshold"] is not None
            ok &= record["reached"]
        print(json.dumps(record))
        rows.append(record)
    if rows:
        print()
        print(
            "| agent | env | seed | best eval return | final eval return "
            "| frames to threshold | wall time (s) |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            to = r.get("frames_to_threshold")
            to = "-" if to is None else to
            print(
                f"| {r['agent']} | {r['env']} | {r['seed']} | {r['best_eval_return']:.1f} | "
                f"{r['eval_return']:.1f} | {to} | {r['wall_time_s']:.0f} |"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
