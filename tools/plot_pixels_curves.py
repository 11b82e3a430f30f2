"""Greedy success and return on the held-out pixel worlds against training frames, one
PNG per agent (docs/pixels_AGENT_curve.png).

Reads run records (summary.json files, or the copies tools/record_learning.py keeps in
docs/bench/) and draws, for each agent, every seed's success and return at each
evaluation (eval_log), their mean, and the success target.

    python tools/plot_pixels_curves.py docs/bench/agents/pixels/pixels_*_summary.json --out docs
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
    p.add_argument("records", nargs="+", help="summary.json files")
    p.add_argument("--out", default="docs")
    p.add_argument("--target", type=float, default=0.9, help="success target line")
    p.add_argument("--suffix", default="", help="added to each PNG's name")
    args = p.parse_args(argv)
    runs = defaultdict(list)
    for path in args.records:
        s = json.loads(Path(path).read_text())
        if s.get("env") != "pixels":
            continue
        runs[s["agent"]].append(s)
    for agent, records in sorted(runs.items()):
        fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(10, 3.8))
        by_frames = defaultdict(lambda: ([], []))
        for s in sorted(records, key=lambda s: s["seed"]):
            log = s.get("eval_log", [])
            frames = [e["frames"] for e in log]
            success = [e.get("success", float("nan")) for e in log]
            ret = [e["return"] for e in log]
            ax_s.plot(frames, success, lw=1, alpha=0.6, marker=".", label=f"seed {s['seed']}")
            ax_r.plot(frames, ret, lw=1, alpha=0.6, marker=".", label=f"seed {s['seed']}")
            for f, sc, r in zip(frames, success, ret, strict=True):
                by_frames[f][0].append(sc)
                by_frames[f][1].append(r)
        xs = sorted(by_frames)
        ax_s.plot(xs, [sum(by_frames[x][0]) / len(by_frames[x][0]) for x in xs], "k", lw=2)
        ax_r.plot(xs, [sum(by_frames[x][1]) / len(by_frames[x][1]) for x in xs], "k", lw=2)
        ax_s.axhline(args.target, color="tab:red", ls="--", lw=1, label=f"target {args.target}")
        ax_s.set_ylim(-0.02, 1.02)
        ax_s.set_ylabel("greedy success, held-out worlds")
        ax_r.set_ylabel("greedy return, held-out worlds")
        for ax in (ax_s, ax_r):
            ax.set_xlabel("training frames")
            ax.grid(alpha=0.3)
        ax_s.legend(fontsize=8, loc="lower right")
        preset = records[0].get("config", {}).get("env", {})
        fig.suptitle(
            f"{agent.upper()} on pixels ({preset.get('map_height')}x{preset.get('map_width')} "
            f"worlds, {preset.get('num_envs')} envs), mean in black"
        )
        fig.tight_layout()
        out = Path(args.out) / f"pixels_{agent}_curve{args.suffix}.png"
        fig.savefig(out, dpi=100)
        plt.close(fig)
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
