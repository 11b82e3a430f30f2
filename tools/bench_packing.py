"""Packing env timings, one JSON record per case.

seed:        the seed benchmark's episode (1 env, max_steps 10, 20 objects, resolution 200,
             grid_step 4, box 0.256 m) driven by the heightmap-minimisation heuristic,
             which computes the exact z-map and legal mask over all 24 orientations and
             every stride-grid corner before each placement.
throughput:  lean_step with autoreset, heuristic policy, placements per second for
             num_envs x resolution.

    python tools/bench_packing.py                        # all cases, fused kernel compiled
    python tools/bench_packing.py --cases seed --kernel eager
Figures: wall time, and process CPU time (`cpu_*`, the same figure without the time the
process waited for a core: on a shared machine the closer one to a quiet machine's wall
time at --threads 1). Exits 1 if --max-ms-per-placement or --min-placements-per-sec is
given and missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torchrl

from gpurl.envs.packing.baselines import HeuristicPolicy
from gpurl.envs.packing.env import PackingEnv
from gpurl.envs.packing.placement import resting_heights_eager


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _record(case: str, config: dict, device: str, figures: dict) -> dict:
    return {
        "case": case,
        "config": config,
        "device": device,
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "threads": torch.get_num_threads(),
        **figures,
    }


def _warm(env: PackingEnv) -> float:
    """Run the z-map once (compiles the fused kernel); return the seconds it took."""
    t0 = time.perf_counter()
    env.geometry.placement(env.hm, env.items[:, 0])
    _sync(env.device)
    return time.perf_counter() - t0


def seed_case(device: str, compiled: bool, seed: int) -> dict:
    cfg = dict(
        num_envs=1,
        num_objects=20,
        resolution=200,
        grid_step=4,
        max_steps=10,
        box_size=(0.256, 0.256, 0.256),
        compile_placement=compiled,
    )
    t0 = time.perf_counter()
    env = PackingEnv(device=device, seed=seed, **cfg)
    setup = time.perf_counter() - t0
    warm = _warm(env)
    policy = HeuristicPolicy(env.geometry)
    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    td = env.reset()
    for _ in range(env.max_episode_steps):
        td = env.step(policy(td))
        if td["next", "done"].all():
            break
        td = td["next"].exclude("reward", "done", "terminated", "truncated")
    _sync(device)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    placements = int(env.packed.sum())
    # the z-map alone on the episode's final heightmap, and the fused kernel checked exact
    pid = env.items[:, 0]
    t0 = time.perf_counter()
    z, _ = env.geometry.placement(env.hm, pid)
    _sync(device)
    zmap_ms = (time.perf_counter() - t0) * 1e3
    exact = torch.equal(z, resting_heights_eager(env.hm, env.geometry.pool.hb[pid], 4))
    return _record(
        "seed_episode",
        {
            **cfg,
            "kernel": "compiled" if compiled else "eager",
            "orientations": 24,
            "corners_per_orientation": env.geometry.corners**2,
            "footprint_padding": env.geometry.pool.size,
        },
        device,
        {
            "elapsed_sec": round(elapsed, 4),
            "placements": placements,
            "ms_per_placement": round(elapsed / max(placements, 1) * 1e3, 2),
            "cpu_ms_per_placement": round(cpu / max(placements, 1) * 1e3, 2),
            "zmap_ms": round(zmap_ms, 2),
            "matches_eager_kernel": exact,
            "setup_sec": round(setup, 3),
            "warmup_sec": round(warm, 3),
        },
    )


def throughput_case(
    device: str, compiled: bool, num_envs: int, resolution: int, steps: int, seed: int
) -> dict:
    cfg = dict(
        num_envs=num_envs,
        resolution=resolution,
        num_objects=20,
        grid_step=4,
        max_steps=30,
        compile_placement=compiled,
    )
    env = PackingEnv(device=device, seed=seed, **cfg)
    policy = HeuristicPolicy(env.geometry)
    obs = env.lean_reset()
    for _ in range(2):  # warm-up: compile, first allocations
        _, obs = env.lean_step(policy(obs)["action"])
    _sync(device)
    start = env.placements.clone()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        _, obs = env.lean_step(policy(obs)["action"])
    _sync(device)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    placed = int(env.placements - start)
    return _record(
        "throughput",
        {
            **cfg,
            "kernel": "compiled" if compiled else "eager",
            "policy": "heuristic",
            "steps": steps,
            "footprint_padding": env.geometry.pool.size,
        },
        device,
        {
            "num_envs": num_envs,
            "resolution": resolution,
            "elapsed_sec": round(elapsed, 4),
            "placements": placed,
            "placements_per_sec": round(placed / elapsed, 1),
            "placements_per_cpu_sec": round(placed / cpu, 1),
            "steps_per_sec": round(steps * num_envs / elapsed, 1),
        },
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="seed,throughput")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--kernel", choices=["compiled", "eager"], default="compiled")
    ap.add_argument("--num-envs", default="1,16,64")
    ap.add_argument("--resolutions", default="200,64")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: by size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-ms-per-placement", type=float, default=None)
    ap.add_argument("--min-placements-per-sec", type=float, default=None, help="at 64 envs, res 64")
    ap.add_argument(
        "--limit-on", choices=["wall", "cpu"], default="wall", help="figure the limits apply to"
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    compiled = args.kernel == "compiled"
    failed = False
    cases = args.cases.split(",")
    if "seed" in cases:
        rec = seed_case(args.device, compiled, args.seed)
        limit = args.max_ms_per_placement
        key = "ms_per_placement" if args.limit_on == "wall" else "cpu_ms_per_placement"
        rec["regression"] = limit is not None and rec[key] > limit
        failed |= rec["regression"]
        print(json.dumps(rec), flush=True)
    if "throughput" in cases:
        for res in [int(v) for v in args.resolutions.split(",")]:
            for n in [int(v) for v in args.num_envs.split(",")]:
                steps = args.steps or max(3, min(40, 4000 // (n * (res // 32) ** 2)))
                rec = throughput_case(args.device, compiled, n, res, steps, args.seed)
                limit = args.min_placements_per_sec
                rate = "placements_per_sec" if args.limit_on == "wall" else "placements_per_cpu_sec"
                at_target = n == 64 and res == 64
                rec["regression"] = limit is not None and at_target and rec[rate] < limit
                failed |= rec["regression"]
                print(json.dumps(rec), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
