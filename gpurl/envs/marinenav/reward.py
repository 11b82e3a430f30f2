"""Per-robot reward, with the COLREGs term.

r = -0.1 + (d_goal_before - d_goal_after) + COLREGs + (-5 on collision | +10 on arrival).

COLREGs (as in the source simulator's Robot.check_apply_COLREGs): for an observed
object moving faster than 0.5 m/s, while the ego moves faster than 0.5 m/s, the ego's
position and velocity are expressed in the object's frame (x along the object's
velocity, y to its starboard). The ego is in a
- head-on encounter if x in [0, 17], |y| <= 4.5 and the ego's heading in that frame
  has |angle| > 3 pi / 4;
- crossing encounter (the other vessel has the ego on its left, the ego gives way) if
  x in [-9, 12], y in [-17, 0], outside the triangular cut-out, and the heading angle is
  in [pi/4, 3 pi/4]. The cut-out is the triangle with corners (0, 0), (12, 0) and
  (12, -7): the points above the line through (0, 0) and (12, -7), i.e. with
  y + 7 > (-7 / 12) (x - 12), are excluded.
phi is the signed turn from the ego's velocity direction to the avoidance direction
(bearing of the object + asin((r_hat + 1) / d) + atan2(r_self, sqrt(d^2 - (r_hat + 1)^2))),
wrapped to [-pi, pi); the term is -0.1 phi, applied only when phi > 0 (a right turn is
needed). The source stops at the first object in its list that applies; here objects
are sorted nearest first, so the nearest applicable object sets phi.
"""

from __future__ import annotations

import math

import torch

TIMESTEP_PENALTY = -0.1
COLLISION_PENALTY = -5.0
GOAL_REWARD = 10.0
COLREGS_PENALTY = -0.1
COLREGS_MIN_SPEED = 0.5
HEAD_ON_X = (0.0, 17.0)
HEAD_ON_HALF_WIDTH = 4.5
CROSSING_X = (-9.0, 12.0)
CROSSING_Y = (-17.0, 0.0)
CUT_OUT_Y = -7.0  # triangle (0, 0), (12, 0), (12, -7)


def wrap_to_pi(a: torch.Tensor) -> torch.Tensor:
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


def in_colregs_zone(
    ex: torch.Tensor, ey: torch.Tensor, hx: torch.Tensor, hy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(head_on, crossing) for the ego at (ex, ey) moving along (hx, hy), in the other's frame.

    The heading tests compare components instead of calling atan2:
    |atan2(hy, hx)| > 3 pi / 4  <=>  hx < 0 and |hy| < -hx;
    atan2(hy, hx) in [pi/4, 3 pi/4]  <=>  hy > 0 and hy >= |hx|.
    """
    head_on = (
        (ex >= HEAD_ON_X[0])
        & (ex <= HEAD_ON_X[1])
        & (ey.abs() <= HEAD_ON_HALF_WIDTH)
        & (hx < 0)
        & (hy.abs() < -hx)
    )
    x_hi = CROSSING_X[1]
    in_cut_out = (ey - CUT_OUT_Y) > (CUT_OUT_Y / x_hi) * (ex - x_hi)
    crossing = (
        (ex >= CROSSING_X[0])
        & (ex <= x_hi)
        & (ey >= CROSSING_Y[0])
        & (ey <= CROSSING_Y[1])
        & ~in_cut_out
        & (hy > 0)
        & (hy >= hx.abs())
    )
    return head_on, crossing


def colregs_turn(
    px: torch.Tensor,
    py: torch.Tensor,
    r_hat: torch.Tensor,
    ego_vx: torch.Tensor,
    ego_vy: torch.Tensor,
    robot_radius: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(phi, defined): turn from the ego's velocity direction to the avoidance direction.

    The avoidance direction is the bearing of the object turned by asin(b / d) and by
    atan2(r_self, t), b = r_hat + 1, t = sqrt(d^2 - b^2). The three rotations and the
    ego's are composed as complex products, so one atan2 gives phi in (-pi, pi].
    `defined` is False where d <= b (the source's asin would be NaN there).
    """
    b = r_hat + 1.0
    d2 = px * px + py * py
    t2 = d2 - b * b
    t = torch.sqrt(t2.clamp_min(0.0))
    # rotation by asin(b/d) then atan2(R, t), up to a positive scale: (t^2 - b R, t (R + b))
    rot_re = t2.clamp_min(0.0) - b * robot_radius
    rot_im = t * (robot_radius + b)
    re = px * rot_re - py * rot_im
    im = px * rot_im + py * rot_re
    phi = torch.atan2(im * ego_vx - re * ego_vy, re * ego_vx + im * ego_vy)
    return phi, t2 > 0


def colregs_term(
    objects: torch.Tensor,
    objects_mask: torch.Tensor,
    ego_vx: torch.Tensor,
    ego_vy: torch.Tensor,
    robot_radius: float,
) -> torch.Tensor:
    """COLREGs reward term [B, R] from observed objects [B, R, 5, 5] (robot frame, noisy)
    and the ego's ground velocity in its own frame [B, R]."""
    px, py, vx, vy, r_hat = objects.unbind(-1)
    evx, evy = ego_vx.unsqueeze(-1), ego_vy.unsqueeze(-1)
    speed2 = torch.addcmul(vx * vx, vy, vy)
    ego_moving = torch.addcmul(evx * evx, evy, evy) >= COLREGS_MIN_SPEED**2
    # object frame: x along the object's velocity
    inv = torch.rsqrt(speed2.clamp_min(1e-12))
    ca, sa = vx * inv, vy * inv
    ex = -torch.addcmul(ca * px, sa, py)
    ey = torch.addcmul(sa * px, ca, py, value=-1.0)
    hx = torch.addcmul(ca * evx, sa, evy)
    hy = torch.addcmul(ca * evy, sa, evx, value=-1.0)
    head_on, crossing = in_colregs_zone(ex, ey, hx, hy)
    phi, defined = colregs_turn(px, py, r_hat, evx, evy, robot_radius)
    applies = (
        (head_on | crossing)
        & objects_mask
        & (speed2 >= COLREGS_MIN_SPEED**2)
        & ego_moving
        & defined
        & (phi > 0)
    )
    # the nearest applicable object (slots are sorted nearest first)
    first = torch.argmax(applies.to(torch.uint8), dim=-1, keepdim=True)
    phi_first = phi.gather(-1, first).squeeze(-1)
    return torch.where(applies.any(-1), COLREGS_PENALTY * phi_first, 0.0)


def step_reward(
    dist_before: torch.Tensor,
    dist_after: torch.Tensor,
    colregs: torch.Tensor,
    collided: torch.Tensor,
    arrived: torch.Tensor,
    running: torch.Tensor,
) -> torch.Tensor:
    """Per-robot reward [B, R]; 0 for robots that were not running at the step's start."""
    r = TIMESTEP_PENALTY + (dist_before - dist_after) + colregs
    r = r + torch.where(collided, COLLISION_PENALTY, torch.where(arrived, GOAL_REWARD, 0.0))
    return torch.where(running, r, 0.0)
