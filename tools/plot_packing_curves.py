"""Packing utilisation on the evaluation episodes against training frames, one PNG.

Reads run records (summary.json files, or their copies in docs/bench/) and draws every
seed's greedy utilisation at each evaluation, their mean, and the random and heuristic
policies' utilisation as lines, read from tools/eval_packing.py's JSON records.

    python tools/plot_packing_curves.py docs/bench/agents/packing/packing_hrl_cpu_s*_summary.json \
        --baselines docs/bench/agents/packing/eval_packing_hrl_cpu_2026-11-24.jsonl \
        --out docs/packing_hrl_cpu.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("records", nargs="+", help="summary.json files of one preset")
    p.add_argument("--baselines", help="eval_packing.py JSON lines (random, heuristic)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    curves = []
    for path in args.records:
        rec = json.loads(Path(path).read_text())
        log = rec.get("eval_log") or []
        frames = [e["frames"] for e in log]
        util = [e["utilisation"] for e in log]
        curves.append((frames, util))
        ax.plot(frames, util, lw=1, alpha=0.6, label=f"seed {rec['seed']}")
    if curves and all(c[0] == curves[0][0] for c in curves):
        mean = [sum(c[1][i] for c in curves) / len(curves) for i in range(len(curves[0][0]))]
        ax.plot(curves[0][0], mean, lw=2.2, color="black", label="learned, mean")
    if args.baselines:
        styles = {"random": ("tab:red", ":"), "heuristic": ("tab:green", "--")}
        for line in Path(args.baselines).read_text().splitlines():
            rec = json.loads(line)
            if rec["policy"] in styles:
                color, ls = styles[rec["policy"]]
                n = rec.get("episodes", "")  # eval_packing's fixed episodes, not the runs' own
                label = f"{rec['policy']} ({n} fixed episodes)" if n else rec["policy"]
                ax.axhline(rec["utilisation"], color=color, ls=ls, label=label)
    ax.set_xlabel("placements (all envs)")
    ax.set_ylabel("utilisation (packed volume / box)")
    ax.set_title("hrl_dqn on packing: greedy utilisation, each run's own evaluation episodes")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(json.dumps({"out": args.out, "runs": len(curves)}))


if __name__ == "__main__":
    main()
