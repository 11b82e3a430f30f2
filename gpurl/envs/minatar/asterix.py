"""MinAtar Asterix, batched: the player moves in four directions; enemies and gold
appear at the sides, one a lane (rows 1..8), and cross the screen. +1 a gold picked up;
the episode ends when an enemy meets the player. With difficulty ramping, every 100
frames things appear more often and, every other time, move faster. Rules as MinAtar
1.0.15's asterix.py.

Channels: player, enemy, trail (the cell behind each enemy or gold), gold.
Minimal actions: no-op, left, up, right, down.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import DOWN, LEFT, NOOP, REALIZE_SHARED, RIGHT, SIZE, UP, Game, draw

RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5
LANES = 8  # slot i is row i + 1


class AsterixState(NamedTuple):
    ent_x: torch.Tensor  # int64 [B, 8]: each lane's entity's column
    ent_on: torch.Tensor  # bool [B, 8]: the lane holds an entity
    ent_right: torch.Tensor  # bool [B, 8]: it moves right
    ent_gold: torch.Tensor  # bool [B, 8]: gold (else an enemy)
    player_x: torch.Tensor  # int64 [B]
    player_y: torch.Tensor  # int64 [B]
    spawn_speed: torch.Tensor  # int64 [B]
    spawn_timer: torch.Tensor  # int64 [B]
    move_speed: torch.Tensor  # int64 [B]
    move_timer: torch.Tensor  # int64 [B]
    ramp_timer: torch.Tensor  # int64 [B]
    ramp_index: torch.Tensor  # int64 [B]


def init(batch: int, device) -> AsterixState:
    lanes = torch.zeros((batch, LANES), dtype=torch.int64, device=device)
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    no = lanes.bool()
    return AsterixState(lanes, no, no, no, *([zero] * 8))


def reset(state: AsterixState, mask: torch.Tensor, u: torch.Tensor) -> AsterixState:
    """No entities, the player at (5, 5), the initial speeds and timers."""
    one = torch.ones_like(state.player_x)
    no = torch.zeros_like(state.ent_on)
    fresh = AsterixState(
        torch.zeros_like(state.ent_x), no, no, no, one * 5, one * 5,
        one * INIT_SPAWN_SPEED, one * INIT_SPAWN_SPEED, one * INIT_MOVE_INTERVAL,
        one * INIT_MOVE_INTERVAL, one * RAMP_INTERVAL, one * 0,
    )  # fmt: skip
    return AsterixState(
        *(
            torch.where(mask.reshape(-1, *([1] * (f.dim() - 1))), f, s)
            for f, s in zip(fresh, state, strict=True)
        )
    )


def step(state: AsterixState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    (ent_x, ent_on, right, gold, px, py, spawn_speed, spawn_timer, move_speed, move_timer,
     ramp_timer, ramp_index) = state  # fmt: skip

    # spawn into a free lane drawn at random (u[:, 2], the reference's randint over the
    # free lanes), at the left edge moving right (u[:, 0] < 1/2) or the right edge, gold
    # with odds 1/3 (u[:, 1])
    spawning = spawn_timer == 0
    free = ~ent_on
    n_free = free.sum(1)
    k = (u[:, 2] * n_free).floor().long().clamp_max((n_free - 1).clamp_min(0))
    # the k-th free lane: free lanes before each lane counted by comparisons, which
    # fuse with the rest of the compiled step (a cumsum there runs as a kernel of its own)
    lanes = torch.arange(LANES, device=free.device)
    before = (free.unsqueeze(1) & (lanes < lanes.unsqueeze(1))).sum(2)  # [B, 8]
    chosen = free & (before == k.unsqueeze(1))
    new = chosen & spawning.unsqueeze(1)
    lr = (u[:, 0] < 0.5).unsqueeze(1)
    ent_x = torch.where(new, torch.where(lr, 0, SIZE - 1), ent_x)
    right = torch.where(new, lr, right)
    gold = torch.where(new, (u[:, 1] < 1 / 3).unsqueeze(1), gold)
    ent_on = ent_on | new
    spawn_timer = torch.where(spawning, spawn_speed, spawn_timer)

    px = torch.where(action == LEFT, (px - 1).clamp_min(0), px)
    px = torch.where(action == RIGHT, (px + 1).clamp_max(SIZE - 1), px)
    py = torch.where(action == UP, (py - 1).clamp_min(1), py)
    py = torch.where(action == DOWN, (py + 1).clamp_max(LANES), py)

    # contact where the player stands, then again after the entities move
    lane = torch.arange(1, LANES + 1, device=px.device)
    in_row = lane == py.unsqueeze(1)
    meet = ent_on & in_row & (ent_x == px.unsqueeze(1))
    picked = meet & gold
    caught = meet & ~gold
    ent_on = ent_on & ~picked

    moving = (move_timer == 0).unsqueeze(1)
    move_timer = torch.where(moving.squeeze(1), move_speed, move_timer)
    moved_x = ent_x + torch.where(right, 1, -1)
    moves = moving & ent_on
    ent_x = torch.where(moves, moved_x, ent_x)
    gone = moves & ((ent_x < 0) | (ent_x > SIZE - 1))
    ent_on = ent_on & ~gone
    meet = moves & ent_on & in_row & (ent_x == px.unsqueeze(1))
    picked = picked | (meet & gold)
    caught = caught | (meet & ~gold)
    ent_on = ent_on & ~(meet & gold)

    spawn_timer = spawn_timer - 1
    move_timer = move_timer - 1

    if ramping:
        ramps = (spawn_speed > 1) | (move_speed > 1)
        waiting = ramps & (ramp_timer >= 0)
        level = ramps & ~waiting
        ramp_timer = torch.where(waiting, ramp_timer - 1, ramp_timer)
        faster = level & (move_speed > 1) & (ramp_index % 2 == 1)
        move_speed = torch.where(faster, move_speed - 1, move_speed)
        spawn_speed = torch.where(level & (spawn_speed > 1), spawn_speed - 1, spawn_speed)
        ramp_index = torch.where(level, ramp_index + 1, ramp_index)
        ramp_timer = torch.where(level, RAMP_INTERVAL, ramp_timer)

    state = AsterixState(
        ent_x, ent_on, right, gold, px, py, spawn_speed, spawn_timer, move_speed, move_timer,
        ramp_timer, ramp_index,
    )  # fmt: skip
    return state, picked.sum(1).to(torch.float32), caught.any(1)


def observe(state: AsterixState) -> torch.Tensor:
    lane = torch.arange(1, LANES + 1, device=state.ent_x.device).expand_as(state.ent_x)
    back = state.ent_x - torch.where(state.ent_right, 1, -1)
    return draw(
        (state.player_y, state.player_x),
        (lane, state.ent_x, state.ent_on & ~state.ent_gold),
        (lane, back, state.ent_on),
        (lane, state.ent_x, state.ent_on & state.ent_gold),
    )


GAME = Game(
    name="asterix",
    channels=4,
    actions=(NOOP, LEFT, UP, RIGHT, DOWN),
    step_noise=3,
    reset_noise=0,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
    inductor_options=REALIZE_SHARED,
)
