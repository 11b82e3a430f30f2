"""A preset's learning curve over seeds: the greedy evaluation return of every record
against training frames, their mean, and random play's return as the floor.

    python tools/plot_curves.py docs/bench/atari_breakout_ppo_s?_summary.json \\
        --out docs/atari_breakout_ppo_curve.png --floor 0.9 --frame-factor 4

Reads run records (summary.json files, or the copies tools/record_learning.py keeps in
docs/bench/). `--floor` draws random play's return (tools/random_return.py) as a line;
`--frame-factor` adds a second axis of frames times it (an Atari agent step is 4
emulator frames, a DMC action `frame_skip` control steps).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("records", nargs="+", help="summary.json files of one preset")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--floor", type=float, default=None, help="random play's return")
    p.add_argument("--frame-factor", type=float, default=None, help="second x axis: frames x it")
    p.add_argument("--factor-label", default="emulator frames")
    p.add_argument("--ylabel", default="greedy evaluation return")
    args = p.parse_args(argv)
    records = sorted((json.loads(Path(r).read_text()) for r in args.records), key=_seed)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    by_frames = defaultdict(list)
    for s in records:
        frames = [f for f, _ in s["eval_history"]]
        returns = [r for _, r in s["eval_history"]]
        ax.plot(frames, returns, lw=1, alpha=0.6, marker=".", label=f"seed {s['seed']}")
        for f, r in zip(frames, returns, strict=True):
            by_frames[f].append(r)
    if len(records) > 1:
        xs = sorted(by_frames)
        means = [sum(by_frames[x]) / len(by_frames[x]) for x in xs]
        ax.plot(xs, means, "k", lw=2, label=f"mean of {len(records)} seeds")
    if args.floor is not None:
        ax.axhline(args.floor, color="tab:red", ls="--", lw=1, label=f"random play {args.floor:g}")
    first = records[0]
    ax.set_title(f"{first.get('preset', first['agent'])}: {first['agent']} on {first['env']}")
    ax.set_xlabel("training frames (agent steps over all envs)")
    ax.set_ylabel(args.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    if args.frame_factor:
        k = args.frame_factor
        top = ax.secondary_xaxis("top", functions=(lambda x: x * k, lambda x: x / k))
        top.set_xlabel(args.factor_label)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)
    return 0


def _seed(record: dict) -> int:
    return int(record["seed"])


if __name__ == "__main__":
    raise SystemExit(main())
