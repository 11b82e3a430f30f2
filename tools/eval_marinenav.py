"""Reference policies on the fixed MarineNav evaluation set (60 episodes, seed 253).

Runs the scripted baseline and a uniform random policy (discrete and continuous action
versions) on the 60 evaluation episodes, all 60 side by side in one batched env, and
prints one JSON record per (policy, stage) with success rate, travel time and energy
(over successful episodes), collisions and timeouts, plus the run's wall time.

    python tools/eval_marinenav.py
    python tools/eval_marinenav.py --policies scripted --action discrete
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torchrl

from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv
from gpurl.envs.marinenav.evaluation import (
    evaluation_scenarios,
    make_eval_env,
    run_episodes,
    summarize,
)
from gpurl.envs.marinenav.scripted import RandomPolicy, ScriptedPolicy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policies", nargs="+", default=["scripted", "random"])
    p.add_argument("--action", nargs="+", default=["discrete", "continuous"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: leave as is)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    scenarios = evaluation_scenarios()
    for action in args.action:
        continuous = action == "continuous"
        cls = MarineNavContinuousEnv if continuous else MarineNavEnv
        env = make_eval_env(cls, device=args.device)
        for name in args.policies:
            if name == "scripted":
                policy = ScriptedPolicy(continuous=continuous)
            else:
                policy = RandomPolicy(continuous=continuous, seed=0, device=args.device)
            begin = time.perf_counter()
            metrics = run_episodes(env, policy, scenarios)
            wall = time.perf_counter() - begin
            for row in summarize(metrics):
                record = {
                    "eval": "marinenav",
                    "policy": name,
                    "action": action,
                    **row,
                    "wall_s": round(wall, 2),
                    "device": args.device,
                    "torch": torch.__version__,
                    "torchrl": torchrl.__version__,
                    "threads": torch.get_num_threads(),
                }
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
