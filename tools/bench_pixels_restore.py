"""Does skipping the masked restore when nothing resets pay? env=pixels restore modes, interleaved.

    python tools/bench_pixels_restore.py --num-envs 1024 --stack-k 1 4 --threads 1

For each stack depth and each reset regime ("none": no env resets during the measured
steps, "all": --force-resets style, every env every step), one env per restore mode is
built from the same seed, and timed blocks of lean_step alternate between the modes
(rotating the order each round) so that load from other processes hits all of them
alike. Two things are timed: the whole lean_step, and the reset path alone (what
lean_step runs after the step: the masked restore, then the post-reset observation
copy), where the modes differ. One JSON record per (stack_k, regime, timed part): median
and min ms per call of each mode and the median's ratio to "lazy".

Modes (gpurl/envs/pixels/frame_stack.py): "lazy" never rewrites the stack on reset (the
observation copy shows start frames for slots older than the reset; no full-stack kernel,
no host read); "masked" runs one torch.where over the whole stack every step;
"host_skip" runs it only when mask.any() is true, a host read per step (a device sync on
CUDA): on the CPU that read is nearly free, so there it shows the best any skip can do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torchrl  # noqa: E402

from gpurl.envs.pixels import PixelsEnv  # noqa: E402
from gpurl.envs.pixels.frame_stack import RESTORE_MODES  # noqa: E402
from gpurl.utils.device import resolve_device  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--stack-k", type=int, nargs="+", default=[1, 4])
    p.add_argument("--steps", type=int, default=10, help="steps per timed block")
    p.add_argument("--rounds", type=int, default=7, help="timed blocks per mode")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"

    def timed(fn, inputs) -> float:
        """ms per call of fn over inputs."""
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        for x in inputs:
            fn(x)
        if cuda:
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / len(inputs)
        return 1e3 * (time.perf_counter() - t0) / len(inputs)

    def reset_path(env):
        """What follows the step in lean_step: the masked restore, then the observation."""

        def run(mask):
            env._reset_where(mask)
            env._observation()

        return run

    gen = torch.Generator(device=device)
    gen.manual_seed(0)
    for k in args.stack_k:
        for regime in ("none", "all"):
            envs = {}
            for mode in RESTORE_MODES:
                env = PixelsEnv(
                    num_envs=args.num_envs, device=device, stack_k=k, restore=mode, max_steps=10**6
                )
                env.force_reset = regime == "all"
                env.lean_reset()
                envs[mode] = env
            actions = [
                torch.randint(0, 8, (args.num_envs,), device=device, generator=gen)
                for _ in range(args.steps)
            ]
            for env in envs.values():
                for a in actions[: args.warmup]:
                    env.lean_step(a)
            masks = [torch.full((args.num_envs,), regime == "all", device=device)] * args.steps
            parts = {
                "lean_step": (lambda e: e.lean_step, actions),
                "reset_path": (reset_path, masks),
            }
            modes = list(envs)
            for part, (make_fn, inputs) in parts.items():
                times = {mode: [] for mode in envs}
                for r in range(args.rounds):
                    for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                        times[mode].append(timed(make_fn(envs[mode]), inputs))
                med = {mode: statistics.median(t) for mode, t in times.items()}
                best = {mode: min(t) for mode, t in times.items()}
                record = {
                    "bench": "bench_pixels_restore",
                    "config": {
                        "num_envs": args.num_envs,
                        "stack_k": k,
                        "resets": regime,
                        "timed": part,
                        "steps": args.steps,
                        "rounds": args.rounds,
                    },
                    "device": str(device),
                    "torch": torch.__version__,
                    "torchrl": torchrl.__version__,
                    "torch_num_threads": torch.get_num_threads(),
                    "ms_median": {m: round(v, 3) for m, v in med.items()},
                    "ms_min": {m: round(v, 3) for m, v in best.items()},
                    "median_ratio_to_lazy": {m: round(v / med["lazy"], 3) for m, v in med.items()},
                }
                print(json.dumps(record), flush=True)
            del envs
    return 0


if __name__ == "__main__":
    sys.exit(main())
