"""Held-out success of trained pixel runs, greedy and sampled.

    python tools/eval_pixels.py runs/record/pixels_ppo_s0 runs/record/pixels_ppo_s1
    python tools/eval_pixels.py RUN --eval-envs 512 --samples 3

For each run directory (or checkpoint file in one): the run loaded as gpurl's
TrainedPolicy and played on the run's own held-out worlds (gpurl.envs.make_eval_env
with the run's seed; --eval-envs widens the set, the first env.eval_envs of them are
the worlds the run was evaluated on), through the env's evaluation protocol, as
gpurl.eval does: once greedy (gpurl.trainers.evaluation.evaluate_protocol, the figures
`python -m gpurl.eval RUN --episodes N` prints) and, what gpurl.eval does not,
--samples times with actions sampled from the policy (RANDOM: a stochastic policy as
it acts in training). One JSON record per run: return, success and length of each,
and how many worlds show the goal at the start. Sampling is for policy-gradient
agents (PPO, A2C): an epsilon-greedy agent's exploration reads the progress record,
which a loaded run starts at 0 frames (epsilon 1: uniform actions).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs import make_eval_env  # noqa: E402
from gpurl.trainers.evaluation import evaluate_protocol  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit, trained_policy  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("runs", nargs="+", help="run directories (or checkpoints)")
    p.add_argument("--eval-envs", type=int, default=None, help="default: the run's")
    p.add_argument("--samples", type=int, default=3, help="sampled passes (their mean)")
    p.add_argument("--seed", type=int, default=0, help="torch seed of the sampled passes")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    for run in args.runs:
        trained = trained_policy(run)
        cfg, policy = trained.cfg, trained.policy
        env_cfg = dict(cfg.env)
        if args.eval_envs:
            env_cfg["eval_envs"] = args.eval_envs
        env = make_eval_env(env_cfg, seed=int(cfg.seed))
        record = {"tool": "eval_pixels", "run": str(run), "seed": int(cfg.seed)}
        record["agent"], record["eval_envs"] = cfg.agent.name, env.num_envs
        record["greedy"] = evaluate_protocol(env, policy)
        torch.manual_seed(args.seed)
        with set_exploration_type(ExplorationType.RANDOM), torch.no_grad():
            passes = [env.evaluation_protocol(policy) for _ in range(args.samples)]
        record["sampled"] = {k: sum(m[k] for m in passes) / len(passes) for k in passes[0]}
        record["sampled_passes"] = [round(m["success"], 4) for m in passes]
        offset = (env.goal_pos - env.cache["pos"]).div(8, rounding_mode="floor")
        visible = (offset[:, 0].abs() <= 4) & (offset[:, 1] >= -4) & (offset[:, 1] <= 5)
        record["goal_visible_at_start"] = int(visible.sum())
        emit({**record, "commit": gpurl_commit(), **environment_record("cpu")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
