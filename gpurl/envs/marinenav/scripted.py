"""Reference policies for MarineNav: a scripted heading controller and a random policy.

Both take the env's observation TensorDict and write ("agents", "action"), so they go
wherever a policy goes (`env.rollout(policy=...)`, the evaluation tool, a collector).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from gpurl.envs.marinenav.dynamics import (
    ACTION_TIME,
    CONTINUOUS_RATE_SCALE,
    NUM_DISCRETE_ACTIONS,
    RATE_LEVELS,
    ROBOT_RADIUS,
    THRUST_MAX,
    THRUST_MIN,
    constant,
)


def rates_to_discrete(rates: torch.Tensor) -> torch.Tensor:
    """Nearest discrete action [...] for thrust-change rates [..., 2] (N/s)."""
    levels = constant(RATE_LEVELS, rates.device).to(rates.dtype)
    idx = (rates.unsqueeze(-1) - levels).abs().argmin(-1)  # [..., 2]
    return idx[..., 0] * len(RATE_LEVELS) + idx[..., 1]


class ScriptedPolicy(nn.Module):
    """Proportional heading controller towards the goal with obstacle repulsion.

    The desired direction (robot frame) is the unit vector to the goal plus, for each
    observed object closer than `influence` metres (surface distance), a push away from
    it that grows as the gap closes, and a push to starboard for objects ahead (a
    COLREGs-flavoured habit: give way by turning right). The heading error, damped by the
    yaw rate, sets the thrust difference; the forward thrust drops when the error is
    large and near the goal. Thrusts move toward their targets at the largest rate the
    action allows. approach_only=True repels only objects that are closing in (it
    scored 0.87 vs 0.90 success on the evaluation set, with 3 collisions, so it is off).
    """

    def __init__(
        self,
        continuous: bool = False,
        influence: float = 15.0,
        repulsion: float = 6.0,
        starboard: float = 1.0,
        heading_gain: float = 1.5,
        yaw_damping: float = 1.0,
        min_speed_factor: float = 0.2,
        goal_slowdown: float = 12.0,
        approach_only: bool = False,
    ):
        super().__init__()
        self.continuous = continuous
        self.influence = influence
        self.repulsion = repulsion
        self.starboard = starboard
        self.heading_gain = heading_gain
        self.yaw_damping = yaw_damping
        self.min_speed_factor = min_speed_factor
        self.goal_slowdown = goal_slowdown
        self.approach_only = approach_only

    def rates(self, self_state: torch.Tensor, objects: torch.Tensor, mask: torch.Tensor):
        gx, gy, ego_vx, ego_vy, yaw_rate, tl, tr = self_state.unbind(-1)
        gdist = torch.sqrt(gx * gx + gy * gy).clamp_min(1e-6)
        dx, dy = gx / gdist, gy / gdist
        px, py, ovx, ovy, r_hat = objects.unbind(-1)
        centre = torch.sqrt(px * px + py * py).clamp_min(1e-6)
        gap = (centre - r_hat - ROBOT_RADIUS).clamp_min(0.1)
        weight = ((self.influence - gap) / self.influence).clamp_min(0.0).square()
        weight = weight * self.repulsion * mask
        if self.approach_only:  # ignore objects that are not closing in
            closing = -(px * (ovx - ego_vx.unsqueeze(-1)) + py * (ovy - ego_vy.unsqueeze(-1)))
            weight = weight * (closing > 0)
        ahead = (px > 0).to(px.dtype)
        dx = dx - (weight * px / centre).sum(-1)
        dy = dy - (weight * py / centre).sum(-1) + (self.starboard * weight * ahead).sum(-1)
        err = torch.atan2(dy, dx)  # > 0: the desired direction is to starboard
        turn = (self.heading_gain * err - self.yaw_damping * yaw_rate).clamp(-1.0, 1.0)
        # slow down while something is close ahead, and near the goal
        ahead_gap = torch.where(mask & (px > -ROBOT_RADIUS), gap, self.influence).amin(-1)
        caution = ((ahead_gap - 1.0) / self.influence).clamp(self.min_speed_factor, 1.0)
        forward = (
            torch.cos(err).clamp_min(0.0) * (gdist / self.goal_slowdown).clamp(0.12, 1.0) * caution
        )
        base = forward * THRUST_MAX * 0.75
        diff = turn * 600.0
        target_l = (base + diff).clamp(THRUST_MIN, THRUST_MAX)
        target_r = (base - diff).clamp(THRUST_MIN, THRUST_MAX)
        rates = torch.stack(((target_l - tl), (target_r - tr)), -1) / ACTION_TIME
        return rates.clamp(-CONTINUOUS_RATE_SCALE, CONTINUOUS_RATE_SCALE)

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        rates = self.rates(
            td.get(("agents", "self_state")),
            td.get(("agents", "objects")),
            td.get(("agents", "objects_mask")),
        )
        if self.continuous:
            action = rates / CONTINUOUS_RATE_SCALE
        else:
            action = rates_to_discrete(rates)
        td.set(("agents", "action"), action)
        return td


class RandomPolicy(nn.Module):
    """Uniform random actions from its own generator (discrete or continuous)."""

    def __init__(self, continuous: bool = False, seed: int = 0, device="cpu"):
        super().__init__()
        self.continuous = continuous
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)

    def forward(self, td: TensorDictBase) -> TensorDictBase:
        shape = td.get(("agents", "running")).shape
        dev = td.device
        if self.continuous:
            action = torch.rand((*shape, 2), generator=self.gen, device=dev) * 2 - 1
        else:
            action = torch.randint(NUM_DISCRETE_ACTIONS, shape, generator=self.gen, device=dev)
        td.set(("agents", "action"), action)
        return td
