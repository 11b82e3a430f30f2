"""MinAtar Space Invaders, batched: a cannon on the bottom row shoots at a block of
aliens that sweeps from side to side and steps down at each edge, shooting back from the
alien nearest the cannon. +1 an alien; the episode ends when an alien bullet or an alien
reaches the cannon, or the aliens step down from the bottom row. A cleared wave comes
back; with difficulty ramping each new wave moves faster (down to a move every 6
frames). Deterministic but for sticky actions. Rules as MinAtar 1.0.15's
space_invaders.py.

Channels: cannon, alien, alien moving left, alien moving right, cannon bullet, alien
bullet. Minimal actions: no-op, left, right, fire.

The aliens and both kinds of bullet are rows of bits, one int64 per row per env (bit x:
column x): moving a block, shooting and hitting are integer ops on 10 rows per env
instead of passes over a bool [B, 10, 10] grid; only the observation expands the bits.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import FIRE, LEFT, NOOP, RIGHT, SIZE, Game, pack_rows, unpack_cells

SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
FASTEST_MOVE_INTERVAL = 6  # ramping stops here
FULL_ROW = (1 << SIZE) - 1
WAVE_ROW, WAVE_ROWS = 0b0011111100, 4  # a fresh wave: columns 2-7 of rows 0-3
CHANNELS = 6


class SpaceInvadersState(NamedTuple):
    pos: torch.Tensor  # int64 [B]: the cannon's column
    f_bullets: torch.Tensor  # int64 [B, 10]: the cannon's bullets, a bit per column a row
    e_bullets: torch.Tensor  # int64 [B, 10]: the aliens' bullets, the same way
    aliens: torch.Tensor  # int64 [B, 10]: the aliens, the same way
    alien_dir: torch.Tensor  # int64 [B]: -1 left, +1 right
    move_interval: torch.Tensor  # int64 [B]: frames between the aliens' moves, at most
    move_timer: torch.Tensor  # int64 [B]
    shot_timer: torch.Tensor  # int64 [B]: frames until the aliens shoot
    ramp_index: torch.Tensor  # int64 [B]
    cool_down: torch.Tensor  # int64 [B]: frames until the cannon can shoot


def _wave(like: torch.Tensor) -> torch.Tensor:
    """A fresh wave as rows [B, 10], for `like`'s batch ([B] int64)."""
    rows = torch.arange(SIZE, device=like.device)
    return torch.where(rows < WAVE_ROWS, WAVE_ROW, 0).expand(len(like), SIZE)


def grid(rows: torch.Tensor) -> torch.Tensor:
    """bool [..., 10, 10] of rows [..., 10] (bit x of row y: cell (y, x))."""
    columns = torch.arange(SIZE, device=rows.device)
    return ((rows.unsqueeze(-1) >> columns) & 1).bool()


def _count(rows: torch.Tensor) -> torch.Tensor:
    """The set bits of rows [B, 10], per env [B]: the rows laid side by side in two
    50-bit words, each counted by one 64-bit popcount (SWAR), not ten."""
    total = None
    for half in (rows[:, :5], rows[:, 5:]):
        x = half[:, 0]
        for r in range(1, 5):
            x = x | (half[:, r] << (SIZE * r))
        x = x - ((x >> 1) & 0x5555555555555555)
        x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
        x = x + (x >> 8)
        x = x + (x >> 16)
        x = (x + (x >> 32)) & 0x7F
        total = x if total is None else total + x
    return total


def _columns(rows: torch.Tensor) -> torch.Tensor:
    """The columns [B, 10] (bool) holding a set bit in any of rows [B, 10]."""
    union = rows[:, 0]
    for r in range(1, SIZE):
        union = union | rows[:, r]
    return ((union.unsqueeze(1) >> torch.arange(SIZE, device=rows.device)) & 1).bool()


def init(batch: int, device) -> SpaceInvadersState:
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    rows = torch.zeros((batch, SIZE), dtype=torch.int64, device=device)
    return SpaceInvadersState(zero, rows, rows, rows, zero - 1, *([zero] * 5))


def _where(mask, new, old):
    return tuple(
        torch.where(mask.reshape(-1, *([1] * (n.dim() - 1))), n, o)
        for n, o in zip(new, old, strict=True)
    )


def reset(state: SpaceInvadersState, mask: torch.Tensor, u: torch.Tensor):
    """A full wave, moving left; the cannon in column 5."""
    one = torch.ones_like(state.pos)
    rows = torch.zeros_like(state.aliens)
    fresh = SpaceInvadersState(
        one * 5, rows, rows, _wave(one), -one, one * ENEMY_MOVE_INTERVAL,
        one * ENEMY_MOVE_INTERVAL, one * ENEMY_SHOT_INTERVAL, one * 0, one * 0,
    )  # fmt: skip
    return SpaceInvadersState(*_where(mask, fresh, state))


def _at(rows: torch.Tensor, y: int, x: torch.Tensor) -> torch.Tensor:
    """Cell (y, x[b]) of each env's rows: bool [B]."""
    return ((rows[:, y] >> x) & 1).bool()


def step(state: SpaceInvadersState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    (pos, f_bullets, e_bullets, aliens, alien_dir, move_interval, move_timer, shot_timer,
     ramp_index, cool_down) = state  # fmt: skip
    columns = torch.arange(SIZE, device=pos.device)  # also the row indices
    bottom = columns == SIZE - 1

    fire = (action == FIRE) & (cool_down == 0)
    shot = torch.ones_like(pos) << pos  # the cannon's column as a row's bit
    f_bullets = f_bullets | torch.where(bottom & fire.unsqueeze(1), shot.unsqueeze(1), 0)
    cool_down = torch.where(fire, SHOT_COOL_DOWN, cool_down)
    pos = torch.where(action == LEFT, (pos - 1).clamp_min(0), pos)
    pos = torch.where(action == RIGHT, (pos + 1).clamp_max(SIZE - 1), pos)

    # bullets: the cannon's up a row (off the top: gone), the aliens' down a row
    f_bullets = torch.cat((f_bullets[:, 1:], torch.zeros_like(f_bullets[:, :1])), dim=1)
    e_bullets = torch.cat((torch.zeros_like(e_bullets[:, :1]), e_bullets[:, :-1]), dim=1)
    terminal = _at(e_bullets, SIZE - 1, pos) | _at(aliens, SIZE - 1, pos)

    # the aliens move when their timer runs out: down a row (wrapping, as the reference's
    # roll does) and turning at an edge, else a column sideways (wrapping too)
    moving = move_timer == 0
    move_timer = torch.where(moving, torch.minimum(_count(aliens), move_interval), move_timer)
    at_left, at_right = (aliens & 1).any(1), (aliens >> (SIZE - 1)).any(1)
    edge = (at_left & (alien_dir < 0)) | (at_right & (alien_dir > 0))
    turn = moving & edge
    terminal = terminal | (turn & (aliens[:, -1] != 0))
    alien_dir = torch.where(turn, -alien_dir, alien_dir)
    down = aliens.roll(1, dims=1)
    leftward = (aliens >> 1) | ((aliens & 1) << (SIZE - 1))
    rightward = ((aliens << 1) & FULL_ROW) | (aliens >> (SIZE - 1))
    sideways = torch.where((alien_dir < 0).unsqueeze(1), leftward, rightward)
    aliens = torch.where(turn.unsqueeze(1), down, aliens)
    aliens = torch.where((moving & ~turn).unsqueeze(1), sideways, aliens)
    terminal = terminal | (moving & _at(aliens, SIZE - 1, pos))

    # the aliens shoot from the lowest alien of the column nearest the cannon (ties: the
    # column on the left)
    shooting = shot_timer == 0
    shot_timer = torch.where(shooting, ENEMY_SHOT_INTERVAL, shot_timer)
    occupied = _columns(aliens)  # [B, 10] columns
    rank = (columns - pos.unsqueeze(1)).abs() * SIZE + columns
    col = torch.where(occupied, rank, SIZE * SIZE).argmin(1, keepdim=True)
    row = torch.where(((aliens >> col) & 1).bool(), columns, -1).amax(1, keepdim=True)
    shoots = (columns == row) & (shooting & occupied.any(1)).unsqueeze(1)
    e_bullets = e_bullets | torch.where(shoots, torch.ones_like(col) << col, 0)

    kills = aliens & f_bullets
    reward = _count(kills).to(torch.float32)
    aliens = aliens & ~kills
    f_bullets = f_bullets & ~kills

    cool_down = (cool_down - 1).clamp_min(0)
    move_timer = move_timer - 1
    shot_timer = shot_timer - 1
    cleared = (aliens == 0).all(1)
    if ramping:
        faster = cleared & (move_interval > FASTEST_MOVE_INTERVAL)
        move_interval = torch.where(faster, move_interval - 1, move_interval)
        ramp_index = torch.where(faster, ramp_index + 1, ramp_index)
    aliens = torch.where(cleared.unsqueeze(1), _wave(pos), aliens)
    state = SpaceInvadersState(
        pos, f_bullets, e_bullets, aliens, alien_dir, move_interval, move_timer, shot_timer,
        ramp_index, cool_down,
    )  # fmt: skip
    return state, reward, terminal


def observe_packed(state: SpaceInvadersState) -> torch.Tensor:
    # every channel as rows of bits, expanded in one pass
    bottom = torch.arange(SIZE, device=state.pos.device) == SIZE - 1
    cannon = torch.where(bottom, (torch.ones_like(state.pos) << state.pos).unsqueeze(1), 0)
    left = torch.where(state.alien_dir < 0, FULL_ROW, 0).unsqueeze(1)
    aliens = state.aliens
    channels = (cannon, aliens, aliens & left, aliens & ~left, state.f_bullets, state.e_bullets)
    return pack_rows(torch.cat(channels, 1))


def observe(state: SpaceInvadersState) -> torch.Tensor:
    return unpack_cells(observe_packed(state), CHANNELS)


GAME = Game(
    name="space_invaders",
    channels=CHANNELS,
    actions=(NOOP, LEFT, RIGHT, FIRE),
    step_noise=0,
    reset_noise=0,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
    observe_packed=observe_packed,
)
