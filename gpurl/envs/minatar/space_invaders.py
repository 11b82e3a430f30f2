"""MinAtar Space Invaders, batched: a cannon on the bottom row shoots at a block of
aliens that sweeps from side to side and steps down at each edge, shooting back from the
alien nearest the cannon. +1 an alien; the episode ends when an alien bullet or an alien
reaches the cannon, or the aliens step down from the bottom row. A cleared wave comes
back; with difficulty ramping each new wave moves faster (down to a move every 6
frames). Deterministic but for sticky actions. Rules as MinAtar 1.0.15's
space_invaders.py.

Channels: cannon, alien, alien moving left, alien moving right, cannon bullet, alien
bullet. Minimal actions: no-op, left, right, fire.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import FIRE, LEFT, NOOP, RIGHT, SIZE, Game, cells, draw

SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
FASTEST_MOVE_INTERVAL = 6  # ramping stops here


class SpaceInvadersState(NamedTuple):
    pos: torch.Tensor  # int64 [B]: the cannon's column
    f_bullets: torch.Tensor  # bool [B, 10, 10]: the cannon's bullets
    e_bullets: torch.Tensor  # bool [B, 10, 10]: the aliens' bullets
    aliens: torch.Tensor  # bool [B, 10, 10]
    alien_dir: torch.Tensor  # int64 [B]: -1 left, +1 right
    move_interval: torch.Tensor  # int64 [B]: frames between the aliens' moves, at most
    move_timer: torch.Tensor  # int64 [B]
    shot_timer: torch.Tensor  # int64 [B]: frames until the aliens shoot
    ramp_index: torch.Tensor  # int64 [B]
    cool_down: torch.Tensor  # int64 [B]: frames until the cannon can shoot


def _wave(batch: int, device) -> torch.Tensor:
    aliens = torch.zeros((batch, SIZE, SIZE), dtype=torch.bool, device=device)
    aliens[:, 0:4, 2:8] = True
    return aliens


def init(batch: int, device) -> SpaceInvadersState:
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    maps = torch.zeros((batch, SIZE, SIZE), dtype=torch.bool, device=device)
    return SpaceInvadersState(zero, maps, maps, maps, zero - 1, *([zero] * 5))


def _where(mask, new, old):
    return tuple(
        torch.where(mask.reshape(-1, *([1] * (n.dim() - 1))), n, o)
        for n, o in zip(new, old, strict=True)
    )


def reset(state: SpaceInvadersState, mask: torch.Tensor, u: torch.Tensor):
    """A full wave, moving left; the cannon in column 5."""
    one = torch.ones_like(state.pos)
    maps = torch.zeros_like(state.aliens)
    fresh = SpaceInvadersState(
        one * 5, maps, maps, _wave(len(one), one.device), -one, one * ENEMY_MOVE_INTERVAL,
        one * ENEMY_MOVE_INTERVAL, one * ENEMY_SHOT_INTERVAL, one * 0, one * 0,
    )  # fmt: skip
    return SpaceInvadersState(*_where(mask, fresh, state))


def _at(grid: torch.Tensor, y: int, x: torch.Tensor) -> torch.Tensor:
    """grid[b, y, x[b]] for each env: bool [B]."""
    return grid[:, y].gather(1, x.unsqueeze(1)).squeeze(1)


def step(state: SpaceInvadersState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    (pos, f_bullets, e_bullets, aliens, alien_dir, move_interval, move_timer, shot_timer,
     ramp_index, cool_down) = state  # fmt: skip
    batch = len(pos)
    columns = torch.arange(SIZE, device=pos.device)

    fire = (action == FIRE) & (cool_down == 0)
    f_bullets = f_bullets | (cells(torch.full_like(pos, SIZE - 1), pos) & fire.view(-1, 1, 1))
    cool_down = torch.where(fire, SHOT_COOL_DOWN, cool_down)
    pos = torch.where(action == LEFT, (pos - 1).clamp_min(0), pos)
    pos = torch.where(action == RIGHT, (pos + 1).clamp_max(SIZE - 1), pos)

    # bullets: the cannon's up a row (off the top: gone), the aliens' down a row
    f_bullets = torch.cat((f_bullets[:, 1:], torch.zeros_like(f_bullets[:, :1])), dim=1)
    e_bullets = torch.cat((torch.zeros_like(e_bullets[:, :1]), e_bullets[:, :-1]), dim=1)
    terminal = _at(e_bullets, SIZE - 1, pos) | _at(aliens, SIZE - 1, pos)

    # the aliens move when their timer runs out: down a row (wrapping, as the reference's
    # roll does) and turning at an edge, else a column sideways
    moving = move_timer == 0
    count = aliens.sum((1, 2))
    move_timer = torch.where(moving, torch.minimum(count, move_interval), move_timer)
    edge = (aliens[:, :, 0].any(1) & (alien_dir < 0)) | (aliens[:, :, -1].any(1) & (alien_dir > 0))
    turn = moving & edge
    terminal = terminal | (turn & aliens[:, -1].any(1))
    alien_dir = torch.where(turn, -alien_dir, alien_dir)
    down = aliens.roll(1, dims=1)
    sideways = torch.where((alien_dir < 0).view(-1, 1, 1), aliens.roll(-1, 2), aliens.roll(1, 2))
    aliens = torch.where(turn.view(-1, 1, 1), down, aliens)
    aliens = torch.where((moving & ~turn).view(-1, 1, 1), sideways, aliens)
    terminal = terminal | (moving & _at(aliens, SIZE - 1, pos))

    # the aliens shoot from the lowest alien of the column nearest the cannon (ties: the
    # column on the left)
    shooting = shot_timer == 0
    shot_timer = torch.where(shooting, ENEMY_SHOT_INTERVAL, shot_timer)
    occupied = aliens.any(1)
    rank = (columns - pos.unsqueeze(1)).abs() * SIZE + columns
    col = torch.where(occupied, rank, SIZE * SIZE).argmin(1)
    in_col = aliens.gather(2, col.view(-1, 1, 1).expand(batch, SIZE, 1)).squeeze(2)
    row = torch.where(in_col, columns, -1).amax(1)
    e_bullets = e_bullets | cells(row, col, shooting & occupied.any(1))

    kills = aliens & f_bullets
    reward = kills.sum((1, 2)).to(torch.float32)
    aliens = aliens & ~kills
    f_bullets = f_bullets & ~kills

    cool_down = (cool_down - 1).clamp_min(0)
    move_timer = move_timer - 1
    shot_timer = shot_timer - 1
    cleared = ~aliens.flatten(1).any(1)
    if ramping:
        faster = cleared & (move_interval > FASTEST_MOVE_INTERVAL)
        move_interval = torch.where(faster, move_interval - 1, move_interval)
        ramp_index = torch.where(faster, ramp_index + 1, ramp_index)
    aliens = aliens | (_wave(batch, pos.device) & cleared.view(-1, 1, 1))
    state = SpaceInvadersState(
        pos, f_bullets, e_bullets, aliens, alien_dir, move_interval, move_timer, shot_timer,
        ramp_index, cool_down,
    )  # fmt: skip
    return state, reward, terminal


def observe(state: SpaceInvadersState) -> torch.Tensor:
    left = (state.alien_dir < 0).view(-1, 1, 1)
    return draw(
        (torch.full_like(state.pos, SIZE - 1), state.pos),
        state.aliens,
        state.aliens & left,
        state.aliens & ~left,
        state.f_bullets,
        state.e_bullets,
    )


GAME = Game(
    name="space_invaders",
    channels=6,
    actions=(NOOP, LEFT, RIGHT, FIRE),
    step_noise=0,
    reset_noise=0,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
)
