"""N seeds of a preset three ways, at equal cores: one process training them together
(trainer.num_seeds=N), N processes one after another, and N processes through the
gpurl_joblib launcher (as many at once as the cores hold). One JSON record per
(preset, N, mode): wall time, frames/s over all seeds, peak memory and every seed's
final evaluation with the IQM and its 95% bootstrap interval.

    python tools/bench_seeds.py --presets pqn_cartpole --seeds 16 --modes vmapped joblib
    python tools/bench_seeds.py --presets pqn_cartpole dqn_cartpole --seeds 1 4 16 64 \\
        --modes vmapped --out docs/bench/seeds/bench_seeds_cpu.jsonl
    python tools/bench_seeds.py --presets dqn_cartpole --seeds 16 --set trainer.total_frames=10000
    python tools/bench_seeds.py --presets dqn_cartpole --seeds 16 --first-seed 16

Modes (C = --cores, 2 by default):
    vmapped     one process, trainer.num_seeds=N, threads=C
    sequential  N processes one after another, seed=k, threads=C each
    joblib      one sweep, -m seed=0..N-1 hydra/launcher=gpurl_joblib threads=1
                hydra.launcher.n_jobs=C: C runs at a time

wall_s is the whole command's wall clock (start-up included: what a researcher waits);
frames_per_sec = N x frames per run / wall_s. peak_rss_mb is the largest resident set of
any one process of the mode (resource.getrusage: the vmapped process, the largest
sequential run, the largest joblib worker or the sweeping process); peak_cuda_mb, on a
GPU, the largest torch.cuda.max_memory_allocated of a run's process (a joblib sweep's
workers are not seen). device is the runs' own (`--set device=cuda`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpurl.utils.aggregate import aggregate  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit, pythonpath  # noqa: E402

QUIET = ["logger=none", "trainer.progress=false", "hydra/job_logging=disabled"]


def child(args: list[str]) -> None:
    """Run `python -m gpurl.train ARGS` in this process, then print its peak RSS (and
    that of the children it waited for: a joblib sweep's workers) in KB, and its peak
    CUDA allocation when it used the GPU."""
    import torch

    from gpurl.train import cli

    try:
        cli(args)
    finally:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"PEAK_RSS_KB {max(own, kids)}", flush=True)
        if torch.cuda.is_initialized():
            print(f"PEAK_CUDA_KB {torch.cuda.max_memory_allocated() // 1024}", flush=True)


def launch(args: list[str]) -> tuple[float, float, float | None]:
    """(wall seconds, peak RSS MB, peak CUDA MB or None) of one `gpurl.train` command in
    a fresh process."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": pythonpath(ROOT)},
    )
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"gpurl.train {' '.join(args)} failed:\n{out.stderr[-3000:]}")

    def peak(tag):
        kb = [int(ln.split()[1]) for ln in out.stdout.splitlines() if ln.startswith(tag)]
        return max(kb) / 1024 if kb else None

    return wall, peak("PEAK_RSS_KB"), peak("PEAK_CUDA_KB")


def summaries(root: Path) -> list[dict]:
    """Every single run's summary.json under root (a group's own is left out)."""
    out = []
    for path in sorted(root.rglob("summary.json")):
        s = json.loads(path.read_text())
        if s.get("num_seeds", 1) == 1:
            out.append(s)
    return sorted(out, key=lambda s: s["seed"])


def measure(preset: str, n: int, mode: str, cores: int, extra: list[str], first: int = 0) -> dict:
    base = [f"experiment={preset}", *QUIET, *extra]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_seeds_") as tmp:
        tmp = Path(tmp)
        if mode == "vmapped":
            args = [*base, f"trainer.num_seeds={n}", f"seed={first}", f"threads={cores}"]
            wall, peak, cuda = launch([*args, f"hydra.run.dir={tmp}/run"])
        elif mode == "sequential":
            wall, peak, cuda = 0.0, 0.0, None
            for k in range(first, first + n):
                w, p, c = launch(
                    [*base, f"seed={k}", f"threads={cores}", f"hydra.run.dir={tmp}/{k}"]
                )
                wall, peak = wall + w, max(peak, p)
                cuda = c if cuda is None else max(cuda, c or 0.0)
        else:  # joblib: C runs of one thread at a time
            seeds = ",".join(str(k) for k in range(first, first + n))
            args = ["-m", *base, f"seed={seeds}", "threads=1", "hydra/launcher=gpurl_joblib"]
            args.append(f"hydra.launcher.n_jobs={cores}")  # the launcher's default: every core
            wall, peak, cuda = launch([*args, f"hydra.sweep.dir={tmp}/sweep"])
        runs = summaries(tmp)
    if len(runs) != n:
        raise RuntimeError(f"{preset} {mode} N={n}: {len(runs)} summaries, expected {n}")
    finals = np.array([r["eval_return"] for r in runs])
    frames = int(runs[0]["frames"])
    return {
        "tool": "bench_seeds",
        "preset": preset,
        "mode": mode,
        "num_seeds": n,
        "first_seed": first,
        "cores": cores,
        "overrides": extra,
        "frames_per_run": frames,
        "wall_s": round(wall, 2),
        "frames_per_sec": round(n * frames / wall, 1),
        "train_s_per_run": [r["wall_time_s"] for r in runs],
        "peak_rss_mb": round(peak, 1),
        "peak_cuda_mb": None if cuda is None else round(cuda, 1),
        "eval_returns": finals.tolist(),
        "aggregate": aggregate(finals) if n > 1 else None,
        "commit": runs[0].get("commit"),
        "device": runs[0].get("device"),
        "device_name": runs[0].get("device_name"),
        # the machine's 1-minute load average before and after: other jobs slow a mode
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["pqn_cartpole"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 4, 16])
    p.add_argument("--modes", nargs="+", default=["vmapped", "joblib"])
    p.add_argument("--cores", type=int, default=2)
    p.add_argument(
        "--first-seed", type=int, default=0, help="the seeds are first .. first+N-1 in every mode"
    )
    p.add_argument("--set", nargs="*", default=[], help="extra overrides for every run")
    p.add_argument("--out", type=Path, help="append the records to this JSON-lines file")
    a = p.parse_args()
    unknown = set(a.modes) - {"vmapped", "sequential", "joblib"}
    if unknown:
        p.error(f"unknown mode(s) {sorted(unknown)}: use vmapped, sequential or joblib")
    env = environment_record("cpu")
    env.pop("torch_threads", None)  # this process's; each mode's runs use `cores` (above)
    commit = gpurl_commit()
    for preset in a.presets:
        for n in a.seeds:
            for mode in a.modes:  # modes interleaved per N: a shared machine disturbs them alike
                record = measure(preset, n, mode, a.cores, a.set, a.first_seed)
                record = {**env, **record, "bench_commit": commit}  # the runs' device
                emit(record, a.out)


if __name__ == "__main__":
    main()
