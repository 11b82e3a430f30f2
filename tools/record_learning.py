"""Train presets over seeds and keep each run's record in docs/bench/.

    python tools/record_learning.py dqn_cartpole ppo_cartpole --seeds 0 1 2
    python tools/record_learning.py sac_pendulum --seeds 0 --out docs/bench -- trainer.utd=2

Each run is `python -m gpurl.train experiment=PRESET seed=S` in its own process (the
same command a user types, so the record is what a user gets), under runs/record/.
Its summary.json (evaluation history, final evaluation, wall time, commit, versions,
device, config) is copied to OUT/PRESET_sS_summary.json, and one JSON line per run is
printed. Quote RESULTS.md tables from these records (tools/summarize_runs.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("presets", nargs="+", help="experiment presets (gpurl/configs/experiment)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", default="docs/bench")
    p.add_argument("--suffix", default="", help="added to the record's file name")
    args, overrides = p.parse_known_args(argv)
    overrides = [o for o in overrides if o != "--"]
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for preset in args.presets:
        for seed in args.seeds:
            run_dir = ROOT / "runs" / "record" / f"{preset}_s{seed}{args.suffix}"
            shutil.rmtree(run_dir, ignore_errors=True)
            cmd = [
                sys.executable,
                "-m",
                "gpurl.train",
                f"experiment={preset}",
                f"seed={seed}",
                f"hydra.run.dir={run_dir}",
                "trainer.progress=false",
                *overrides,
            ]
            started = time.perf_counter()
            rc = subprocess.run(cmd, cwd=ROOT).returncode
            summary = run_dir / "summary.json"
            if rc != 0 or not summary.exists():
                failed += 1
                print(json.dumps({"preset": preset, "seed": seed, "rc": rc}), flush=True)
                continue
            record = json.loads(summary.read_text())
            record["preset"], record["overrides"] = preset, overrides
            record["process_s"] = round(time.perf_counter() - started, 2)
            dest = out / f"{preset}_s{seed}{args.suffix}_summary.json"
            dest.write_text(json.dumps(record, indent=1))
            print(
                json.dumps(
                    {
                        "preset": preset,
                        "seed": seed,
                        "eval_return": record["eval_return"],
                        "frames": record["frames"],
                        "wall_time_s": record["wall_time_s"],
                        "record": str(dest),
                    }
                ),
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
