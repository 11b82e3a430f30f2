"""Run a policy exported by `python -m gpurl.export` with torch alone: no gpurl, TorchRL
or TensorDict in this process. gpurl's CartPole has Gymnasium's CartPole-v1 dynamics,
so a policy trained on it (the default run) balances Gymnasium's pole.

    python examples/run_exported.py runs/<date>/<time>_dqn_cartpole_s0/export/policy.pt2
"""

import sys

import gymnasium as gym
import torch

program = torch.export.load(sys.argv[1]).module()  # observations [batch, 4] -> actions [batch]
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
total, done = 0.0, False
while not done:
    action = program(torch.as_tensor(obs, dtype=torch.float32)[None])[0]
    obs, reward, terminated, truncated, _ = env.step(int(action))
    total, done = total + reward, terminated or truncated
print(f"return {total:.0f} on Gymnasium's CartPole-v1; gpurl imported: {'gpurl' in sys.modules}")
