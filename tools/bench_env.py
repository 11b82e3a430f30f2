"""Throughput and memory of any native gpurl env under random actions: one JSON record.

    python tools/bench_env.py pixels --num-envs 4096 --steps 200
    python tools/bench_env.py pixels --device cuda --num-envs 16384 --max-mem-delta 0
    python tools/bench_env.py pixels --env-kw stack_k=4 --env-kw restore=masked --force-resets
    python tools/bench_env.py cartpole --num-envs 1024 --threads 1

What is timed is the lean path, `env.lean_step(action)` (step, then autoreset under a
mask), which is what gpurl's collector runs, with a fresh random action per step drawn
on the device from the env's action spec. Warmup steps run first; then the measured
steps are timed with CUDA events on a GPU (perf_counter on the CPU), --repeats times;
the figures are those of the median run.

Memory (CUDA only, null on the CPU): max_mem_alloc_before is the peak allocated after
warmup, max_mem_alloc_after the peak after the measured steps, delta their difference;
--max-mem-delta BYTES exits 1 when the delta exceeds BYTES. --force-resets sets the env's
`force_reset` flag, so every step ends every episode and runs the reset path.
host_reads_per_step counts host reads of tensor data during the probe steps (should be 0);
cpu_ms_per_step is this process's CPU time per step (on the GPU: host-side time).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torchrl  # noqa: E402
from torchrl.data import Bounded, Categorical, MultiCategorical  # noqa: E402

from gpurl.envs import make_env, native_envs  # noqa: E402
from gpurl.utils.device import resolve_device  # noqa: E402
from gpurl.utils.host_reads import count_host_reads  # noqa: E402
from gpurl.utils.provenance import gpurl_commit  # noqa: E402


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("name", choices=sorted(native_envs()), help="a native env (gpurl.envs)")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=200, help="measured steps")
    p.add_argument("--warmup", type=int, default=50, help="steps before measuring")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="time the measured steps this many times; figures are the median run",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--force-resets", action="store_true", help="every step resets every env")
    p.add_argument(
        "--max-mem-delta",
        type=int,
        default=None,
        metavar="BYTES",
        help="exit 1 when peak CUDA memory grows by more than BYTES after warmup",
    )
    p.add_argument(
        "--env-kw",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor option (VALUE parsed as JSON when it can be), repeatable",
    )
    return p.parse_args(argv)


def action_sampler(spec, generator: torch.Generator):
    """A function drawing one random action per env on the spec's device, no host reads."""
    device = spec.device
    if isinstance(spec, Categorical) and not isinstance(spec, MultiCategorical):
        n = spec.space.n
        return lambda: torch.randint(
            0, n, spec.shape, device=device, generator=generator, dtype=spec.dtype
        )
    if isinstance(spec, Bounded):
        low, high = spec.space.low, spec.space.high
        return lambda: (
            low
            + (high - low)
            * torch.rand(spec.shape, device=device, generator=generator, dtype=spec.dtype)
        )
    return spec.rand


def run(args: argparse.Namespace) -> dict:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    env_kw = dict(kv.split("=", 1) for kv in args.env_kw)
    env_kw = {k: _value(v) for k, v in env_kw.items()}
    env = make_env(
        {"name": args.name, **env_kw}, device=device, seed=args.seed, num_envs=args.num_envs
    )
    env.force_reset = args.force_resets
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    sample = action_sampler(env.action_spec, gen)
    cuda = device.type == "cuda"

    obs = env.lean_reset()
    for _ in range(args.warmup):
        nxt, obs = env.lean_step(sample())
    with count_host_reads() as reads:
        probe = 3
        for _ in range(probe):
            nxt, obs = env.lean_step(sample())
    mem_before = mem_after = None
    if cuda:
        torch.cuda.synchronize(device)
        mem_before = torch.cuda.max_memory_allocated(device)
    runs, cpu_runs = [], []
    for _ in range(args.repeats):
        c0 = time.process_time()
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        for _ in range(args.steps):
            nxt, obs = env.lean_step(sample())
        if cuda:
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) / 1e3)
        else:
            runs.append(time.perf_counter() - t0)
        cpu_runs.append(time.process_time() - c0)
    seconds = statistics.median(runs)
    if cuda:
        mem_after = torch.cuda.max_memory_allocated(device)
    del nxt, obs
    delta = None if mem_before is None else mem_after - mem_before
    return {
        "bench": "bench_env",
        "env": args.name,
        "config": {
            "num_envs": args.num_envs,
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "seed": args.seed,
            "force_resets": args.force_resets,
            "env_kw": env_kw,
            "path": "lean_step",
        },
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "date": datetime.date.today().isoformat(),
        "commit": gpurl_commit(),
        "timing": "cuda_events" if cuda else "perf_counter",
        "env_steps_per_sec": args.num_envs * args.steps / seconds,
        "ms_per_step": 1e3 * seconds / args.steps,
        "ms_per_step_runs": [round(1e3 * r / args.steps, 4) for r in runs],
        # CPU time this process spent per step (median run): on a shared machine, less
        # sensitive than wall time to being descheduled; with --threads 1 it is the work
        "cpu_ms_per_step": 1e3 * statistics.median(cpu_runs) / args.steps,
        "host_reads_per_step": reads.count / probe,
        "max_mem_alloc_before": mem_before,
        "max_mem_alloc_after": mem_after,
        "max_mem_alloc_delta": delta,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    record = run(args)
    bound = args.max_mem_delta
    delta = record["max_mem_alloc_delta"]
    record["mem_check"] = (
        None if bound is None else ("skipped: no CUDA" if delta is None else delta <= bound)
    )
    print(json.dumps(record))
    return 1 if record["mem_check"] is False else 0


if __name__ == "__main__":
    sys.exit(main())
