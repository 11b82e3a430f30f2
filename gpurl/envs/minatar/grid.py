"""What every MinAtar game module shares: the full action set, the game interface and
small batched helpers for drawing objects on the 10 x 10 grid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

SIZE = 10  # the grid is SIZE x SIZE cells
# MinAtar's full action set; a game acts through its minimal subset of these
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)


@dataclass(frozen=True)
class Game:
    """One MinAtar game as pure batched tensor functions over its state (a NamedTuple
    of tensors, batch first).

    init(batch, device)            a state (contents irrelevant: every env is reset first)
    reset(state, mask, u)          fresh episodes where mask [B]; u [B, reset_noise] uniforms
    step(state, action, u, ramp)   one frame for every env; `action` [B] full-set indices,
                                   u [B, step_noise] uniforms, `ramp` a Python flag;
                                   returns (state, reward [B] float, terminal [B] bool)
    observe(state)                 bool [B, channels, 10, 10]
    """

    name: str
    channels: int
    actions: tuple[int, ...]  # the minimal action set, as full-set indices
    step_noise: int
    reset_noise: int
    init: Callable
    reset: Callable
    step: Callable
    observe: Callable


def cells(y: torch.Tensor, x: torch.Tensor, on: torch.Tensor | None = None) -> torch.Tensor:
    """bool [B, 10, 10] with cell (y, x) set for each env, where `on` (bool [B]) is True;
    y and x [B]. A position outside the grid sets nothing."""
    return cells_any(y.unsqueeze(1), x.unsqueeze(1), None if on is None else on.unsqueeze(1))


def cells_any(y: torch.Tensor, x: torch.Tensor, on: torch.Tensor | None = None) -> torch.Tensor:
    """bool [B, 10, 10] with cell (y, x) set for each of the B x N entries of y and x
    [B, N] where `on` (bool [B, N]) is True; positions outside the grid set nothing."""
    inside = (y >= 0) & (y < SIZE) & (x >= 0) & (x < SIZE)
    if on is not None:
        inside = inside & on
    flat = torch.where(inside, y * SIZE + x, SIZE * SIZE)  # off the grid: one spare cell
    grid = torch.zeros((len(y), SIZE * SIZE + 1), dtype=torch.bool, device=y.device)
    return grid.scatter(1, flat, True)[:, : SIZE * SIZE].reshape(-1, SIZE, SIZE)


def randint(u: torch.Tensor, low, high) -> torch.Tensor:
    """An integer uniform on [low, high) from a uniform [0, 1): low + floor(u (high - low))
    (int64); `high` may be a tensor."""
    return (low + (u * (high - low)).floor()).long().clamp_max(torch.as_tensor(high) - 1)


def lookup(values: tuple[int, ...], index: torch.Tensor) -> torch.Tensor:
    """values[index] for an int64 index tensor and a small table of Python ints: a chain
    of selects, no table tensor (so the step traces with no tensor constants)."""
    out = torch.full_like(index, values[0])
    for i, value in enumerate(values[1:], start=1):
        out = torch.where(index == i, value, out)
    return out
