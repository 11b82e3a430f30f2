"""Per-robot perception: the 5 nearest objects by surface distance, noisy, robot frame.

Objects are the other robots still running and the static obstacles. Each observer
draws its own noise: Gaussian sd 0.05 on position and velocity, and an observed radius
0.8 r + 0.2 r VonMises(0, 1) / pi. An object is detected when its noisy centre lies
within range + its observed radius (full circle). The 5 detected objects with the
smallest noisy surface distance |p| - r_hat - r_self come first (nearest first), the
rest of the 5 slots are zero with mask False.
"""

from __future__ import annotations

import math

import torch

PERCEPTION_RANGE = 20.0
MAX_OBJECTS = 5
POS_STD = 0.05
VEL_STD = 0.05
RADIUS_MEAN_RATIO = 0.8
VONMISES_KAPPA = 1.0


def vonmises_quantile_table(
    kappa: float = VONMISES_KAPPA, size: int = 65536, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Quantiles of VonMises(0, kappa) at the probabilities (i + 0.5) / size.

    Sampling is a lookup at a uniform random index: fixed cost (torch's VonMises sampler
    loops until it accepts, which reads the device on every draw). With 65536 entries
    the quantization is below 4e-4 rad.
    """
    grid = torch.linspace(-math.pi, math.pi, 200_001, dtype=torch.float64)
    pdf = torch.exp(kappa * torch.cos(grid))
    cdf = torch.cumulative_trapezoid(pdf, grid)
    cdf = torch.cat((cdf.new_zeros(1), cdf)) / cdf[-1]
    probs = (torch.arange(size, dtype=torch.float64) + 0.5) / size
    idx = torch.searchsorted(cdf, probs).clamp(1, grid.numel() - 1)
    c0, c1 = cdf[idx - 1], cdf[idx]
    w = ((probs - c0) / (c1 - c0).clamp_min(1e-300)).clamp(0, 1)
    q = grid[idx - 1] + w * (grid[idx] - grid[idx - 1])
    return q.to(torch.float32).to(device)


def sample_from_table(
    table: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator
) -> torch.Tensor:
    """Inverse-CDF samples of the distribution whose quantile table is `table`."""
    idx = torch.randint(table.numel(), shape, generator=generator, device=table.device)
    return table[idx]


def perceive(
    x: torch.Tensor,
    y: torch.Tensor,
    cos_yaw: torch.Tensor,
    sin_yaw: torch.Tensor,
    robot_vx: torch.Tensor,
    robot_vy: torch.Tensor,
    robot_visible: torch.Tensor,
    robot_radius: float,
    obstacle: torch.Tensor,
    obstacle_radius: torch.Tensor,
    obstacle_valid: torch.Tensor,
    noise: dict[str, torch.Tensor] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Observed objects [B, R, 5, 5] (p_x, p_y, v_x, v_y, r_hat) and mask [B, R, 5].

    Robot state tensors are [B, R] (ground velocity in the world frame), obstacles
    [B, K, 2] / [B, K]. `noise` holds standard normals "pos" [B, R, N, 2] and "vel"
    [B, R, 5, 2], and VonMises draws "ang" [B, R, N] (N = R + K), or None for noise-free
    perception. Velocity noise is added after the selection (it does not take part in
    it), so only the 5 reported objects draw it.
    """
    b, nr = x.shape
    k = obstacle.shape[1]
    n = nr + k
    ox = torch.cat((x, obstacle[..., 0]), 1).unsqueeze(1)  # [B, 1, N]
    oy = torch.cat((y, obstacle[..., 1]), 1).unsqueeze(1)
    ovx = torch.cat((robot_vx, robot_vx.new_zeros(b, k)), 1).unsqueeze(1)
    ovy = torch.cat((robot_vy, robot_vy.new_zeros(b, k)), 1).unsqueeze(1)
    orad = torch.cat((robot_vx.new_full((b, nr), robot_radius), obstacle_radius), 1)
    present = torch.cat((robot_visible, obstacle_valid), 1).unsqueeze(1)  # [B, 1, N]
    not_self = ~torch.eye(nr, n, dtype=torch.bool, device=x.device)  # [R, N]
    present = present & not_self
    orad = orad.unsqueeze(1)
    if noise is None:
        dx = ox - x.unsqueeze(-1)
        dy = oy - y.unsqueeze(-1)
        wvx, wvy = ovx.expand(b, nr, n), ovy.expand(b, nr, n)
        r_hat = orad.expand(b, nr, n)
    else:
        pos = noise["pos"] * POS_STD
        dx = ox + pos[..., 0] - x.unsqueeze(-1)
        dy = oy + pos[..., 1] - y.unsqueeze(-1)
        wvx, wvy = ovx.expand(b, nr, n), ovy.expand(b, nr, n)
        r_hat = orad * (RADIUS_MEAN_RATIO + (1 - RADIUS_MEAN_RATIO) / math.pi * noise["ang"])
    c, s = cos_yaw.unsqueeze(-1), sin_yaw.unsqueeze(-1)
    px = c * dx + s * dy
    py = c * dy - s * dx
    vx = c * wvx + s * wvy
    vy = c * wvy - s * wvx
    centre = torch.sqrt(px * px + py * py)
    detected = present & (centre <= PERCEPTION_RANGE + r_hat)
    key = torch.where(detected, centre - r_hat, math.inf)
    feats = (px, py, vx, vy, r_hat)
    if n < MAX_OBJECTS:  # fewer object slots than observation slots: pad with nothing
        pad = key.new_full((b, nr, MAX_OBJECTS - n), math.inf)
        key = torch.cat((key, pad), -1)
        feats = tuple(torch.cat((f.expand(b, nr, n), pad), -1) for f in feats)
    key, idx = torch.topk(key, MAX_OBJECTS, dim=-1, largest=False, sorted=True)
    mask = torch.isfinite(key)
    objects = torch.stack([f.expand(b, nr, -1).gather(2, idx) for f in feats], dim=-1)
    if noise is not None:
        # world-frame noise on the reported velocities, rotated with them
        vel = noise["vel"] * VEL_STD
        nvx, nvy = vel[..., 0], vel[..., 1]
        objects[..., 2] += c * nvx + s * nvy
        objects[..., 3] += c * nvy - s * nvx
    objects = torch.where(mask.unsqueeze(-1), objects, 0.0)
    return objects, mask
