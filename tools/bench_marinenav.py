"""Robot-steps per second of the MarineNav env under random actions (lean path, autoreset).

One JSON record per case: num_envs, robots, obstacles, device, robot_steps_per_sec
(wall clock, best of --repeats timed runs), plus versions and torch's thread count. On
CPU the record also has robot_steps_per_cpu_sec: robot-steps over the CPU time the
process used (best run), which other jobs on a shared machine disturb much less than
the wall clock; it matches the wall figure on an idle machine with --threads 1.
Robot-steps count every robot slot of every env stepped (5 per env at the last
curriculum stage), as the old simulator's figure does.

    python tools/bench_marinenav.py --num-envs 1 64 256 1024 --device cpu
    python tools/bench_marinenav.py --num-envs 64 1024 --compile   # compile.env's step

--compile times the step as compile.env runs it (MarineNavEnv.compile_step: the pure part
through torch.compile); `warmup_s` then includes the compile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import tensordict
import torch
import torchrl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv  # noqa: E402
from tools.common import gpurl_commit  # noqa: E402


def bench(
    num_envs: int,
    device: str,
    steps: int,
    warmup: int,
    continuous: bool,
    repeats: int,
    compile: bool = False,
) -> dict:
    cls = MarineNavContinuousEnv if continuous else MarineNavEnv
    # stage 5: 5 robots, 4 obstacles
    env = cls(num_envs=num_envs, device=device, seed=0, stage=5)
    if compile:
        env.compile_step()
    env.lean_reset()
    gen = torch.Generator(device=device)
    gen.manual_seed(1)
    shape = (warmup + steps * repeats, num_envs, env.max_robots)
    if continuous:
        actions = torch.rand((*shape, 2), generator=gen, device=device) * 2 - 1
    else:
        actions = torch.randint(25, shape, generator=gen, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    begin = time.perf_counter()
    for t in range(warmup):
        env.lean_step(actions[t])
    sync()
    warmup_s = time.perf_counter() - begin
    elapsed, cpu = float("inf"), float("inf")
    for rep in range(repeats):
        begin, cpu_begin = time.perf_counter(), time.process_time()
        for t in range(warmup + rep * steps, warmup + (rep + 1) * steps):
            env.lean_step(actions[t])
        sync()
        elapsed = min(elapsed, time.perf_counter() - begin)
        cpu = min(cpu, time.process_time() - cpu_begin)
    return {
        "bench": "marinenav",
        "num_envs": num_envs,
        "robots": env.max_robots,
        "obstacles": env.max_obstacles,
        "action": "continuous" if continuous else "discrete",
        "device": device,
        "compiled": compile,
        "warmup_s": round(warmup_s, 2),
        "steps": steps,
        "seconds": round(elapsed, 4),
        "env_steps_per_sec": round(num_envs * steps / elapsed, 1),
        "robot_steps_per_sec": round(num_envs * env.max_robots * steps / elapsed, 1),
        "cpu_seconds": round(cpu, 4),
        "robot_steps_per_cpu_sec": round(num_envs * env.max_robots * steps / cpu, 1)
        if device == "cpu"
        else None,
        "repeats": repeats,
        "date": datetime.date.today().isoformat(),
        "commit": gpurl_commit(),
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "tensordict": tensordict.__version__,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 256, 1024])
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--continuous", action="store_true")
    p.add_argument("--compile", action="store_true", help="the step as compile.env runs it")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for n in args.num_envs:
        print(
            json.dumps(
                bench(
                    n,
                    args.device,
                    args.steps,
                    args.warmup,
                    args.continuous,
                    args.repeats,
                    args.compile,
                )
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
