"""WAM-V 16 surface vessel, Fossen 3-DOF maneuvering model, batched over [envs, robots].

Frames: world North-East-Down, robot forward-starboard-down; yaw positive clockwise,
wrapped to [0, 2 pi). The relative velocity (over the water) is kept in the world frame
as (vx, vy, r), as the source simulator does, and projected to body axes with the
heading of the sub-step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

DT = 0.05
SUBSTEPS = 10
ACTION_TIME = DT * SUBSTEPS  # one decision = 0.5 s

LENGTH = 5.0
WIDTH = 2.5
ROBOT_RADIUS = 0.5 * math.sqrt(LENGTH**2 + WIDTH**2)  # 2.795 m, collision radius
GOAL_RADIUS = 2.0

MASS = 400.0
# Rigid-body plus added mass, M = diag(m - xDotU, m - yDotV, Izz - nDotR).
M_U = MASS - 20.0
M_V = MASS
M_R = 450.0 + 980.0
X_DOT_U = 20.0
D_U, D_V, D_R = 100.0, 100.0, 980.0  # linear damping (-xU, -yV, -nR)
DN_U, DN_V, DN_R = 150.0, 150.0, 950.0  # quadratic damping (-xUU, -yVV, -nRR)
THRUST_MIN = -500.0
THRUST_MAX = 1000.0
THRUST_ARM = WIDTH / 2  # Mn = (T_L - T_R) * 1.25 m

TWO_PI = 2 * math.pi

# Discrete actions: 5 x 5 (left, right) thrust-change rates in N/s, left-major.
RATE_LEVELS = (0.0, -500.0, -1000.0, 500.0, 1000.0)
NUM_DISCRETE_ACTIONS = len(RATE_LEVELS) ** 2
CONTINUOUS_RATE_SCALE = 1000.0


def constant(values: tuple[float, ...], device: torch.device) -> torch.Tensor:
    """A float32 tensor of `values` on `device`, made once: building it from Python
    numbers on every step is a host-to-device copy, a sync on CUDA (docs/concepts.md rule 1).
    Under torch.compile (compile.env) it is a constant of the graph instead (Dynamo
    cannot trace the cache)."""
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=torch.float32, device=device)
    return _cached_constant(values, device)


@functools.cache
def _cached_constant(values: tuple[float, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def discrete_rates(action: torch.Tensor) -> torch.Tensor:
    """Thrust-change rates [..., 2] (N/s) for discrete actions [...] in [0, 25)."""
    levels = constant(RATE_LEVELS, action.device)
    a = action.long()
    return torch.stack((levels[a // 5], levels[a % 5]), dim=-1)


def continuous_rates(action: torch.Tensor) -> torch.Tensor:
    """Thrust-change rates [..., 2] (N/s) for continuous actions in (-1, 1)^2."""
    return action.to(torch.float32).clamp(-1.0, 1.0) * CONTINUOUS_RATE_SCALE


def apply_thrust_change(thrust: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """Thrusts [..., 2] after holding `rates` for one decision, clipped to [-500, 1000] N."""
    return (thrust + rates * ACTION_TIME).clamp(THRUST_MIN, THRUST_MAX)


def fossen_substeps(
    x: torch.Tensor,
    y: torch.Tensor,
    yaw: torch.Tensor,
    vx: torch.Tensor,
    vy: torch.Tensor,
    r: torch.Tensor,
    thrust_l: torch.Tensor,
    thrust_r: torch.Tensor,
    current: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None,
    substeps: int = SUBSTEPS,
    dt: float = DT,
):
    """Integrate `substeps` sub-steps for one decision; all inputs share one shape.

    (vx, vy, r) is the velocity relative to the water, (vx, vy) in the world frame.
    The thrusts are the ones already updated for this decision (the source applies
    the change on the first sub-step, before any force is computed, so this is the same).
    `current(x, y)` gives the water velocity in the world frame, or None for still water.
    Returns x, y, yaw (wrapped to [0, 2 pi)), vx, vy, r after the decision.

    Sub-step order as in the source: ground velocity = relative + current; integrate
    x, y, yaw; then nu_r += dt M^-1 (-C_RB nu - (C_A + D + Dn) nu_r + tau) in the body
    axes of the new heading. The surge, sway and yaw equations run stacked as one
    [3, ...] tensor so that a decision costs a few hundred small ops, not a thousand.
    """
    if torch.compiler.is_compiling():  # compile.env: Inductor fuses plain arithmetic best
        return _fossen_elementwise(x, y, yaw, vx, vy, r, thrust_l, thrust_r, current, substeps, dt)
    dev, shape = x.device, x.shape

    def column(*values: float) -> torch.Tensor:
        return constant(values, dev).view((3,) + (1,) * len(shape))

    step_over_mass = column(dt / M_U, dt / M_V, dt / M_R)
    # full size: an op with two broadcast operands takes a slow path on CPU (3x)
    linear = column(D_U, D_V, D_R).expand(3, *shape).contiguous()
    quadratic = column(DN_U, DN_V, DN_R).expand(3, *shape).contiguous()
    coriolis_coef = column(MASS, -MASS, -X_DOT_U)
    # With still water u = u_r, so C_A's xDotU u_r r joins C_RB's -m r u in the sway row.
    still_coef = column(MASS, X_DOT_U - MASS, -X_DOT_U)
    tau = torch.stack(
        (thrust_l + thrust_r, torch.zeros_like(x), (thrust_l - thrust_r) * THRUST_ARM)
    )
    # Stacked state, updated in place through views taken once: a sub-step is 20 ops on
    # contiguous rows, with no indexing, stack or copy (each costs as much as a small op).
    # pose: x, y, yaw; vel: the world-frame velocity over the water (vx, vy); nu_r: the
    # body-frame velocity over the water (u_r, v_r) and the yaw rate r.
    pose = torch.stack((x, y, yaw))
    vel = torch.stack((vx, vy))
    nu_r = torch.stack((torch.empty_like(r), torch.empty_like(r), r))
    pairs, cos_sin, rotated = torch.empty_like(nu_r), torch.empty_like(vel), torch.empty_like(vel)
    pos, heading = pose[:2], pose[2]
    vx, vy = vel.unbind(0)
    u_r, v_r, r = nu_r.unbind(0)
    c, s = cos_sin.unbind(0)
    rot0, rot1 = rotated.unbind(0)
    p_rv, p_ru, p_uv = pairs.unbind(0)
    for _ in range(substeps):
        if current is None:
            pos.add_(vel, alpha=dt)
        else:
            cx, cy = current(pose[0], pose[1])
            ground = vel + torch.stack((cx, cy))
            pos.add_(ground, alpha=dt)
        heading.add_(r, alpha=dt)
        torch.cos(heading, out=c)
        torch.sin(heading, out=s)
        torch.mul(vel, c, out=rotated)  # (c vx, c vy)
        torch.addcmul(rot0, s, vy, out=u_r)
        torch.addcmul(rot1, s, vx, value=-1.0, out=v_r)
        if current is None:
            # C_RB nu and C_A nu_r share u = u_r: (m r v, -m r u + xDotU u r, -xDotU u v)
            torch.mul(r, v_r, out=p_rv)
            torch.mul(r, u_r, out=p_ru)
            torch.mul(u_r, v_r, out=p_uv)
            coriolis = pairs * still_coef
        else:
            gx, gy = ground.unbind(0)
            cgx, cgy = gx * c, gy * c
            torch.mul(r, torch.addcmul(cgy, s, gx, value=-1.0), out=p_rv)  # r v
            torch.mul(r, torch.addcmul(cgx, s, gy), out=p_ru)  # r u
            torch.mul(u_r, v_r, out=p_uv)
            coriolis = pairs * coriolis_coef
            coriolis[1] += X_DOT_U * u_r * r
        damping = torch.addcmul(linear, quadratic, nu_r.abs()) * nu_r
        nu_r.addcmul_(coriolis + tau - damping, step_over_mass)
        torch.mul(cos_sin, u_r, out=rotated)  # (c u_r, s u_r)
        torch.addcmul(rot0, s, v_r, value=-1.0, out=vx)
        torch.addcmul(rot1, c, v_r, out=vy)
    x, y, yaw = pose.unbind(0)
    return x, y, torch.remainder(yaw, TWO_PI), vx, vy, r


def _fossen_elementwise(x, y, yaw, vx, vy, r, thrust_l, thrust_r, current, substeps, dt):
    """fossen_substeps written as plain per-element arithmetic, for torch.compile: the
    same equations in the same order, with no stacked state or in-place views (which
    Inductor turns into copies between kernels instead of one fused loop)."""
    force_u, moment = thrust_l + thrust_r, (thrust_l - thrust_r) * THRUST_ARM
    for _ in range(substeps):
        if current is None:
            gx, gy = vx, vy
        else:
            cx, cy = current(x, y)
            gx, gy = vx + cx, vy + cy
        x, y, yaw = x + gx * dt, y + gy * dt, yaw + r * dt
        c, s = torch.cos(yaw), torch.sin(yaw)
        u_r, v_r = c * vx + s * vy, c * vy - s * vx
        p_uv = u_r * v_r
        if current is None:  # C_RB and C_A share u = u_r
            cor_u, cor_v = MASS * (r * v_r), (X_DOT_U - MASS) * (r * u_r)
        else:
            cor_u = MASS * (r * (c * gy - s * gx))
            cor_v = -MASS * (r * (c * gx + s * gy)) + X_DOT_U * u_r * r
        cor_r = -X_DOT_U * p_uv
        u_r = u_r + (cor_u + force_u - (D_U + DN_U * u_r.abs()) * u_r) * (dt / M_U)
        v_r = v_r + (cor_v - (D_V + DN_V * v_r.abs()) * v_r) * (dt / M_V)
        r = r + (cor_r + moment - (D_R + DN_R * r.abs()) * r) * (dt / M_R)
        vx, vy = c * u_r - s * v_r, s * u_r + c * v_r
    return x, y, torch.remainder(yaw, TWO_PI), vx, vy, r
