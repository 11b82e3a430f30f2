"""Train on Catch from Python (gpurl.api), once with gpurl's DQN and once with the soft
Q-learning agent of examples/soft_dqn.py, and print their final greedy returns.

    PYTHONPATH=examples python examples/train_catch.py [--frames 20000]
"""

import argparse

from catch import CatchEnv
from soft_dqn import SoftDQNAgent

from gpurl import api


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    trainer = {
        "total_frames": args.frames,
        "eval_interval": max(args.frames // 4, 1),
        "init_random_frames": 1000,
        "progress": False,
    }
    env = {"_target_": CatchEnv, "name": "catch", "num_envs": 16, "eval_envs": 64}
    agents = {  # gpurl's DQN, and the soft Q-learning agent on DQN's config
        "dqn": "dqn",
        "soft_dqn": {
            "config": "dqn",
            "_target_": SoftDQNAgent,
            "name": "soft_dqn",
            "temperature": 0.05,
        },
    }
    for label, agent in agents.items():
        summary = api.train(env=env, agent=agent, trainer=trainer, seed=args.seed, logger="none")
        print(
            f"{label}: final greedy return {summary['eval_return']:.2f} on Catch "
            f"(random play about -0.6, perfect 1.0); run in {summary['run_dir']}"
        )


if __name__ == "__main__":
    main()
