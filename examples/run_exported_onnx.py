"""Run a policy exported by `python -m gpurl.export RUN_DIR --onnx` with onnxruntime
alone: no torch or gpurl in this process. gpurl's CartPole has Gymnasium's CartPole-v1
dynamics, so a policy trained on it (the default run) balances Gymnasium's pole.

    python examples/run_exported_onnx.py runs/<date>/<time>_dqn_cartpole_s0/export/policy.onnx

policy.json beside the model says what it takes (examples/run_exported.py: a recurrent
policy's step takes and returns its state; a masked CartPole policy reads 2 entries).
"""

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnxruntime

path = Path(sys.argv[1])
session = onnxruntime.InferenceSession(str(path))
meta = json.loads(path.with_suffix(".json").read_text())
names = [i.name for i in session.get_inputs()]  # the entry, then state and first if any
(entry,) = meta["inputs"]
seen = [0, 1, 2, 3] if entry["shape"] == [4] else [0, 2]  # masked: position and angle
state = None if meta["state"] is None else np.zeros((1, *meta["state"]["shape"]), np.float32)
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
total, done, first = 0.0, False, np.ones(1, dtype=bool)
while not done:
    x = np.asarray(obs[seen], dtype=np.float32)[None]
    if state is None:
        action = session.run(None, {names[0]: x})[0][0]
    else:
        action, state = session.run(None, dict(zip(names, (x, state, first), strict=True)))
        action, first = action[0], np.zeros(1, dtype=bool)
    obs, reward, terminated, truncated, _ = env.step(int(action))
    total, done = total + reward, terminated or truncated
print(f"return {total:.0f} on Gymnasium's CartPole-v1; torch imported: {'torch' in sys.modules}")
