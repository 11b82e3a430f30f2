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


def _too_close(a: torch.Tensor, b: torch.Tensor, radius: float) -> torch.Tensor:
    """Violation score [n, M]: sum over points b [n, P, 2] of (radius^2 - d^2)+ for
    candidates a [n, M, 2]. Squared distances keep it cheap; 0 means all clear."""
    dx = a[..., 0].unsqueeze(2) - b[..., 0].unsqueeze(1)
    dy = a[..., 1].unsqueeze(2) - b[..., 1].unsqueeze(1)
    return (radius * radius - (dx * dx + dy * dy)).clamp_min(0).sum(-1)


def _pick(cand: torch.Tensor, violation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First least-violating candidate per scenario and whether it is valid."""
    best, idx = violation.min(dim=1)
    chosen = cand.gather(1, idx.view(-1, 1, 1).expand(-1, 1, cand.shape[-1])).squeeze(1)
    return chosen, best <= 0


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

    starts = torch.zeros((n, max_robots, 2), device=device)
    goals = torch.zeros((n, max_robots, 2), device=device)
    for i in range(max_robots):
        s = _uniform(gen, (n, m, 2), lo, hi, device)
        g = _uniform(gen, (n, m, 2), lo, hi, device)
        viol = (min_sg - (s - g).square().sum(-1).sqrt()).clamp_min(0)
        if i > 0:
            viol = viol + _too_close(s, starts[:, :i], CLEAR_RADIUS)
            viol = viol + _too_close(g, goals[:, :i], CLEAR_RADIUS)
        starts[:, i], _ = _pick(s, viol)
        goals[:, i], _ = _pick(g, viol)
    slot = torch.arange(max_robots, device=device)
    robot_active = slot.unsqueeze(0) < robots.unsqueeze(1)
    yaw = _uniform(gen, (n, max_robots), 0.0, 2 * math.pi, device)
    # Points that obstacles and cores keep clear of; inactive robots' points are moved
    # out of the way so they constrain nothing.
    far = torch.full_like(starts, 1e4)
    anchors = torch.cat(
        (
            torch.where(robot_active.unsqueeze(-1), starts, far),
            torch.where(robot_active.unsqueeze(-1), goals, far),
        ),
        dim=1,
    )

    core = torch.zeros((n, num_cores, 2), device=device)
    core_gamma = torch.zeros((n, num_cores), device=device)
    for j in range(num_cores):
        c = _uniform(gen, (n, m, 2), CORE_RADIUS, WORLD_SIZE - CORE_RADIUS, device)
        viol = _too_close(c, anchors, CORE_RADIUS + CLEAR_RADIUS)
        core[:, j], ok = _pick(c, viol)
        speed = _uniform(gen, (n,), *EDGE_SPEED_RANGE, device)
        sense = torch.where(torch.rand((n,), generator=gen, device=device) < 0.5, 1.0, -1.0)
        core_gamma[:, j] = torch.where(ok, circulation(speed) * sense, 0.0)

    obstacle = torch.zeros((n, max_obstacles, 2), device=device)
    obstacle_valid = torch.zeros((n, max_obstacles), dtype=torch.bool, device=device)
    olo, ohi = OBSTACLE_RANGE
    for k in range(max_obstacles):
        o = _uniform(gen, (n, m, 2), olo, ohi, device)
        viol = _too_close(o, anchors, OBSTACLE_RADIUS + CLEAR_RADIUS)
        if k > 0:
            placed = torch.where(obstacle_valid[:, :k].unsqueeze(-1), obstacle[:, :k], 1e4)
            viol = viol + _too_close(o, placed, 2 * OBSTACLE_RADIUS)
        if num_cores > 0:
            live = torch.where((core_gamma != 0).unsqueeze(-1), core, 1e4)
            viol = viol + _too_close(o, live, CORE_RADIUS + OBSTACLE_RADIUS)
        obstacle[:, k], ok = _pick(o, viol)
        obstacle_valid[:, k] = ok & (k < obstacles)
    obstacle_radius = torch.where(obstacle_valid, OBSTACLE_RADIUS, 0.0)
    return {
        "start": starts,
        "goal": goals,
        "yaw": yaw,
        "robot_active": robot_active,
        "obstacle": obstacle,
        "obstacle_radius": obstacle_radius,
        "obstacle_valid": obstacle_valid,
        "core": core,
        "core_gamma": core_gamma,
    }
