"""Frames per second of gpurl's collection path against TorchRL's stock Collector.

Both sides drive the same native env (gpurl's CartPole by default) with the same
PolicyWrapper (epsilon-greedy over a 2x64 MLP Q-network): gpurl's LeanCollector calls
the env's lean path; TorchRL's Collector drives EnvBase.step / step_and_maybe_reset.
`gpurl_fps` is the eager LeanCollector (the default), `gpurl_compiled_fps` the same with
compile.policy and compile.env (compile=full's collection path); `ratio` and
`ratio_compiled` divide them by TorchRL's frames/s.
The two sides are timed alternately, `--repeats` times each, and the best round of each
is kept (the least disturbed by other processes). With `--env gym:ID` the env is a
Gymnasium task through TorchRL (a foreign env): `gpurl_fps` is then its lean path
(envs/foreign.ForeignEnv's adapter over step_and_maybe_reset, what env.collector=lean
and, on the CPU, auto run) against the same env under TorchRL's Collector (what
env.collector=torchrl runs), and there is no compiled side. One JSON record per
num_envs:

    python tools/bench_collect.py                       # num_envs 1, 64, 1024 on CPU
    python tools/bench_collect.py --env gym:CartPole-v1 --num-envs 8 64
    python tools/bench_collect.py --device cuda --num-envs 1024 16384
    python tools/bench_collect.py --min-ratio 3 --at 64  # exit 1 if gpurl < 3x TorchRL at 64
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs.utils import ExplorationType  # noqa: E402

from gpurl.core.compile import CompileSpec  # noqa: E402
from gpurl.core.progress import Progress  # noqa: E402
from gpurl.envs import make_env  # noqa: E402
from gpurl.envs.info import env_info  # noqa: E402
from gpurl.policies import EpsilonGreedy, LinearSchedule, PolicyWrapper, QNetwork  # noqa: E402
from gpurl.policies.networks import make_encoder  # noqa: E402
from gpurl.trainers.collector import LeanCollector  # noqa: E402
from gpurl.trainers.compile import compile_policy, env_step  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402


def make_policy(info, progress):
    """What DQN acts with: a 2x64 MLP Q-network, epsilon-greedy at 0.1."""
    q = QNetwork(make_encoder(info, None), info.n_actions, (64, 64))
    explore = [EpsilonGreedy(LinearSchedule(0.1, 0.1, 0), info.n_actions)]
    return PolicyWrapper(q, info, progress, explore).to(info.device)


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_batches(next_batch, batches: int, device) -> float:
    sync(device)
    start = time.perf_counter()
    for _ in range(batches):
        next_batch()
    sync(device)
    return time.perf_counter() - start


def env_config(env_name: str) -> dict:
    """A native env's name, or gym:ID for a Gymnasium task on its lean path."""
    if env_name.startswith("gym:"):
        return {"name": "gym", "id": env_name[4:], "collector": "lean"}
    return {"name": env_name}


def bench(env_name: str, num_envs: int, steps: int, batches: int, repeats: int, device):
    foreign = env_name.startswith("gym:")
    env = make_env(env_config(env_name), device=device, num_envs=num_envs)
    info, progress = env_info(env), Progress(device)
    policy = make_policy(info, progress)
    frames_per_batch = num_envs * steps
    # next observations kept, as DQN's replay needs them (the stock Collector keeps them too)
    lean = LeanCollector(env, policy, info, frames_per_batch, progress, next_obs=True)
    # compile=full's collection path: the env's lean step and the acting policy compiled
    spec = CompileSpec(policy=True, env=True)
    compiled = None
    if not foreign:  # a foreign env has no pure step to compile
        cenv = make_env(env_config(env_name), device=device, num_envs=num_envs)
        cprogress = Progress(device)
        cpolicy = make_policy(env_info(cenv), cprogress)
        compiled = LeanCollector(
            cenv,
            cpolicy,
            info,
            frames_per_batch,
            cprogress,
            next_obs=True,
            step=env_step(cenv, spec),
            act=compile_policy(cpolicy, spec),
        )
    # a foreign env's lean adapter keeps its own observation: the stock side gets a copy
    stock_env = make_env(env_config(env_name), device=device, num_envs=num_envs) if foreign else env
    stock = Collector(
        stock_env,
        policy,
        frames_per_batch=frames_per_batch,
        total_frames=-1,
        exploration_type=ExplorationType.RANDOM,
        auto_register_policy_transforms=False,
    )
    stock_iter = iter(stock)
    lean.rollout(), next(stock_iter)  # warm-up: allocations
    if compiled is not None:
        compiled.rollout()  # compiles
    best_lean = best_stock = best_compiled = float("inf")
    for _ in range(repeats):
        best_lean = min(best_lean, time_batches(lean.rollout, batches, device))
        best_stock = min(best_stock, time_batches(lambda: next(stock_iter), batches, device))
        if compiled is not None:
            best_compiled = min(best_compiled, time_batches(compiled.rollout, batches, device))
    stock.shutdown()
    frames = frames_per_batch * batches
    gpurl_fps, torchrl_fps = frames / best_lean, frames / best_stock
    compiled_fps = frames / best_compiled if compiled is not None else None
    return {
        "tool": "bench_collect",
        "env": env_name,
        "num_envs": num_envs,
        "steps_per_batch": steps,
        "batches": batches,
        "repeats": repeats,
        "gpurl_fps": round(gpurl_fps, 1),
        "torchrl_fps": round(torchrl_fps, 1),
        "ratio": round(gpurl_fps / torchrl_fps, 2),
        "gpurl_compiled_fps": round(compiled_fps, 1) if compiled_fps else None,
        "ratio_compiled": round(compiled_fps / torchrl_fps, 2) if compiled_fps else None,
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--env", default="cartpole", help="a native env name (default cartpole), or gym:ID"
    )
    p.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024])
    p.add_argument("--steps", type=int, default=32, help="env steps per collected batch")
    p.add_argument("--batches", type=int, default=10, help="batches per timed round")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds per side")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--min-ratio", type=float, default=None, help="exit 1 below this ratio")
    p.add_argument("--ratio-of", choices=["eager", "compiled"], default="eager")
    p.add_argument("--at", type=int, default=64, help="num_envs where --min-ratio applies")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    failed = False
    for n in args.num_envs:
        record = bench(args.env, n, args.steps, args.batches, args.repeats, args.device)
        if args.min_ratio is not None and n == args.at:
            record["min_ratio"] = args.min_ratio
            key = "ratio" if args.ratio_of == "eager" else "ratio_compiled"
            record["regression"] = record[key] < args.min_ratio
            failed |= record["regression"]
        emit(record)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
