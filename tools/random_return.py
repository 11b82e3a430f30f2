"""The return of uniform random actions on a preset's evaluation envs: the floor a
learning curve is read against.

    python tools/random_return.py pixels_pqn --seeds 0 1 2
    python tools/random_return.py pqn_cartpole -- env.eval_envs=32

Builds the preset's evaluation env as a run of that seed does (gpurl.envs.make_eval_env:
seed + 10000, env.eval_envs copies, held-out worlds for env=pixels), runs each copy for
one episode with uniform random actions through the env's evaluation protocol when it
has one, `--passes` times, and prints one JSON record per seed: the mean return of each
pass and their mean (and the protocol's success, when it reports one). Discrete actions
are drawn uniformly from the action set, continuous ones uniformly within the action
spec's bounds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs import make_eval_env  # noqa: E402
from gpurl.train import load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402


def uniform_policy(spec, key="action"):
    """Uniform random actions of an action spec at the env's action key (a multi-robot
    env's is nested: ("agents", "action")): TorchRL's spec.rand(), which draws from the
    action set of a discrete spec and within the bounds of a continuous one."""

    def act(td):
        td.set(key, spec.rand())
        return td

    return act


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("preset", help="an experiment preset (gpurl/configs/experiment)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--passes", type=int, default=5)
    args, overrides = p.parse_known_args(argv)
    overrides = [o for o in overrides if o != "--"]
    torch.set_num_threads(1)
    for seed in args.seeds:
        cfg = load_config([f"experiment={args.preset}", f"seed={seed}", *overrides])
        torch.manual_seed(seed)
        # the evaluation env of a run (train.build): the same worlds the run is judged on
        env = make_eval_env(cfg.env, device="cpu", seed=seed)
        policy = uniform_policy(env.full_action_spec[env.action_key], env.action_key)
        passes = [env.evaluation_protocol(policy) for _ in range(args.passes)]
        returns = [m["return"] for m in passes]
        extra = {}
        if "success" in passes[0]:
            extra["mean_success"] = round(sum(m["success"] for m in passes) / len(passes), 4)
        emit(
            {
                "tool": "random_return",
                "preset": args.preset,
                "seed": seed,
                "overrides": overrides,
                "eval_envs": int(cfg.env.eval_envs),
                "pass_returns": [round(r, 4) for r in returns],
                "mean_return": round(sum(returns) / len(returns), 4),
                **extra,
                "commit": gpurl_commit(),
                **environment_record("cpu"),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
