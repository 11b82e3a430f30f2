"""Batched scenario sampling: starts, goals, headings, static obstacles and vortex cores.

Every slot (robot, obstacle, core) is filled by rejection sampling done as tensor ops:
draw `candidates` proposals for every scenario at once, score each by how much it breaks
the constraints (0 = valid) and take the first with the lowest score. Among valid
proposals the first is taken, which is exactly what a sequential "draw until valid"
loop returns. There is a Python loop over slot index (at most max_robots +
max_obstacles + cores, fixed), never over scenarios.

If no proposal of a robot slot is valid (vanishingly rare with the defaults, see
tests), the least-violating one is kept; an obstacle or core slot with no valid
proposal is left empty (marked invalid) rather than placed badly.
"""

from __future__ import annotations

import math

import torch

from gpurl.envs.marinenav.currents import CORE_RADIUS, EDGE_SPEED_RANGE, circulation

WORLD_SIZE = 55.0
START_GOAL_RANGE = (2.0, 53.0)
OBSTACLE_RANGE = (5.0, 50.0)
OBSTACLE_RADIUS = 1.0
CLEAR_RADIUS = 10.0  # starts (and goals) pairwise farther apart; obstacles clear of them


def _uniform(gen, shape, low, high, device):
    return torch.rand(shape, generator=gen, device=device) * (high - low) + low


def _points(gen, n: int, m: int, low: float, high: float, device) -> tuple[torch.Tensor, ...]:
    """m candidate points per scenario, uniform in [low, high]^2: (x, y), each [n, m].

    Drawn as [n, m, 2], as the sampler always has (the same draws for the same seed),
    then split into contiguous coordinate planes: every later op runs over contiguous
    rows of candidates, several times cheaper on CPU than over interleaved pairs."""
    return tuple(_uniform(gen, (n, m, 2), low, high, device).permute(2, 0, 1).contiguous())


def _too_close(ax, ay, bx, by, radius: float) -> torch.Tensor:
    """Violation score [n, M]: sum over points (bx, by) [n, P] of (radius^2 - d^2)+ for
    candidates (ax, ay) [n, M]. Squared distances keep it cheap; 0 means all clear.
    The pair tensors are [n, P, M], candidates innermost."""
    dx = ax.unsqueeze(1) - bx.unsqueeze(2)
    dy = ay.unsqueeze(1) - by.unsqueeze(2)
    return (radius * radius - (dx * dx + dy * dy)).clamp_min(0).sum(1)


def _pick(cx, cy, violation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First least-violating candidate (x, y) per scenario, and whether it is valid."""
    best, idx = violation.min(dim=1, keepdim=True)
    return cx.gather(1, idx).squeeze(1), cy.gather(1, idx).squeeze(1), best.squeeze(1) <= 0


def sample_scenarios(
    gen: torch.Generator,
    num: int,
    robots: torch.Tensor,
    obstacles: torch.Tensor,
    min_start_goal_dis: torch.Tensor,
    max_robots: int = 5,
    max_obstacles: int = 4,
    num_cores: int = 0,
    candidates: int = 128,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """Sample `num` scenarios; robots, obstacles, min_start_goal_dis are per-scenario [num].

    Returns start, goal [num, R, 2], yaw [num, R], robot_active [num, R], obstacle
    [num, K, 2], obstacle_radius [num, K] (0 where invalid), obstacle_valid [num, K],
    core [num, C, 2], core_gamma [num, C] (signed; 0 where invalid).
    """
    n, m = num, candidates
    robots = robots.to(device).reshape(n)
    obstacles = obstacles.to(device).reshape(n)
    min_sg = min_start_goal_dis.to(device, torch.float32).reshape(n, 1)
    lo, hi = START_GOAL_RANGE

    # coordinate planes [n, slots], filled slot by slot
    sx, sy, gx, gy = (torch.zeros((n, max_robots), device=device) for _ in range(4))
    for i in range(max_robots):
        csx, csy = _points(gen, n, m, lo, hi, device)
        cgx, cgy = _points(gen, n, m, lo, hi, device)
        dx, dy = csx - cgx, csy - cgy
        viol = (min_sg - torch.sqrt(dx * dx + dy * dy)).clamp_min(0)
        if i > 0:
            viol = viol + _too_close(csx, csy, sx[:, :i], sy[:, :i], CLEAR_RADIUS)
            viol = viol + _too_close(cgx, cgy, gx[:, :i], gy[:, :i], CLEAR_RADIUS)
        sx[:, i], sy[:, i], _ = _pick(csx, csy, viol)
        gx[:, i], gy[:, i], _ = _pick(cgx, cgy, viol)
    slot = torch.arange(max_robots, device=device)
    robot_active = slot.unsqueeze(0) < robots.unsqueeze(1)
    yaw = _uniform(gen, (n, max_robots), 0.0, 2 * math.pi, device)
    # Points that obstacles and cores keep clear of; inactive robots' points are moved
    # out of the way so they constrain nothing.
    active2 = robot_active.repeat(1, 2)
    ax = torch.where(active2, torch.cat((sx, gx), 1), 1e4)
    ay = torch.where(active2, torch.cat((sy, gy), 1), 1e4)

    cx = torch.zeros((n, num_cores), device=device)
    cy = torch.zeros((n, num_cores), device=device)
    core_gamma = torch.zeros((n, num_cores), device=device)
    for j in range(num_cores):
        px, py = _points(gen, n, m, CORE_RADIUS, WORLD_SIZE - CORE_RADIUS, device)
        viol = _too_close(px, py, ax, ay, CORE_RADIUS + CLEAR_RADIUS)
        cx[:, j], cy[:, j], ok = _pick(px, py, viol)
        speed = _uniform(gen, (n,), *EDGE_SPEED_RANGE, device)
        sense = torch.where(torch.rand((n,), generator=gen, device=device) < 0.5, 1.0, -1.0)
        core_gamma[:, j] = torch.where(ok, circulation(speed) * sense, 0.0)
    live = core_gamma != 0

    ox = torch.zeros((n, max_obstacles), device=device)
    oy = torch.zeros((n, max_obstacles), device=device)
    obstacle_valid = torch.zeros((n, max_obstacles), dtype=torch.bool, device=device)
    olo, ohi = OBSTACLE_RANGE
    for k in range(max_obstacles):
        px, py = _points(gen, n, m, olo, ohi, device)
        viol = _too_close(px, py, ax, ay, OBSTACLE_RADIUS + CLEAR_RADIUS)
        if k > 0:
            placed = obstacle_valid[:, :k]
            bx, by = torch.where(placed, ox[:, :k], 1e4), torch.where(placed, oy[:, :k], 1e4)
            viol = viol + _too_close(px, py, bx, by, 2 * OBSTACLE_RADIUS)
        if num_cores > 0:
            bx, by = torch.where(live, cx, 1e4), torch.where(live, cy, 1e4)
            viol = viol + _too_close(px, py, bx, by, CORE_RADIUS + OBSTACLE_RADIUS)
        ox[:, k], oy[:, k], ok = _pick(px, py, viol)
        obstacle_valid[:, k] = ok & (k < obstacles)
    obstacle_radius = torch.where(obstacle_valid, OBSTACLE_RADIUS, 0.0)
    return {
        "start": torch.stack((sx, sy), -1),
        "goal": torch.stack((gx, gy), -1),
        "yaw": yaw,
        "robot_active": robot_active,
        "obstacle": torch.stack((ox, oy), -1),
        "obstacle_radius": obstacle_radius,
        "obstacle_valid": obstacle_valid,
        "core": torch.stack((cx, cy), -1),
        "core_gamma": core_gamma,
    }
