"""MinAtar Breakout, batched: a paddle on the bottom row, a ball that travels along
diagonals and three rows of bricks, +1 a brick; the episode ends when the ball reaches
the bottom row past the paddle. Cleared bricks come back when the ball reaches the
bottom row with none left. No difficulty ramp. Rules as MinAtar 1.0.15's breakout.py.

Channels: paddle, ball, trail (the ball's previous cell), brick.
Minimal actions: no-op, left, right.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import LEFT, NOOP, RIGHT, SIZE, Game, draw, lookup


class BreakoutState(NamedTuple):
    ball_x: torch.Tensor  # int64 [B]
    ball_y: torch.Tensor  # int64 [B]
    ball_dir: torch.Tensor  # int64 [B]: 0 up-left, 1 up-right, 2 down-right, 3 down-left
    pos: torch.Tensor  # int64 [B]: the paddle's column
    bricks: torch.Tensor  # bool [B, 10, 10]
    strike: torch.Tensor  # bool [B]: the ball struck a brick last step
    last_x: torch.Tensor  # int64 [B]
    last_y: torch.Tensor  # int64 [B]


# direction -> step, and the direction after each kind of bounce
_DX = (-1, 1, 1, -1)
_DY = (-1, -1, 1, 1)
_FLIP_X = (1, 0, 3, 2)
_FLIP_Y = (3, 2, 1, 0)
_FLIP_XY = (2, 3, 0, 1)


def _fresh_bricks(batch: int, device) -> torch.Tensor:
    bricks = torch.zeros((batch, SIZE, SIZE), dtype=torch.bool, device=device)
    bricks[:, 1:4] = True
    return bricks


def init(batch: int, device) -> BreakoutState:
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    no = torch.zeros(batch, dtype=torch.bool, device=device)
    return BreakoutState(zero, zero, zero, zero, _fresh_bricks(batch, device), no, zero, zero)


def reset(state: BreakoutState, mask: torch.Tensor, u: torch.Tensor) -> BreakoutState:
    """The ball starts on row 3 at the left wall heading down-right or at the right wall
    heading down-left (even odds: the reference's randint(2)); the paddle in column 4."""
    right = u[:, 0] >= 0.5
    x = torch.where(right, 9, 0)
    d = torch.where(right, 3, 2)
    three = torch.full_like(x, 3)
    fresh = BreakoutState(
        x, three, d, torch.full_like(x, 4), _fresh_bricks(len(x), x.device),
        torch.zeros_like(mask), x, three,
    )  # fmt: skip
    return BreakoutState(
        *(
            torch.where(mask.reshape(-1, *([1] * (f.dim() - 1))), f, s)
            for f, s in zip(fresh, state, strict=True)
        )
    )


def step(state: BreakoutState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    ball_x, ball_y, d, pos, bricks, strike, _, _ = state
    pos = torch.where(action == LEFT, (pos - 1).clamp_min(0), pos)
    pos = torch.where(action == RIGHT, (pos + 1).clamp_max(SIZE - 1), pos)
    last_x, last_y = ball_x, ball_y
    new_x = ball_x + lookup(_DX, d)
    new_y = ball_y + lookup(_DY, d)

    off_side = (new_x < 0) | (new_x > SIZE - 1)
    new_x = new_x.clamp(0, SIZE - 1)
    d = torch.where(off_side, lookup(_FLIP_X, d), d)

    top = new_y < 0
    flat = bricks.reshape(len(d), -1)
    index = new_y.clamp_min(0) * SIZE + new_x
    on_brick = ~top & flat.gather(1, index.unsqueeze(1)).squeeze(1)
    breaks = on_brick & ~strike
    flat = flat.scatter(1, index.unsqueeze(1), (flat.gather(1, index.unsqueeze(1))
                                                 & ~breaks.unsqueeze(1)))  # fmt: skip
    bottom = ~top & ~on_brick & (new_y == SIZE - 1)
    refill = bottom & ~flat.any(1)
    bricks = torch.where(
        refill.reshape(-1, 1, 1), _fresh_bricks(len(d), d.device), flat.view_as(bricks)
    )
    straight = bottom & (ball_x == pos)  # the ball came down onto the paddle's cell
    corner = bottom & ~straight & (new_x == pos)  # it meets the paddle's corner
    terminal = bottom & ~straight & ~corner

    d = torch.where(top | breaks | straight, lookup(_FLIP_Y, d), d)
    d = torch.where(corner, lookup(_FLIP_XY, d), d)
    new_y = torch.where(top, 0, new_y)
    new_y = torch.where(breaks | straight | corner, last_y, new_y)
    strike = on_brick  # struck this step (broken, or passed through right after a break)
    reward = breaks.to(torch.float32)
    return BreakoutState(new_x, new_y, d, pos, bricks, strike, last_x, last_y), reward, terminal


def observe(state: BreakoutState) -> torch.Tensor:
    ten = torch.full_like(state.pos, SIZE - 1)
    return draw(
        (ten, state.pos),
        (state.ball_y, state.ball_x),
        (state.last_y, state.last_x),
        state.bricks,
    )


GAME = Game(
    name="breakout",
    channels=4,
    actions=(NOOP, LEFT, RIGHT),
    step_noise=0,
    reset_noise=1,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
)
