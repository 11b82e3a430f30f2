"""MinAtar Freeway, batched: the chicken crosses eight lanes of cars from the bottom row
to the top, +1 a crossing, after which it starts again at the bottom and the cars' speeds
and directions are drawn anew; a car that meets it sends it back to the bottom. The
chicken moves at most once every 3 frames. The episode ends after 2,500 frames. No
difficulty ramp. Rules as MinAtar 1.0.15's freeway.py.

Channels: chicken, car, and five trails (the cell behind each car), one per speed: a car
of speed s moves once every s frames. Minimal actions: no-op, up, down.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.minatar.grid import DOWN, NOOP, SIZE, UP, Game, draw, randint

PLAYER_SPEED = 3  # frames between the chicken's moves
TIME_LIMIT = 2500  # frames in an episode
CARS = 8  # one a lane, lanes on rows 1..8
CHICKEN_X = 4
SPEED_DRAWS = 4  # uniforms per draw of the cars' speeds (_speeds)


class FreewayState(NamedTuple):
    car_x: torch.Tensor  # int64 [B, 8]: lane i is row i + 1
    speed: torch.Tensor  # int64 [B, 8]: frames a move, signed by direction (+ right)
    car_timer: torch.Tensor  # int64 [B, 8]: frames until the car moves
    pos: torch.Tensor  # int64 [B]: the chicken's row
    move_timer: torch.Tensor  # int64 [B]
    time_left: torch.Tensor  # int64 [B]


def _speeds(u: torch.Tensor) -> torch.Tensor:
    """The eight cars' speeds 1..5 (the reference's randint(1, 6, 8)), each signed (its
    sign(rand(8) - 0.5)), from four uniforms u [B, 4]: u[:, k] for k < 3 is three base-5
    digits, floor(125 u) = 25 d0 + 5 d1 + d2 (car 3k + j: 1 + dj), and u[:, 3] eight
    bits, floor(256 u) (car i moves right where bit i is set).

    Four draws, not sixteen: a step draws them for every env, crossing or not, and on
    this CPU drawing sixteen took about half of the compiled step."""
    three = randint(u[:, :3], 0, 125)  # [B, 3]
    digits = torch.stack((three // 25, three // 5 % 5, three % 5), dim=2)  # [B, 3, 3]
    speeds = 1 + digits.reshape(len(u), 9)[:, :CARS]
    right = (randint(u[:, 3:], 0, 256) >> torch.arange(CARS, device=u.device)) & 1
    return speeds * (2 * right - 1)


def init(batch: int, device) -> FreewayState:
    lanes = torch.zeros((batch, CARS), dtype=torch.int64, device=device)
    zero = torch.zeros(batch, dtype=torch.int64, device=device)
    return FreewayState(lanes, lanes + 1, lanes, zero, zero, zero)


def _where(mask: torch.Tensor, new: tuple, old: tuple) -> tuple:
    return tuple(
        torch.where(mask.reshape(-1, *([1] * (n.dim() - 1))), n, o)
        for n, o in zip(new, old, strict=True)
    )


def reset(state: FreewayState, mask: torch.Tensor, u: torch.Tensor) -> FreewayState:
    """Every car at the left edge with a fresh speed; the chicken on the bottom row."""
    speed = _speeds(u)
    one = torch.ones_like(state.pos)
    fresh = FreewayState(
        torch.zeros_like(speed), speed, speed.abs(), one * (SIZE - 1), one * PLAYER_SPEED,
        one * TIME_LIMIT,
    )  # fmt: skip
    return FreewayState(*_where(mask, fresh, state))


def step(state: FreewayState, action: torch.Tensor, u: torch.Tensor, ramping: bool):
    car_x, speed, car_timer, pos, move_timer, time_left = state
    ready = move_timer == 0
    up, down = ready & (action == UP), ready & (action == DOWN)
    move_timer = torch.where(up | down, PLAYER_SPEED, move_timer)
    pos = torch.where(up, (pos - 1).clamp_min(0), pos)
    pos = torch.where(down, (pos + 1).clamp_max(SIZE - 1), pos)

    crossed = pos == 0  # +1, fresh speeds (the cars stay where they are), back to the bottom
    fresh = _speeds(u)
    speed = torch.where(crossed.unsqueeze(1), fresh, speed)
    car_timer = torch.where(crossed.unsqueeze(1), fresh.abs(), car_timer)
    pos = torch.where(crossed, SIZE - 1, pos)

    # The cars in lane order. A hit sends the chicken to row 9, where no lane is, so the
    # lanes' hits all test the chicken's row before them.
    lane = torch.arange(1, CARS + 1, device=pos.device)
    in_lane = lane == pos.unsqueeze(1)
    moves = car_timer == 0
    new_x = torch.where(moves, (car_x + speed.sign()) % SIZE, car_x)
    hit = in_lane & ((car_x == CHICKEN_X) | (moves & (new_x == CHICKEN_X)))
    pos = torch.where(hit.any(1), SIZE - 1, pos)
    car_timer = torch.where(moves, speed.abs(), car_timer - 1)

    move_timer = (move_timer - 1).clamp_min(0)
    time_left = time_left - 1
    terminal = time_left < 0
    state = FreewayState(new_x, speed, car_timer, pos, move_timer, time_left)
    return state, crossed.to(torch.float32), terminal


def observe(state: FreewayState) -> torch.Tensor:
    lane = torch.arange(1, CARS + 1, device=state.pos.device).expand_as(state.car_x)
    back = (state.car_x - state.speed.sign()) % SIZE
    trails = [(lane, back, state.speed.abs() == s) for s in range(1, 6)]
    chicken = (state.pos, torch.full_like(state.pos, CHICKEN_X))
    return draw(chicken, (lane, state.car_x), *trails)


GAME = Game(
    name="freeway",
    channels=7,
    actions=(NOOP, UP, DOWN),
    step_noise=SPEED_DRAWS,
    reset_noise=SPEED_DRAWS,
    init=init,
    reset=reset,
    step=step,
    observe=observe,
)
