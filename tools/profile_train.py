"""Where a training iteration's time goes. A preset's trainer is warmed up past its random
frames (off-policy) and a few iterations more, then runs N iterations timed alone and N
under torch.profiler (--profile-iterations: fewer, where an iteration holds so many
kernels that the profiler's processing of their events would take minutes: hundreds of
CUDA-graph updates an iteration, say). One JSON record: frames/s unprofiled; the
device's kernel time against the profiled wall time (how busy the GPU was: the rest is
launches, host work and waiting); kernel launches per iteration; and the top operators
by host and by device self time.

    python tools/profile_train.py marinenav_iqn --device cuda --set env.num_envs=1024
    python tools/profile_train.py pqn_cartpole --iterations 10 --trace /tmp/trace.json

On a CPU the device columns are null and the host table is the whole story. The
profiler adds host time of its own, so the profiled wall time is longer than the
unprofiled one: read frames/s from the unprofiled run and the shares from the profile.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpurl.train import build, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit, profile_summary  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(trainer, iterations: int) -> int:
    """Iterate until the trainer has made an update (an off-policy run first collects its
    random frames), then `iterations` more; the iterations made."""
    made = 0
    while trainer.progress.update_count == 0 and trainer.frames < trainer.cfg.total_frames:
        trainer.iteration()
        made += 1
    for _ in range(iterations):
        trainer.iteration()
    return made + iterations


def profile_preset(args) -> dict:
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    profiled = args.profile_iterations or args.iterations
    overrides = [
        f"experiment={args.preset}",
        f"device={device}",
        "logger=none",
        "trainer.progress=false",
        f"threads={args.threads}",
        *args.set,
    ]
    torch.manual_seed(0)
    cfg = load_config(overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = build(cfg, run_dir)
        t0 = time.perf_counter()
        warmup_iterations = warm_up(trainer, args.warmup)
        sync(device)
        warmup_s = time.perf_counter() - t0

        frames0 = trainer.frames
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            trainer.iteration()
        sync(device)
        wall = time.perf_counter() - t0
        frames = trainer.frames - frames0
        # the unprofiled figure first, on stderr: a step cut short while profiling keeps it
        print(
            f"profile_train {args.preset}: {frames / wall:,.1f} frames/s unprofiled "
            f"({1e3 * wall / args.iterations:.3f} ms an iteration)",
            file=sys.stderr,
            flush=True,
        )

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for _ in range(profiled):
                trainer.iteration()
            sync(device)
            profiled_wall = time.perf_counter() - t0
        if args.trace:
            prof.export_chrome_trace(str(args.trace))
    summary = profile_summary(prof, profiled, cuda, args.top)
    busy = summary["device_kernel_s"]
    return {
        "tool": "profile_train",
        "preset": args.preset,
        "overrides": overrides[1:],
        "iterations": args.iterations,
        "profiled_iterations": profiled,
        "warmup_iterations": warmup_iterations,
        "warmup_s": round(warmup_s, 2),
        "frames": frames,
        "wall_s": round(wall, 4),
        "frames_per_sec": round(frames / wall, 1),
        "ms_per_iteration": round(1e3 * wall / args.iterations, 3),
        "profiled_wall_s": round(profiled_wall, 4),
        # the share of the profiled wall time the GPU spent running kernels
        "device_busy_fraction": None if busy is None else round(busy / profiled_wall, 4),
        **summary,
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("preset", help="an experiment preset (gpurl/configs/experiment)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--iterations", type=int, default=20, help="timed, then profiled")
    p.add_argument("--profile-iterations", type=int, default=0, help="profiled (0: --iterations)")
    p.add_argument("--warmup", type=int, default=5, help="iterations after the first update")
    p.add_argument("--top", type=int, default=12, help="operators listed per table")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--set", nargs="*", default=[], help="extra overrides")
    p.add_argument("--trace", type=Path, help="also write a Chrome trace here")
    p.add_argument("--out", type=Path, help="also append the record to this JSON-lines file")
    args = p.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0 or args.profile_iterations < 0:
        p.error("--iterations must be >= 1, --warmup and --profile-iterations >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    emit(profile_preset(args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
