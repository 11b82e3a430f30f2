"""Train presets over seeds and keep each run's record in docs/bench/agents/<family>/.

    python tools/record_learning.py dqn_cartpole ppo_cartpole --seeds 0 1 2
    python tools/record_learning.py sac_pendulum --seeds 0 --suffix _utd2 -- trainer.utd=2
    python tools/record_learning.py marinenav_iqn marinenav_acqin --jobs 6 -- device=cuda

Each run is `python -m gpurl.train experiment=PRESET seed=S` in its own process (the
same command a user types, so the record is what a user gets), under runs/record/.
Its summary.json (evaluation history, final evaluation, wall time, commit, versions,
device, config) is copied to OUT/PRESET_sS_summary.json (OUT defaults to
docs/bench/agents/<family>/, the family named in the preset: cartpole, pendulum, pixels,
...), and one JSON line per run is printed. docs/results.md is generated from these
records by tools/report.py (docs/bench/catalog.yaml names the current ones).

Long runs:
- `--group` trains a preset's seeds in one process (`trainer.num_seeds=N seed=FIRST`,
  the seeds consecutive) and records each seed's own summary (run_dir/seeds/seed_S/):
  one update of N stacked networks costs less than N updates where the per-op overhead
  is a large part of an update (small batches, one env).
- `--resume` keeps each run directory and passes `trainer.resume=auto`, so the same
  command, typed again after a kill or a stopped machine, continues every run from its
  last checkpoint (every `trainer.checkpoint_interval` frames) instead of starting over.
  The record's wall_time_s is the run's training time over all its legs.

    python tools/record_learning.py minatar_breakout_dqn --seeds 0 1 2 3 4 --group \
        --resume -- trainer.checkpoint_interval=50000
    python -m gpurl.status runs/record     # how far each run is, and the time left
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.common import train_command  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("presets", nargs="+", help="experiment presets (gpurl/configs/experiment)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", default=None, help="default: docs/bench/agents/<family>/")
    p.add_argument("--suffix", default="", help="added to the record's file name")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at once (each its own process with one torch thread; on a GPU many "
        "small runs share the device well, on a CPU keep it <= the cores)",
    )
    p.add_argument(
        "--group",
        action="store_true",
        help="train each preset's seeds in one process (trainer.num_seeds); the seeds "
        "must be consecutive",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep run directories and continue each run from its last checkpoint "
        "(trainer.resume=auto)",
    )
    args, overrides = p.parse_known_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.group and sorted(args.seeds) != list(range(min(args.seeds), max(args.seeds) + 1)):
        p.error(f"--group needs consecutive seeds, got {args.seeds}")
    overrides = [o for o in overrides if o != "--"]
    outs = {p: ROOT / (args.out or f"docs/bench/agents/{family(p)}") for p in args.presets}
    for out in outs.values():
        out.mkdir(parents=True, exist_ok=True)
    groups = [sorted(args.seeds)] if args.group else [[s] for s in args.seeds]
    queue = [(preset, group) for preset in args.presets for group in groups]
    running: list[tuple[str, list[int], Path, float, subprocess.Popen]] = []
    failed = 0
    while queue or running:
        while queue and len(running) < args.jobs:
            preset, group = queue.pop(0)
            name = f"s{group[0]}" if len(group) == 1 else f"s{group[0]}-{group[-1]}"
            run_dir = ROOT / "runs" / "record" / f"{preset}_{name}{args.suffix}"
            extra = [f"trainer.num_seeds={len(group)}"] if args.group else []
            if args.resume:
                extra.append("trainer.resume=auto")
            else:
                shutil.rmtree(run_dir, ignore_errors=True)
            cmd = train_command(preset, group[0], run_dir, *overrides, *extra)
            env = {**os.environ, "OMP_NUM_THREADS": "1"} if args.jobs > 1 else None
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
            running.append((preset, group, run_dir, time.perf_counter(), proc))
        time.sleep(0.5)
        for job in [j for j in running if j[4].poll() is not None]:
            running.remove(job)
            preset, group, run_dir, started, proc = job
            for seed in group:
                summary = run_dir / "summary.json"
                if args.group:
                    summary = run_dir / "seeds" / f"seed_{seed}" / "summary.json"
                failed += not _record(
                    preset, seed, summary, started, proc, outs[preset], args.suffix, overrides
                )
    return 1 if failed else 0


FAMILIES = (
    "marinenav",
    "packing",
    "pixels",
    "vmas",
    "dmc",
    "atari",
    "minatar",
    "memory",
    "cartpole",
    "pendulum",
)


def family(preset: str) -> str:
    """The docs/bench/agents/ folder of a preset's records: the first family its name
    names (dmc_cartpole_swingup_sac is dmc), else "other"."""
    words = preset.split("_")
    return next((f for f in FAMILIES if f in words), "other")


def _record(preset, seed, summary, started, proc, out, suffix, overrides) -> bool:
    """Copy a finished run's summary into OUT; print one JSON line either way."""
    if proc.returncode != 0 or not summary.exists():
        print(json.dumps({"preset": preset, "seed": seed, "rc": proc.returncode}), flush=True)
        return False
    record = json.loads(summary.read_text())
    record["preset"], record["overrides"] = preset, overrides
    record["process_s"] = round(time.perf_counter() - started, 2)
    dest = out / f"{preset}_s{seed}{suffix}_summary.json"
    dest.write_text(json.dumps(record, indent=1))
    line = {
        "preset": preset,
        "seed": seed,
        "eval_return": record["eval_return"],
        "frames": record["frames"],
        "wall_time_s": record["wall_time_s"],
        "record": str(dest),
    }
    print(json.dumps(line), flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
