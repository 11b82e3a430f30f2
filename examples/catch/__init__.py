"""Catch (bsuite's, after Osband et al. 2020), an env package outside gpurl.

A ball falls one row a step down a 10 x 5 grid from a random column; the paddle on the
bottom row moves left, stays or moves right. When the ball reaches the bottom the
episode ends: +1 if the paddle is under it, -1 if not. Random play scores about -0.6.
The observation is the grid flattened, ball and paddle cells set to 1.

Installed (pip install -e examples/), its entry point registers it as env=catch:

    python -m gpurl.train env=catch agent=dqn
"""

from typing import NamedTuple

import torch
from torchrl.data import Categorical, Unbounded

from gpurl.core.config import declare
from gpurl.core.registry import register
from gpurl.envs.base import NativeEnv, StepResult
from gpurl.envs.config import EnvConfig

ROWS, COLUMNS = 10, 5


@declare(name="catch", num_envs=16, eval_envs=64)
class CatchConfig(EnvConfig):
    """Catch (examples/catch): catch a falling ball with a paddle, +1 or -1 per ball."""

    obs = "vector"


class CatchState(NamedTuple):
    ball_x: torch.Tensor  # int64 [B]: the ball's column
    ball_y: torch.Tensor  # int64 [B]: its row, 0 at the top
    paddle: torch.Tensor  # int64 [B]: the paddle's column


@register("env", "catch", CatchConfig)
class CatchEnv(NativeEnv):
    max_episode_steps = ROWS - 1

    def __init__(self, num_envs: int = 1, device="cpu", seed: int = 0):
        super().__init__(num_envs, device, seed)
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, ROWS * COLUMNS), device=self.device)},
            Categorical(3, shape=b, device=self.device),  # left, stay, right
        )
        zero = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.env_state = CatchState(zero, zero.clone(), zero.clone())
        self._reset_where(torch.ones(b, dtype=torch.bool, device=self.device))

    def _reset_where(self, mask):
        s = self.env_state
        column = torch.randint(COLUMNS, s.ball_x.shape, generator=self.rng, device=self.device)
        self.env_state = CatchState(
            torch.where(mask, column, s.ball_x),
            torch.where(mask, 0, s.ball_y),
            torch.where(mask, COLUMNS // 2, s.paddle),
        )

    def _advance(self, action) -> StepResult:
        s = self.env_state
        paddle = (s.paddle + action.reshape(s.paddle.shape) - 1).clamp(0, COLUMNS - 1)
        ball_y = s.ball_y + 1
        self.env_state = CatchState(s.ball_x, ball_y, paddle)
        landed = ball_y == ROWS - 1
        reward = torch.where(s.ball_x == paddle, 1.0, -1.0) * landed
        return StepResult(reward[:, None], landed[:, None], torch.zeros_like(landed)[:, None])

    def _observation(self):
        s = self.env_state
        grid = torch.zeros((s.paddle.shape[0], ROWS, COLUMNS), device=self.device)
        rows = torch.arange(s.paddle.shape[0], device=self.device)
        grid[rows, s.ball_y, s.ball_x] = 1.0
        grid[rows, ROWS - 1, s.paddle] = 1.0
        return {"observation": grid.flatten(1)}
