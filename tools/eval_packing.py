"""Random, heuristic and learned policies over a fixed set of packing episodes, one JSON
record each.

    python tools/eval_packing.py                 # 100 episodes, 20 objects, R 200, 30 steps
    python tools/eval_packing.py --checkpoint runs/packing_hrl_cpu_s0   # + the learned packer
    python tools/eval_packing.py --checkpoint RUN --policies learned_manager,learned_worker
The episodes are the envs of one batch (num_envs = episodes), drawn from --seed, so every
policy sees the same items; everything runs batched and is read on the host once. With
--checkpoint the run is loaded as gpurl's TrainedPolicy, as `python -m gpurl.eval RUN`
loads it (which plays the run's own evaluation episodes, without baselines), the env
settings are the run's own (its .hydra/config.yaml: box, resolution, grid, items,
candidates, max_steps), and the learned policy acts greedily;
learned_manager and learned_worker keep one learned level and replace the other by the
heuristic's rule (largest first, or its placement), to tell what each level is worth.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torchrl

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs import env_kwargs  # noqa: E402
from gpurl.envs.packing.baselines import HeuristicPolicy, RandomPolicy  # noqa: E402
from gpurl.envs.packing.env import PackingEnv  # noqa: E402
from gpurl.envs.packing.evaluation import evaluate  # noqa: E402
from gpurl.trainers.evaluation import greedy  # noqa: E402
from tools.common import trained_policy  # noqa: E402

POLICIES = {"random": RandomPolicy, "heuristic": HeuristicPolicy}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--num-objects", type=int, default=20)
    ap.add_argument("--resolution", type=int, default=200)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument(
        "--policies",
        default="random,heuristic",
        help="and with --checkpoint: learned (always added), learned_manager (its item "
        "choice, the heuristic's placement), learned_worker (largest first, its placement)",
    )
    ap.add_argument("--checkpoint", help="a gpurl run directory (or checkpoint file) to evaluate")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--kernel", choices=["compiled", "eager"], default="compiled")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = dict(
        num_objects=args.num_objects,
        resolution=args.resolution,
        max_steps=args.max_steps,
        compile_placement=args.kernel == "compiled",
    )
    policies = dict(POLICIES)
    names = args.policies.split(",")
    run = None
    if args.checkpoint:
        trained = trained_policy(args.checkpoint, args.device)
        cfg = env_kwargs(trained.cfg.env)
        cfg["compile_placement"] = args.kernel == "compiled"
        policies["learned"] = lambda geometry: greedy(trained.policy)
        policies.update(level_splits(trained.policy))
        names = [*names, "learned"] if "learned" not in names else names
        run = str(args.checkpoint)
    for name in names:
        if name not in policies:
            ap.error(
                f"unknown policy {name!r}: random, heuristic, or with --checkpoint learned, "
                "learned_manager, learned_worker"
            )
        env = PackingEnv(num_envs=args.episodes, device=args.device, seed=args.seed, **cfg)
        t0, c0 = time.perf_counter(), time.process_time()
        means = evaluate(env, policies[name])
        print(
            json.dumps(
                {
                    "policy": name,
                    "episodes": args.episodes,
                    "seed": args.seed,
                    "config": cfg,
                    "checkpoint": run,
                    "box_size": list(env.geometry.box_size),
                    "device": args.device,
                    "torch": torch.__version__,
                    "torchrl": torchrl.__version__,
                    "threads": torch.get_num_threads(),
                    "elapsed_sec": round(time.perf_counter() - t0, 1),
                    "cpu_sec": round(time.process_time() - c0, 1),
                    **{k: round(v, 4) for k, v in means.items()},
                }
            ),
            flush=True,
        )


def level_splits(policy) -> dict:
    """One learned level with the other replaced by the heuristic's rule, to tell what
    each level is worth: policy builders (geometry -> td -> td) for eval's loop."""

    def learned_manager(geometry):
        heuristic = HeuristicPolicy(geometry)
        return torch.no_grad()(lambda td: heuristic.place(td, policy.greedy_slot(td)))

    def learned_worker(geometry):
        def act(td):
            first = torch.zeros(td.batch_size[0], dtype=torch.int64, device=td.device)
            return policy.greedy_placement(td, first)  # slot 0: the largest item

        return torch.no_grad()(act)

    return {"learned_manager": learned_manager, "learned_worker": learned_worker}


if __name__ == "__main__":
    main()
