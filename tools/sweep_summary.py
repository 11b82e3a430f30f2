"""Summarise a sweep: gather every summary.json under a multirun directory, group the
runs by config (their Hydra overrides less `seed`), and write one table, one JSON line
per config and one plot of the evaluation curves.

    python tools/sweep_summary.py multirun/2026-11-23/10-00-00
    python tools/sweep_summary.py multirun/2026-11-23/10-00-00 --out docs/bench/sweeps/my_sweep

Writes to OUT (default: the sweep directory itself):
  sweep_summary.md     the table: per config, runs, seeds, final evaluation return
                       (IQM with its 95% bootstrap interval, and mean +- std over
                       runs), best evaluation return of any run, frames, mean wall time
  sweep_summary.jsonl  one JSON record per config, with each run's figures (its last
                       100+ training episodes' return among them), the IQM
                       and mean with their intervals and the provenance the runs
                       recorded (commit, date, device, versions)
  sweep_summary.png    every run's evaluation curve (thin) and, per config, the IQM
                       over runs with its 95% bootstrap interval as a band
The estimators are gpurl.utils.aggregate's (rliable's, in numpy): the IQM is the
mean of the middle half of the runs' final returns, its interval a stratified
bootstrap over runs.
The table is printed too. A config is the set of overrides in a run's
.hydra/overrides.yaml without seed=...; the table names each config by the overrides
that differ between configs and lists those shared by every run above it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.utils.aggregate import aggregate, curve_band  # noqa: E402

# What train.py's summary carries from gpurl.utils.provenance: copied into each record
# so a figure quoted from it traces back to the code and stack the runs used.
PROVENANCE = ("date", "device", "device_name", "torch", "torchrl", "tensordict", "python")


def load_runs(sweep: Path) -> list[dict]:
    runs = []
    for path in sorted(sweep.rglob("summary.json")):
        summary = json.loads(path.read_text())
        if summary.get("num_seeds", 1) > 1:  # a many-seeds group: its runs are under seeds/
            continue
        overrides_file = path.parent / ".hydra" / "overrides.yaml"
        if overrides_file.is_file():
            overrides = yaml.safe_load(overrides_file.read_text()) or []
        else:  # a run made without Hydra's output dir: agent and env are all we know
            overrides = [f"agent={summary['agent']}", f"env={summary['env']}"]
        summary["run_dir"] = str(path.parent)
        summary["overrides"] = [o for o in overrides if o.split("=", 1)[0] != "seed"]
        runs.append(summary)
    return runs


def group_by_config(runs: list[dict]) -> tuple[list[dict], list[str]]:
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault(tuple(sorted(run["overrides"])), []).append(run)
    shared = set.intersection(*(set(k) for k in groups))
    configs = []
    for key, members in groups.items():
        members.sort(key=lambda r: r["seed"])
        differing = [o for o in members[0]["overrides"] if o not in shared]
        # a single config differs from nothing: name it by what it trains
        label = " ".join(differing) or f"{members[0]['agent']} on {members[0]['env']}"
        configs.append({"label": label, "key": key, "runs": members})
    # shared overrides in the order the command line gave them
    order = [o for o in runs[0]["overrides"] if o in shared]
    return configs, order


def mean_std(values: list[float]) -> tuple[float, float]:
    # sample std over runs (seeds); one run has no spread
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def config_record(config: dict, sweep: Path) -> dict:
    runs = config["runs"]
    finals = [float(r["eval_return"]) for r in runs]
    bests = [float(r["best_eval_return"]) for r in runs]
    mean, std = mean_std(finals)
    stats = aggregate(finals)
    first = runs[0]
    return {
        "tool": "sweep_summary",
        "sweep": str(sweep),
        "config": config["label"],
        "overrides": list(first["overrides"]),
        "agent": first["agent"],
        "env": first["env"],
        "runs": len(runs),
        "seeds": [r["seed"] for r in runs],
        "eval_return_mean": round(mean, 3),
        "eval_return_std": round(std, 3),
        "eval_return_iqm": round(stats["iqm"], 3),
        "eval_return_iqm_ci": [round(x, 3) for x in stats["iqm_ci"]],
        "eval_return_mean_ci": [round(x, 3) for x in stats["mean_ci"]],
        "eval_returns": finals,
        "best_eval_return": max(bests),
        "best_eval_returns": bests,
        # each run's last 100+ training episodes (None where it kept no such figure)
        "train_returns": [(r.get("final_train_return") or {}).get("return") for r in runs],
        "frames": [r["frames"] for r in runs],
        "wall_time_s_mean": round(statistics.fmean(r["wall_time_s"] for r in runs), 2),
        "run_dirs": [r["run_dir"] for r in runs],
        "commit": ",".join(sorted({str(r.get("commit")) for r in runs})),
        **{k: first[k] for k in PROVENANCE if k in first},
    }


def markdown(records: list[dict], shared: list[str], sweep: Path, failed: list[Path]) -> str:
    lines = [f"Sweep `{sweep}`: {sum(r['runs'] for r in records)} runs, {len(records)} configs."]
    if shared:
        lines.append(f"Overrides shared by every run: `{' '.join(shared)}`.")
    if failed:
        lines.append(f"Runs that stopped with an error (error.txt): {len(failed)}.")
    lines += [
        "",
        "| config | agent | env | runs | seeds | final eval return: IQM [95% CI] "
        "| mean ± std | best eval return | frames | wall time (s, mean) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        frames = sorted(set(r["frames"]))
        frames = str(frames[0]) if len(frames) == 1 else f"{frames[0]}-{frames[-1]}"
        low, high = r["eval_return_iqm_ci"]
        lines.append(
            f"| {r['config']} | {r['agent']} | {r['env']} | {r['runs']} | "
            f"{','.join(map(str, r['seeds']))} | "
            f"{r['eval_return_iqm']:.1f} [{low:.1f}, {high:.1f}] | "
            f"{r['eval_return_mean']:.1f} ± {r['eval_return_std']:.1f} | "
            f"{r['best_eval_return']:.1f} | {frames} | {r['wall_time_s_mean']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(configs: list[dict], sweep: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, config in enumerate(configs):
        color = f"C{i % 10}"
        curves = [np.asarray(r.get("eval_history", []), dtype=float) for r in config["runs"]]
        curves = [c for c in curves if len(c)]
        for c in curves:
            ax.plot(c[:, 0], c[:, 1], color=color, lw=0.7, alpha=0.35)
        if not curves:
            continue
        band = curve_band(curves)
        label = config["label"] if len(config["label"]) <= 60 else config["label"][:57] + "..."
        ax.plot(band["frames"], band["iqm"], color=color, lw=2, label=f"{label} (n={len(curves)})")
        ax.fill_between(
            band["frames"], band["ci_low"], band["ci_high"], color=color, alpha=0.2, lw=0
        )
    ax.set_xlabel("frames")
    ax.set_ylabel("greedy evaluation return")
    ax.set_title(f"{sweep.name}: each run (thin), IQM and 95% CI over runs per config", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    # fixed margins rather than tight_layout, which draws the figure twice
    fig.subplots_adjust(left=0.09, right=0.98, top=0.92, bottom=0.11)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sweep", help="a multirun directory (any directory holding summary.json files)")
    p.add_argument("--out", default=None, help="where to write the three files (default: SWEEP)")
    args = p.parse_args(argv)
    sweep = Path(args.sweep)
    if not sweep.is_dir():
        print(f"sweep_summary: error: {sweep} is not a directory", file=sys.stderr)
        return 2
    runs = load_runs(sweep)
    if not runs:
        print(f"sweep_summary: error: no summary.json under {sweep}", file=sys.stderr)
        return 1
    failed = sorted(p.parent for p in sweep.rglob("error.txt"))
    configs, shared = group_by_config(runs)
    configs.sort(key=lambda c: c["label"])
    records = [config_record(c, sweep) for c in configs]
    out = Path(args.out) if args.out else sweep
    out.mkdir(parents=True, exist_ok=True)
    table = markdown(records, shared, sweep, failed)
    (out / "sweep_summary.md").write_text(table)
    (out / "sweep_summary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    plot(configs, sweep, out / "sweep_summary.png")
    print(table)
    for name in ("sweep_summary.md", "sweep_summary.jsonl", "sweep_summary.png"):
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
