"""Success on the fixed MarineNav evaluation set against training frames, one PNG per agent.

Reads run records (summary.json files, or the copies tools/record_learning.py keeps in
docs/bench/) and draws, for each agent, every seed's overall success at each
evaluation, their mean, the scripted baseline's success (0.90 discrete, 0.88
continuous: tools/eval_marinenav.py) and the curriculum's stage boundaries.

    python tools/plot_marinenav_curves.py docs/bench/agents/marinenav/marinenav_*_summary.json \
        --out docs
    python tools/plot_marinenav_curves.py docs/bench/gpu/*_h100_summary.json --out docs \
        --suffix _h100 --scripted 0.92 0.92   # the baseline as evaluated on that device

The scripted baseline differs by device (the env's in-episode noise comes from the
device's generator): pass the figure eval_marinenav printed there with --scripted.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCRIPTED = {"marinenav": 0.90, "marinenav_continuous": 0.88}


def curve(record: dict) -> tuple[list[int], list[float]]:
    log = record.get("eval_log") or []
    return [e["frames"] for e in log], [e["success"] for e in log]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("records", nargs="+", help="summary.json files")
    p.add_argument("--out", default=".", help="folder for marinenav_<agent>_success.png")
    p.add_argument("--suffix", default="", help="added to the file names")
    p.add_argument(
        "--scripted",
        nargs=2,
        type=float,
        default=[SCRIPTED["marinenav"], SCRIPTED["marinenav_continuous"]],
        metavar=("DISCRETE", "CONTINUOUS"),
        help="the scripted baseline's success to draw (default: the CPU figures)",
    )
    args = p.parse_args(argv)
    scripted = dict(zip(SCRIPTED, args.scripted, strict=True))
    by_agent: dict[str, list[dict]] = defaultdict(list)
    for path in args.records:
        record = json.loads(Path(path).read_text())
        if not str(record.get("env", "")).startswith("marinenav"):
            continue
        by_agent[record["agent"]].append(record)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for agent, records in sorted(by_agent.items()):
        records.sort(key=lambda r: r["seed"])
        fig, ax = plt.subplots(figsize=(7, 4))
        curves = []
        for r in records:
            frames, success = curve(r)
            curves.append((frames, success))
            ax.plot(frames, success, lw=1, alpha=0.6, marker=".", label=f"seed {r['seed']}")
        if len(curves) > 1 and all(c[0] == curves[0][0] for c in curves):
            mean = [sum(v) / len(v) for v in zip(*(c[1] for c in curves), strict=True)]
            ax.plot(curves[0][0], mean, color="k", lw=2, label="mean")
        env = records[0]["env"]
        ax.axhline(scripted.get(env, 0.9), color="gray", ls="--", lw=1, label="scripted")
        for row in records[0].get("config", {}).get("env", {}).get("curriculum", [])[1:]:
            ax.axvline(row["from_step"], color="gray", lw=0.5, alpha=0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("frames (env steps; stage changes at the thin lines)")
        ax.set_ylabel("success on the fixed 60 episodes")
        ax.set_title(f"{agent} on {env}")
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        path = out / f"marinenav_{agent}_success{args.suffix}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
