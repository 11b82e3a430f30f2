"""A new env in one module, as docs/extending.md's checklist has it: the env, its keys,
and the decorator that registers both. Nothing else in gpurl changes.

A corridor: positions 0..length, starting at 0; action 1 steps right, 0 left; reaching
the end pays 1 and ends the episode.
"""

from typing import NamedTuple

import torch
from torchrl.data import Categorical, Unbounded

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.base import NativeEnv, StepResult
from gpurl.envs.config import EnvConfig


@declare(name="corridor", num_envs=16, eval_envs=2)
class CorridorConfig(EnvConfig):
    """A corridor to walk to its end (tests/extending/corridor.py)."""

    obs = "vector"

    length: int = key(4, "steps from the start to the end", ge=1)


class CorridorState(NamedTuple):
    position: torch.Tensor  # int64 [B]
    steps: torch.Tensor  # int64 [B]


@register("env", "corridor", CorridorConfig)
class CorridorEnv(NativeEnv):
    max_episode_steps = 12

    def __init__(self, num_envs: int = 1, device="cpu", seed: int = 0, length: int = 4):
        super().__init__(num_envs, device, seed)
        self.length = int(length)
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, self.length + 1), device=self.device)},
            Categorical(2, shape=b, device=self.device),
        )
        zeros = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.env_state = CorridorState(zeros, zeros.clone())

    def _reset_where(self, mask):
        state = self.env_state
        self.env_state = CorridorState(
            torch.where(mask, 0, state.position), torch.where(mask, 0, state.steps)
        )

    def _advance(self, action) -> StepResult:
        move = torch.where(action.reshape(self.batch_size) == 1, 1, -1)
        position = (self.env_state.position + move).clamp(0, self.length)
        steps = self.env_state.steps + 1
        self.env_state = CorridorState(position, steps)
        terminated = position == self.length
        truncated = (steps >= self.max_episode_steps) & ~terminated
        reward = terminated.float()
        return StepResult(reward[:, None], terminated[:, None], truncated[:, None])

    def _observation(self):
        one_hot = torch.nn.functional.one_hot(self.env_state.position, self.length + 1)
        return {"observation": one_hot.float()}
