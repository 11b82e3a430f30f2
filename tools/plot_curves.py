"""Presets' learning curves over seeds: the greedy evaluation return of every record
against training frames, their mean, and the floors a curve is read against.

    python tools/plot_curves.py docs/bench/agents/atari/atari_breakout_ppo_s?_summary.json \\
        --out docs/atari_breakout_ppo_curve.png --floor 0.9 --frame-factor 4
    python tools/plot_curves.py docs/bench/agents/vmas/vmas_navigation_{dqn,sac}_s?_summary.json \\
        --out docs/vmas_navigation_curves.png \\
        --floors docs/bench/agents/vmas/eval_vmas_navigation_cpu_2026-11-25.jsonl

Reads run records (summary.json files, or the copies tools/record_learning.py keeps in
docs/bench/agents/), one panel per preset. `--floor` draws random play's return
(tools/random_return.py) as a line in every panel; `--floors` reads JSON-lines records
of tools/random_return.py or tools/eval_vmas.py and draws, in each preset's panel, the
mean over seeds of each policy's return on that preset ("random" where a record names
no policy). `--frame-factor` adds a second axis of frames times it (an Atari agent step
is 4 emulator frames, a DMC action `frame_skip` control steps).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FLOOR_COLORS = {"random": "tab:red", "heuristic": "tab:green"}  # any other: gray


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("records", nargs="+", help="summary.json files, one or more presets")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--floor", type=float, default=None, help="random play's return")
    p.add_argument("--floors", nargs="+", default=[], help="floor records (JSON lines)")
    p.add_argument("--frame-factor", type=float, default=None, help="second x axis: frames x it")
    p.add_argument("--factor-label", default="emulator frames")
    p.add_argument("--ylabel", default="greedy evaluation return")
    args = p.parse_args(argv)
    by_preset = defaultdict(list)
    for path in args.records:
        record = json.loads(Path(path).read_text())
        by_preset[record.get("preset", record["agent"])].append(record)
    floors = read_floors(args.floors)
    fig, axes = plt.subplots(1, len(by_preset), figsize=(6.4 * len(by_preset), 4.0), squeeze=False)
    for ax, preset in zip(axes[0], sorted(by_preset), strict=True):
        records = sorted(by_preset[preset], key=_seed)
        draw_preset(ax, preset, records, floors.get(preset, {}), args)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)
    return 0


def read_floors(paths: list[str]) -> dict[str, dict[str, float]]:
    """{preset: {policy: mean return over the records' seeds}}."""
    returns = defaultdict(lambda: defaultdict(list))
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            if "preset" in r and "mean_return" in r:
                returns[r["preset"]][r.get("policy", "random")].append(r["mean_return"])
    return {
        preset: {policy: sum(v) / len(v) for policy, v in policies.items()}
        for preset, policies in returns.items()
    }


def draw_preset(ax, preset: str, records: list[dict], floors: dict[str, float], args) -> None:
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
    for policy, value in sorted(floors.items()):
        color = FLOOR_COLORS.get(policy, "tab:gray")
        ax.axhline(value, color=color, ls="--", lw=1, label=f"{policy} {value:.3g}")
    first = records[0]
    ax.set_title(f"{preset}: {first['agent']} on {first['env']}")
    ax.set_xlabel("training frames (agent steps over all envs)")
    ax.set_ylabel(args.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if args.frame_factor:
        k = args.frame_factor
        top = ax.secondary_xaxis("top", functions=(lambda x: x * k, lambda x: x / k))
        top.set_xlabel(args.factor_label)


def _seed(record: dict) -> int:
    return int(record["seed"])


if __name__ == "__main__":
    raise SystemExit(main())
