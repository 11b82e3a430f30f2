"""MarineNav's state: every env's robots, obstacles, currents and episode, as one
NamedTuple of batched tensors, and the one way scenarios enter it (`start_scenarios`)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class MarineNavState(NamedTuple):
    """Per env [B] (robots R, obstacles K, vortex cores C in the trailing dims)."""

    x: torch.Tensor  # [B, R] position, m
    y: torch.Tensor
    yaw: torch.Tensor  # [B, R] heading, rad
    vx: torch.Tensor  # [B, R] surge / sway speeds in the body frame, m/s
    vy: torch.Tensor
    r: torch.Tensor  # [B, R] yaw rate, rad/s
    thrust_l: torch.Tensor  # [B, R] thrusts, N
    thrust_r: torch.Tensor
    start: torch.Tensor  # [B, R, 2]
    goal: torch.Tensor  # [B, R, 2]
    robot_active: torch.Tensor  # bool [B, R]: the slot holds a robot
    collided: torch.Tensor  # bool [B, R]
    arrived: torch.Tensor  # bool [B, R]
    timed_out: torch.Tensor  # bool [B, R]
    obstacle: torch.Tensor  # [B, K, 2]
    obstacle_radius: torch.Tensor  # [B, K]
    obstacle_valid: torch.Tensor  # bool [B, K]
    core: torch.Tensor  # [B, C, 2] vortex cores
    core_gamma: torch.Tensor  # [B, C] circulations
    steps: torch.Tensor  # int64 [B]: episode lengths
    travel_steps: torch.Tensor  # int64 [B, R]: steps each robot ran
    energy: torch.Tensor  # [B, R]: summed |T_L| + |T_R| x step time
    scenario_stage: torch.Tensor  # int64 [B]: the curriculum stage of the scenario


def empty_state(b: int, r: int, k: int, c: int, device) -> MarineNavState:
    def zeros(*shape, dtype=torch.float32):
        return torch.zeros(shape, dtype=dtype, device=device)

    def flags(*shape):
        return zeros(*shape, dtype=torch.bool)

    return MarineNavState(
        *(zeros(b, r) for _ in range(8)),
        start=zeros(b, r, 2),
        goal=zeros(b, r, 2),
        robot_active=flags(b, r),
        collided=flags(b, r),
        arrived=flags(b, r),
        timed_out=flags(b, r),
        obstacle=zeros(b, k, 2),
        obstacle_radius=zeros(b, k),
        obstacle_valid=flags(b, k),
        core=zeros(b, c, 2),
        core_gamma=zeros(b, c),
        steps=zeros(b, dtype=torch.int64),
        travel_steps=zeros(b, r, dtype=torch.int64),
        energy=zeros(b, r),
        scenario_stage=zeros(b, dtype=torch.int64),
    )


def running_robots(s: MarineNavState) -> torch.Tensor:
    """bool [B, R]: robots that have not stopped (collided or arrived)."""
    return s.robot_active & ~(s.collided | s.arrived)


def start_scenarios(s: MarineNavState, sc: dict, mask: torch.Tensor) -> MarineNavState:
    """The state with new episodes of scenarios `sc` ([B, ...] each) where mask [B] is set:
    robots at their starts, at rest, thrust 0; the other envs unchanged."""
    # Float fields blend with lerp (exact at weights 0 and 1, and cheaper than
    # torch.where on CPU); bool fields with where.
    m = mask.reshape(-1, 1)
    w = m.to(s.x.dtype)
    w3 = w.unsqueeze(-1)
    keep = ~m
    keep_w = 1 - w  # a float factor: bool operands cost ~3x in a float multiply
    with_cores = s.core.shape[1] > 0
    return MarineNavState(
        x=torch.lerp(s.x, sc["start"][..., 0], w),
        y=torch.lerp(s.y, sc["start"][..., 1], w),
        yaw=torch.lerp(s.yaw, sc["yaw"], w),
        vx=s.vx * keep_w,
        vy=s.vy * keep_w,
        r=s.r * keep_w,
        thrust_l=s.thrust_l * keep_w,
        thrust_r=s.thrust_r * keep_w,
        start=torch.lerp(s.start, sc["start"], w3),
        goal=torch.lerp(s.goal, sc["goal"], w3),
        robot_active=torch.where(m, sc["robot_active"], s.robot_active),
        collided=s.collided & keep,
        arrived=s.arrived & keep,
        timed_out=s.timed_out & keep,
        obstacle=torch.lerp(s.obstacle, sc["obstacle"], w3),
        obstacle_radius=torch.lerp(s.obstacle_radius, sc["obstacle_radius"], w),
        obstacle_valid=torch.where(m, sc["obstacle_valid"], s.obstacle_valid),
        core=torch.lerp(s.core, sc["core"], w3) if with_cores else s.core,
        core_gamma=torch.lerp(s.core_gamma, sc["core_gamma"], w) if with_cores else s.core_gamma,
        steps=torch.where(mask, 0, s.steps),
        travel_steps=s.travel_steps * keep,
        energy=s.energy * keep_w,
        scenario_stage=torch.where(mask, sc["stage"], s.scenario_stage),
    )
