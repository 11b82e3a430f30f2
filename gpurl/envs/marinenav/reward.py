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
are sorted nearest first, so the nearest applicable object sets phi. All the conditions
are decided as one margin (see colregs_margins), so the zones' edges and the speed
thresholds themselves count as outside: sets of measure zero under perception noise.
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


def colregs_margins(
    ex: torch.Tensor, ey: torch.Tensor, hx: torch.Tensor, hy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(head_on, crossing) margins for the ego at (ex, ey) moving along (hx, hy), in the
    other's frame: positive inside the zone (with the heading in range), else <= 0.

    Each zone's inequalities are signed margins folded with minimum, so the caller
    decides with one comparison (on CPU a comparison costs several float ops on these
    tensors). The boundaries themselves count as outside (a set of measure zero under
    perception noise). The heading tests compare components instead of calling atan2:
    |atan2(hy, hx)| > 3 pi / 4  <=>  -hx - |hy| > 0;
    atan2(hy, hx) in [pi/4, 3 pi/4]  <=>  hy > 0 and hy - |hx| >= 0.
    """
    head_on = torch.minimum(
        torch.minimum(ex - HEAD_ON_X[0], HEAD_ON_X[1] - ex),
        torch.minimum(HEAD_ON_HALF_WIDTH - ey.abs(), -hx - hy.abs()),
    )
    x_hi = CROSSING_X[1]
    # outside the cut-out: y - CUT_OUT_Y <= (CUT_OUT_Y / x_hi) (x - x_hi)
    cut_out = (CUT_OUT_Y / x_hi) * (ex - x_hi) - (ey - CUT_OUT_Y)
    box = torch.minimum(
        torch.minimum(ex - CROSSING_X[0], x_hi - ex),
        torch.minimum(ey - CROSSING_Y[0], CROSSING_Y[1] - ey),
    )
    heading = torch.minimum(hy - hx.abs(), hy)
    crossing = torch.minimum(torch.minimum(box, cut_out), heading)
    return head_on, crossing


def in_colregs_zone(
    ex: torch.Tensor, ey: torch.Tensor, hx: torch.Tensor, hy: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(head_on, crossing) as booleans: colregs_margins > 0."""
    return tuple(m > 0 for m in colregs_margins(ex, ey, hx, hy))


def colregs_turn(
    px: torch.Tensor,
    py: torch.Tensor,
    r_hat: torch.Tensor,
    ego_vx: torch.Tensor,
    ego_vy: torch.Tensor,
    robot_radius: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(phi, t2): turn from the ego's velocity direction to the avoidance direction.

    The avoidance direction is the bearing of the object turned by asin(b / d) and by
    atan2(r_self, t), b = r_hat + 1, t = sqrt(d^2 - b^2). The three rotations and the
    ego's are composed as complex products, so one atan2 gives phi in (-pi, pi].
    t2 = d^2 - b^2 is positive where the turn is defined (d <= b would make the
    source's asin NaN).
    """
    b = r_hat + 1.0
    d2 = px * px + py * py
    t2 = d2 - b * b
    t2_pos = t2.clamp_min(0.0)
    # most slots are zero padding (t2 <= 0, masked out below); sqrt of an exact 0 takes a
    # slow path on CPU (~15x), so the root is taken of at least 1e-30
    t = torch.sqrt(t2.clamp_min(1e-30))
    # rotation by asin(b/d) then atan2(R, t), up to a positive scale: (t^2 - b R, t (R + b))
    rot_re = t2_pos - b * robot_radius
    rot_im = t * (robot_radius + b)
    re = px * rot_re - py * rot_im
    im = px * rot_im + py * rot_re
    phi = torch.atan2(im * ego_vx - re * ego_vy, re * ego_vx + im * ego_vy)
    return phi, t2


def colregs_planes(
    px: torch.Tensor,
    py: torch.Tensor,
    vx: torch.Tensor,
    vy: torch.Tensor,
    r_hat: torch.Tensor,
    mask: torch.Tensor,
    ego_vx: torch.Tensor,
    ego_vy: torch.Tensor,
    robot_radius: float,
) -> torch.Tensor:
    """COLREGs reward term [...] from observed objects laid out along the first dim
    ([5, ...], sorted nearest first, robot frame, noisy), one tensor per feature, and
    the ego's ground velocity in its own frame [...]."""
    speed2 = torch.addcmul(vx * vx, vy, vy)
    # object frame: x along the object's velocity
    inv = torch.rsqrt(speed2.clamp_min(1e-12))
    ca, sa = vx * inv, vy * inv
    ex = -torch.addcmul(ca * px, sa, py)
    ey = torch.addcmul(sa * px, ca, py, value=-1.0)
    hx = torch.addcmul(ca * ego_vx, sa, ego_vy)
    hy = torch.addcmul(ca * ego_vy, sa, ego_vx, value=-1.0)
    head_on, crossing = colregs_margins(ex, ey, hx, hy)
    phi, t2 = colregs_turn(px, py, r_hat, ego_vx, ego_vy, robot_radius)
    # Every condition is a margin, positive where it holds: in a zone, both vessels
    # moving, phi > 0 (a right turn) and t2 > 0 (the turn is defined); one comparison
    # decides them all.
    min_speed2 = COLREGS_MIN_SPEED**2
    ego_moving = torch.addcmul(ego_vx * ego_vx, ego_vy, ego_vy).sub_(min_speed2)
    margin = torch.minimum(torch.maximum(head_on, crossing), torch.minimum(phi, t2))
    margin = torch.minimum(torch.minimum(margin, speed2 - min_speed2), ego_moving)
    applies = (margin > 0) & mask
    # The nearest applicable object (slots are sorted nearest first): the smallest slot
    # index among the applicable ones, by a min over slot keys pushed past the last slot
    # where the rule does not apply (argmax over the slots costs 100x a min on CPU).
    n = phi.shape[0]
    slot = torch.arange(n, device=phi.device, dtype=phi.dtype).view(n, *([1] * (phi.dim() - 1)))
    key = torch.add(slot, (~applies).to(phi.dtype), alpha=n)
    first = key.amin(0, keepdim=True)
    phi_first = phi.gather(0, first.clamp_max(n - 1).long()) * (first < n)
    return COLREGS_PENALTY * phi_first.squeeze(0)


def colregs_term(
    objects: torch.Tensor,
    objects_mask: torch.Tensor,
    ego_vx: torch.Tensor,
    ego_vy: torch.Tensor,
    robot_radius: float,
) -> torch.Tensor:
    """COLREGs reward term [B, R] from observed objects [B, R, 5, 5] (robot frame, noisy)
    and the ego's ground velocity in its own frame [B, R]."""
    planes = [p.movedim(-1, 0) for p in objects.unbind(-1)]
    return colregs_planes(*planes, objects_mask.movedim(-1, 0), ego_vx, ego_vy, robot_radius)


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
