"""Run a policy exported by `python -m gpurl.export RUN_DIR --onnx` with onnxruntime
alone: no torch or gpurl in this process. gpurl's CartPole has Gymnasium's CartPole-v1
dynamics, so a policy trained on it (the default run) balances Gymnasium's pole.

    python examples/run_exported_onnx.py runs/<date>/<time>_dqn_cartpole_s0/export/policy.onnx
"""

import sys

import gymnasium as gym
import numpy as np
import onnxruntime

session = onnxruntime.InferenceSession(sys.argv[1])  # observations [batch, 4] -> actions
(entry,) = session.get_inputs()
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
total, done = 0.0, False
while not done:
    action = session.run(None, {entry.name: np.asarray(obs, dtype=np.float32)[None]})[0][0]
    obs, reward, terminated, truncated, _ = env.step(int(action))
    total, done = total + reward, terminated or truncated
print(f"return {total:.0f} on Gymnasium's CartPole-v1; torch imported: {'torch' in sys.modules}")
