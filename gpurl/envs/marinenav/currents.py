"""Rankine vortex currents, summed over all cores.

Inside the core (d <= r_c) a core turns like a solid body, speed G d / (2 pi r_c^2);
outside it decays as G / (2 pi d). The flow is tangential. `gamma` carries the sense
of rotation in its sign: gamma > 0 turns clockwise in the yaw sense of the NED world
frame (North towards East), gamma < 0 the other way. The source simulator's
"shadowing" rule never took effect, so every core contributes.
"""

from __future__ import annotations

import math

import torch

CORE_RADIUS = 0.5
EDGE_SPEED_RANGE = (5.0, 10.0)  # m/s at the core's edge; G = 2 pi r_c v_edge


def circulation(edge_speed: torch.Tensor, core_radius: float = CORE_RADIUS) -> torch.Tensor:
    return 2 * math.pi * core_radius * edge_speed


def rankine_velocity(
    x: torch.Tensor,
    y: torch.Tensor,
    centres: torch.Tensor,
    gamma: torch.Tensor,
    core_radius: float = CORE_RADIUS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Water velocity (vx, vy) at points x, y [B, R] from cores centres [B, C, 2], gamma [B, C].

    A core with gamma = 0 contributes nothing (that is how unused core slots are masked).
    """
    dx = x.unsqueeze(-1) - centres[..., 0].unsqueeze(-2)  # [B, R, C]
    dy = y.unsqueeze(-1) - centres[..., 1].unsqueeze(-2)
    d2 = dx * dx + dy * dy
    rc2 = core_radius * core_radius
    # speed / d, so that (dx, dy) * that has the right length without a division by d
    g = gamma.unsqueeze(-2) / (2 * math.pi)
    speed_over_d = torch.where(d2 <= rc2, g / rc2, g / d2.clamp_min(rc2))
    # tangent of the outward radial (dx, dy) turned +90 degrees: (-dy, dx)
    vx = (-dy * speed_over_d).sum(-1)
    vy = (dx * speed_over_d).sum(-1)
    return vx, vy
