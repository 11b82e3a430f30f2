"""Run a policy exported by `python -m gpurl.export` with torch alone: no gpurl, TorchRL
or TensorDict in this process. gpurl's CartPole has Gymnasium's CartPole-v1 dynamics,
so a policy trained on it (the default run) balances Gymnasium's pole.

    python examples/run_exported.py runs/<date>/<time>_dqn_cartpole_s0/export/policy.pt2

policy.json beside the program says what it takes. A feedforward policy maps
observations [batch, 4] to actions [batch]. A recurrent one (agent.recurrent) is a step
with its state made explicit, (observations, state, first) -> (action, state): the
state starts at zeros, `first` is True on an episode's first step, and the state it
returns goes in with the next step. A policy trained with env.observe_velocity=false
takes the cart's position and the pole's angle alone (2 entries).
"""

import json
import sys
from pathlib import Path

import gymnasium as gym
import torch

path = Path(sys.argv[1])
program = torch.export.load(path).module()
meta = json.loads(path.with_suffix(".json").read_text())
(entry,) = meta["inputs"]
seen = [0, 1, 2, 3] if entry["shape"] == [4] else [0, 2]  # masked: position and angle
state = None if meta["state"] is None else torch.zeros(1, *meta["state"]["shape"])
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
total, done, first = 0.0, False, torch.ones(1, dtype=torch.bool)
while not done:
    x = torch.as_tensor(obs[seen], dtype=torch.float32)[None]
    if state is None:
        action = program(x)[0]
    else:
        action, state = program(x, state, first)
        action, first = action[0], torch.zeros(1, dtype=torch.bool)
    obs, reward, terminated, truncated, _ = env.step(int(action))
    total, done = total + reward, terminated or truncated
print(f"return {total:.0f} on Gymnasium's CartPole-v1; gpurl imported: {'gpurl' in sys.modules}")
