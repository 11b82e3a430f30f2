"""MinAtar Seaquest, batched: the player's submarine shoots enemy fish and submarines
(+1 each), which cross the screen in lanes 1..8; enemy submarines shoot back. Divers
cross too; the submarine picks them up (at most 6). Oxygen runs down under water: the
submarine must surface, which needs at least one diver aboard (costing one), and pays
10 x (oxygen left) / 200 when it surfaces with all 6 (then aboard: none, and one fewer:
MinAtar's count goes to -1 there, kept here). The episode ends on contact with an
enemy or its bullet, when oxygen runs out, or when the submarine surfaces with no diver.
With difficulty ramping each surfacing makes enemies appear more often and, every
other time, move faster. Rules as MinAtar 1.0.15's seaquest.py.

The reference keeps its entities in Python lists, in the order they appeared, and
resolves conflicts (two bullets for one enemy, two enemies for one bullet, the last
diver that fits) in that order. Here each kind of entity has a fixed number of slots
and each entity an `order` (when it appeared), and the same conflicts are resolved in
the same order. Fish and enemy submarines share one set of slots (`sub` tells them
apart), since every step walks every slot. Slots: 32 enemies, 4 divers and 2 of the
player's bullets, each at least as many as the rules let be at once (at most one enemy
appears a frame and each leaves within 31 frames; divers: at most 3; the player shoots
once in 6 frames and a bullet leaves within 10). An enemy submarine's bullet flies in
its slot: a submarine shoots once in 11 frames and its bullet leaves within 10, so a
slot never holds two, and the slot's next occupant shoots 10 frames after it appears
at the earliest (enemy bullets meet nothing but the player, so their order is moot).

Channels: submarine front, submarine back, player bullet, trail, enemy bullet, enemy
fish, enemy submarine, oxygen gauge, diver gauge, diver.
Minimal actions: no-op, left, up, right, down, fire.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import (
    DOWN,
    FIRE,
    LEFT,
    NOOP,
    REALIZE_SHARED,
    RIGHT,
    SIZE,
    UP,
    Game,
    draw,
    randint,
)

MAX_OXYGEN = 200
INIT_SPAWN_SPEED = 20
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10
DIVER_MOVE_INTERVAL = 5
MAX_DIVERS = 6
# slots per kind of entity (the enemy bullets fly in the enemies' slots)
ENEMIES, DIVERS, BULLETS = 32, 4, 2
# added to a submarine's order where fish and submarines are ranked as two groups
SUBS_AFTER = 2**32


class Things(NamedTuple):
    """One kind of entity, [B, K] each: columns x, rows y, moving right, alive, when it
    appeared (list order), a move timer, and for enemies a shot timer and whether it is
    a submarine (else a fish)."""

    x: torch.Tensor
    y: torch.Tensor
    right: torch.Tensor
    alive: torch.Tensor
    order: torch.Tensor
    timer: torch.Tensor
    shot: torch.Tensor
    sub: torch.Tensor


class Shots(NamedTuple):
    """The enemy submarines' bullets, [B, ENEMIES] each: one per enemy slot."""

    x: torch.Tensor
    y: torch.Tensor
    right: torch.Tensor
    alive: torch.Tensor


class SeaquestState(NamedTuple):
    enemies: Things  # fish and submarines
    divers: Things
    bullets: Things  # the player's
    e_bullets: Shots
    sub_x: torch.Tensor  # int64 [B]
    sub_y: torch.Tensor  # int64 [B]
    sub_right: torch.Tensor  # bool [B]: facing right
    oxygen: torch.Tensor  # int64 [B]
    diver_count: torch.Tensor  # int64 [B]
    surface: torch.Tensor  # bool [B]: surfaced (and not yet dived again)
    shot_timer: torch.Tensor  # int64 [B]
    e_spawn_speed: torch.Tensor  # int64 [B]
    e_spawn_timer: torch.Tensor  # int64 [B]
    d_spawn_timer: torch.Tensor  # int64 [B]
    move_speed: torch.Tensor  # int64 [B]
    ramp_index: torch.Tensor  # int64 [B]
    counter: torch.Tensor  # int64 [B]: entities so far (their order)


def _none(batch: int, slots: int, device) -> Things:
    zero = torch.zeros((batch, slots), dtype=torch.int64, device=device)
    return Things(zero, zero, zero.bool(), zero.bool(), zero, zero, zero, zero.bool())


def _no_shots(batch: int, device) -> Shots:
    zero = torch.zeros((batch, ENEMIES), dtype=torch.int64, device=device)
    return Shots(zero, zero, zero.bool(), zero.bool())


def init(batch: int, device) -> SeaquestState:
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    return SeaquestState(
        _none(batch, ENEMIES, device), _none(batch, DIVERS, device),
        _none(batch, BULLETS, device),
        _no_shots(batch, device), zero, zero, zero.bool(), zero, zero,
        zero.bool(), zero, zero, zero, zero, zero, zero, zero,
    )  # fmt: skip


def _where(mask: torch.Tensor, new, old):
    if isinstance(new, tuple):
        return type(new)(*(_where(mask, n, o) for n, o in zip(new, old, strict=True)))
    return torch.where(mask.reshape(-1, *([1] * (new.dim() - 1))), new, old)


def reset(state: SeaquestState, mask: torch.Tensor, u: torch.Tensor) -> SeaquestState:
    """No entities; the submarine on the surface at column 5 facing left, full oxygen."""
    b, device = len(mask), mask.device
    one = torch.ones(b, dtype=torch.int64, device=device)
    fresh = SeaquestState(
        _none(b, ENEMIES, device), _none(b, DIVERS, device),
        _none(b, BULLETS, device), _no_shots(b, device), one * 5, one * 0,
        one < 0, one * MAX_OXYGEN, one * 0, one > 0, one * 0, one * INIT_SPAWN_SPEED,
        one * INIT_SPAWN_SPEED, one * DIVER_SPAWN_SPEED, one * INIT_MOVE_INTERVAL, one * 0,
        one * 0,
    )  # fmt: skip
    return _where(mask, fresh, state)


def _add(things: Things, new: torch.Tensor, counter: torch.Tensor, **values) -> Things:
    """Things with one new entity where new [B] is True, in the first free slot, each
    of `values` [B] its field; its order is `counter`. Dropped where no slot is free.

    The slot is chosen and written by elementwise ops and one reduction, which fuse
    with the rest of the step (a scatter ran as kernels of its own, field by field)."""
    slots = things.alive.shape[1]
    values["alive"] = torch.ones_like(new)
    values["order"] = counter
    index = torch.arange(slots, device=new.device)
    first = torch.where(things.alive, slots, index).min(1, keepdim=True).values
    put = new.unsqueeze(1) & (index == first)  # [B, K]; none where every slot is taken
    fields = {}
    for name, old in things._asdict().items():
        value = values.get(name)
        if value is not None:
            old = torch.where(put, value.unsqueeze(1).to(old.dtype), old)
        fields[name] = old
    return Things(**fields)


def _first(match: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot [B, K] of the earliest (least order) entity where match [B, K], and
    whether there is one [B, 1]: read from the same reduction (an `any` of the one-hot
    would be another pass over the slots)."""
    none = torch.iinfo(torch.int64).max
    least = torch.where(match, order, none).min(1, keepdim=True).values
    return match & (order == least), least != none


def _last(match: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One-hot [B, K] of the latest (greatest order) entity where match [B, K], and
    whether there is one [B, 1] (orders are never negative)."""
    greatest = torch.where(match, order, -1).max(1, keepdim=True).values
    return match & (order == greatest), greatest >= 0


def _step_x(things: Things | Shots, moves: torch.Tensor) -> torch.Tensor:
    return torch.where(moves, things.x + torch.where(things.right, 1, -1), things.x)


def _out(x: torch.Tensor) -> torch.Tensor:
    return (x < 0) | (x > SIZE - 1)


def step(state: SeaquestState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    (enemies, divers, bullets, e_bullets, sub_x, sub_y, sub_right, oxygen, diver_count,
     surface, shot_timer, e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed,
     ramp_index, counter) = state  # fmt: skip
    reward = torch.zeros(len(sub_x), dtype=torch.int64, device=sub_x.device)

    # an enemy appears: side u0, a submarine with odds 1/3 (u1), lane 1..8 (u2), unless
    # the lane holds an enemy heading the other way
    spawning = e_spawn_timer == 0
    lr = u[:, 0] < 0.5
    is_sub = u[:, 1] < 1 / 3
    lane = randint(u[:, 2], 1, 9)
    x0 = torch.where(lr, 0, SIZE - 1)
    lane_, lr_ = lane.unsqueeze(1), lr.unsqueeze(1)
    against = (enemies.alive & (enemies.y == lane_) & (enemies.right != lr_)).any(1)
    new = spawning & ~against
    shot = torch.where(is_sub, ENEMY_SHOT_INTERVAL, 0)
    enemies = _add(
        enemies, new, counter, x=x0, y=lane, right=lr, timer=move_speed, shot=shot, sub=is_sub
    )
    counter = counter + new
    e_spawn_timer = torch.where(spawning, e_spawn_speed, e_spawn_timer)
    # the enemies ranked as two groups, each by order: every fish below every submarine
    rank = enemies.order + torch.where(enemies.sub, SUBS_AFTER, 0)

    # a diver appears: side u3, lane u4
    d_spawning = d_spawn_timer == 0
    d_lr = u[:, 3] < 0.5
    divers = _add(
        divers, d_spawning, counter, x=torch.where(d_lr, 0, SIZE - 1),
        y=randint(u[:, 4], 1, 9), right=d_lr, timer=DIVER_MOVE_INTERVAL + 0 * counter,
    )  # fmt: skip
    counter = counter + d_spawning
    d_spawn_timer = torch.where(d_spawning, DIVER_SPAWN_SPEED, d_spawn_timer)

    # the player
    fire = (action == FIRE) & (shot_timer == 0)
    bullets = _add(bullets, fire, counter, x=sub_x, y=sub_y, right=sub_right)
    counter = counter + fire
    shot_timer = torch.where(fire, SHOT_COOL_DOWN, shot_timer)
    left, right = action == LEFT, action == RIGHT
    sub_x = torch.where(left, (sub_x - 1).clamp_min(0), sub_x)
    sub_x = torch.where(right, (sub_x + 1).clamp_max(SIZE - 1), sub_x)
    sub_right = torch.where(left, False, torch.where(right, True, sub_right))
    sub_y = torch.where(action == UP, (sub_y - 1).clamp_min(0), sub_y)
    sub_y = torch.where(action == DOWN, (sub_y + 1).clamp_max(SIZE - 2), sub_y)

    # the player's bullets, latest first: each moves, and hits the earliest fish in its
    # cell, else the earliest submarine (fish rank before every submarine)
    bx = _step_x(bullets, bullets.alive)
    b_alive = bullets.alive & ~_out(bx)
    bullets = bullets._replace(x=bx, alive=b_alive)
    e_alive = enemies.alive
    pending = b_alive
    for _ in range(BULLETS):
        this, going = _last(pending, bullets.order)  # one-hot (none when no bullet left)
        pending = pending & ~this
        cx = (bx * this).sum(1, keepdim=True)
        cy = (bullets.y * this).sum(1, keepdim=True)
        hit, scored = _first(going & e_alive & (enemies.x == cx) & (enemies.y == cy), rank)
        e_alive = e_alive & ~hit
        b_alive = b_alive & ~(this & scored)
        reward = reward + scored.squeeze(1)
    enemies = enemies._replace(alive=e_alive)
    bullets = bullets._replace(alive=b_alive)

    # divers, latest first: picked up where they meet the submarine while fewer than 6
    # are aboard, else they move when their timer runs out
    d_alive, d_x, d_timer = divers.alive, divers.x, divers.timer
    pending = d_alive
    sx, sy = sub_x.unsqueeze(1), sub_y.unsqueeze(1)
    for _ in range(DIVERS):
        this, _ = _last(pending, divers.order)
        pending = pending & ~this
        room = (diver_count < MAX_DIVERS).unsqueeze(1)
        at = (d_x == sx) & (divers.y == sy)
        taken = this & at & room
        moving = this & ~taken & (d_timer == 0)
        waiting = this & ~taken & (d_timer != 0)
        d_x = torch.where(moving, d_x + torch.where(divers.right, 1, -1), d_x)
        d_timer = torch.where(
            moving, DIVER_MOVE_INTERVAL, torch.where(waiting, d_timer - 1, d_timer)
        )
        gone = moving & _out(d_x)
        taken = taken | (moving & ~gone & (d_x == sx) & (divers.y == sy) & room)
        d_alive = d_alive & ~gone & ~taken
        diver_count = diver_count + taken.any(1)
    divers = divers._replace(x=d_x, alive=d_alive, timer=d_timer)

    # enemies: contact before and after moving ends the episode; one that moves into a
    # player's bullet takes the earliest bullet in its cell, submarines (latest first)
    # before fish (latest first)
    present = enemies.alive & enemies.sub
    shooters = present & (enemies.shot == 0)  # every submarine there now shoots on time,
    # even one that leaves or is hit this frame (as the reference's loop does)
    alive = enemies.alive
    at = alive & (enemies.x == sx) & (enemies.y == sy)
    moves = alive & (enemies.timer == 0)
    e_x = _step_x(enemies, moves)
    timer = torch.where(moves, move_speed.unsqueeze(1), enemies.timer - alive.long())
    gone = moves & _out(e_x)
    meets = moves & ~gone & (e_x == sx) & (enemies.y == sy)
    terminal = (at | meets).any(1)
    e_check = moves & ~gone & ~meets
    enemies = enemies._replace(x=e_x, timer=timer, alive=alive & ~gone)
    e_y = enemies.y
    b_alive = bullets.alive
    killed = torch.zeros_like(e_check)
    pending = b_alive
    for _ in range(BULLETS):
        this, going = _first(pending, bullets.order)
        pending = pending & ~this
        cx = (bullets.x * this).sum(1, keepdim=True)
        cy = (bullets.y * this).sum(1, keepdim=True)
        hit, scored = _last(going & e_check & ~killed & (e_x == cx) & (e_y == cy), rank)
        killed = killed | hit
        b_alive = b_alive & ~(this & scored)
        reward = reward + scored.squeeze(1)
    bullets = bullets._replace(alive=b_alive)
    enemies = enemies._replace(
        alive=enemies.alive & ~killed,
        shot=torch.where(shooters, ENEMY_SHOT_INTERVAL, enemies.shot - present.long()),
    )

    # enemy bullets (a new one at its submarine's cell, in its slot): contact before and
    # after moving ends the episode
    e_bullets = Shots(
        torch.where(shooters, enemies.x, e_bullets.x),
        torch.where(shooters, enemies.y, e_bullets.y),
        torch.where(shooters, enemies.right, e_bullets.right),
        e_bullets.alive | shooters,
    )
    at = e_bullets.alive & (e_bullets.x == sx) & (e_bullets.y == sy)
    ex = _step_x(e_bullets, e_bullets.alive)
    e_alive = e_bullets.alive & ~_out(ex)
    terminal = terminal | (at | (e_alive & (ex == sx) & (e_bullets.y == sy))).any(1)
    e_bullets = e_bullets._replace(x=ex, alive=e_alive)

    e_spawn_timer = (e_spawn_timer - 1).clamp_min(0)
    d_spawn_timer = (d_spawn_timer - 1).clamp_min(0)
    shot_timer = (shot_timer - 1).clamp_min(0)

    # oxygen, and surfacing
    terminal = terminal | (oxygen <= 0)
    under = sub_y > 0
    oxygen = torch.where(under, oxygen - 1, oxygen)
    arriving = ~under & ~surface
    terminal = terminal | (arriving & (diver_count == 0))
    surfacing = arriving & (diver_count != 0)
    full = surfacing & (diver_count == MAX_DIVERS)
    reward = reward + torch.where(full, oxygen * 10 // MAX_OXYGEN, 0)
    diver_count = torch.where(full, 0, diver_count)
    diver_count = torch.where(surfacing, diver_count - 1, diver_count)
    oxygen = torch.where(surfacing, MAX_OXYGEN, oxygen)
    surface = torch.where(under, False, surface | surfacing)
    if ramping:
        ramps = surfacing & ((e_spawn_speed > 1) | (move_speed > 2))
        faster = ramps & (move_speed > 2) & (ramp_index % 2 == 1)
        move_speed = torch.where(faster, move_speed - 1, move_speed)
        e_spawn_speed = torch.where(ramps & (e_spawn_speed > 1), e_spawn_speed - 1, e_spawn_speed)
        ramp_index = torch.where(ramps, ramp_index + 1, ramp_index)

    state = SeaquestState(
        enemies, divers, bullets, e_bullets, sub_x, sub_y, sub_right, oxygen, diver_count,
        surface, shot_timer, e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed,
        ramp_index, counter,
    )  # fmt: skip
    return state, reward.to(torch.float32), terminal


def _trail(things: Things) -> tuple:
    return things.y, things.x - torch.where(things.right, 1, -1), things.alive


def observe(state: SeaquestState) -> torch.Tensor:
    columns = torch.arange(SIZE, device=state.sub_x.device)
    back = state.sub_x - torch.where(state.sub_right, 1, -1)
    # the gauges as positions on the bottom row too, so that every channel is drawn by
    # the one scatter (as grids they were stacked with it: observe ran 1.6x slower)
    bottom = torch.full_like(columns, SIZE - 1)
    oxygen = columns < (state.oxygen.clamp_min(0) * 10 // MAX_OXYGEN).unsqueeze(1)
    count = state.diver_count.unsqueeze(1)
    divers = (columns >= SIZE - 1 - count) & (columns < SIZE - 1)
    # the trails of all three kinds in one channel: their positions side by side
    kinds = (state.enemies, state.divers)
    trails = tuple(torch.cat(t, 1) for t in zip(*map(_trail, kinds), strict=True))
    return draw(
        (state.sub_y, state.sub_x),
        (state.sub_y, back),
        (state.bullets.y, state.bullets.x, state.bullets.alive),
        trails,
        (state.e_bullets.y, state.e_bullets.x, state.e_bullets.alive),
        (state.enemies.y, state.enemies.x, state.enemies.alive & ~state.enemies.sub),
        (state.enemies.y, state.enemies.x, state.enemies.alive & state.enemies.sub),
        (bottom, columns, oxygen),
        (bottom, columns, divers),
        (state.divers.y, state.divers.x, state.divers.alive),
    )


GAME = Game(
    name="seaquest",
    channels=10,
    actions=(NOOP, LEFT, UP, RIGHT, DOWN, FIRE),
    step_noise=5,
    reset_noise=0,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
    inductor_options=REALIZE_SHARED,
)
