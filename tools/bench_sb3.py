"""Stable-Baselines3's DQN on CartPole-v1 with the RL Zoo's tuned hyperparameters, timed
on this machine: the wall time a researcher would pay with the library they would
otherwise pick, next to gpurl's dqn_cartpole preset (docs/results.md#cartpole).

    pip install -e '.[peers]'          # stable-baselines3
    python tools/bench_sb3.py --seeds 0 1 2

Hyperparameters (RL Zoo, hyperparams/dqn.yml, CartPole-v1): 50,000 steps of one env,
MlpPolicy [256, 256], lr 2.3e-3, batch 64, buffer 100,000, learning_starts 1,000,
gamma 0.99, target_update_interval 10, train_freq 256, gradient_steps 128 (25,000
updates in all), exploration_fraction 0.16, exploration_final_eps 0.04. The final
evaluation is 10 deterministic episodes, as gpurl's. One JSON record per seed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

ZOO = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1_000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)


def run(seed: int, steps: int) -> dict:
    import gymnasium as gym
    import stable_baselines3
    from stable_baselines3 import DQN
    from stable_baselines3.common.evaluation import evaluate_policy

    env = gym.make("CartPole-v1")
    model = DQN("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **ZOO)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - start
    mean, std = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=10)
    return {
        "tool": "bench_sb3",
        "library": f"stable-baselines3 {stable_baselines3.__version__}",
        "algo": "DQN (RL Zoo CartPole-v1 hyperparameters)",
        "seed": seed,
        "steps": steps,
        "wall_time_s": round(wall, 2),
        "eval_return": float(mean),
        "eval_return_std": float(std),
        "commit": gpurl_commit(),
        **environment_record("cpu"),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        emit(run(seed, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
