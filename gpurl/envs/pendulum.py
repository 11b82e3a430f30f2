"""Pendulum with Gymnasium's Pendulum-v1 dynamics, batched over envs on any device.

Observation (cos theta, sin theta, theta_dot); torque in [-2, 2]; reward
-(angle^2 + 0.1 theta_dot^2 + 0.001 u^2); never terminates; truncated at 200 steps;
resets theta ~ U(-pi, pi), theta_dot ~ U(-1, 1), as in Gymnasium.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torchrl.data import Bounded, Unbounded

from gpurl.core.config import declare
from gpurl.core.registry import register
from gpurl.envs import draw
from gpurl.envs.base import LeanCore, NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
G = 10.0
MASS = 1.0
LENGTH = 1.0


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


def pendulum_step(state: torch.Tensor, torque: torch.Tensor):
    """One step for states [B, 2] (theta, theta_dot) and torques [B, 1]: next state, reward [B]."""
    th, thdot = state.unbind(-1)
    u = torque.reshape(th.shape).clamp(-MAX_TORQUE, MAX_TORQUE)
    cost = angle_normalize(th).square() + 0.1 * thdot.square() + 0.001 * u.square()
    new_thdot = thdot + (3 * G / (2 * LENGTH) * torch.sin(th) + 3.0 / (MASS * LENGTH**2) * u) * DT
    new_thdot = new_thdot.clamp(-MAX_SPEED, MAX_SPEED)
    return torch.stack((th + new_thdot * DT, new_thdot), dim=-1), -cost


def pendulum_observation(state: torch.Tensor) -> torch.Tensor:
    th, thdot = state.unbind(-1)
    return torch.stack((torch.cos(th), torch.sin(th), thdot), dim=-1)


class PendulumState(NamedTuple):
    """Pendulum's state: (theta, theta_dot) [B, 2] and the episode lengths [B] (int64)."""

    state: torch.Tensor
    steps: torch.Tensor


@declare(name="pendulum", num_envs=1, eval_envs=10)
class PendulumConfig(EnvConfig):
    """gpurl's native Pendulum (Gymnasium Pendulum-v1 dynamics), batched on the device."""

    obs = "vector"


@register("env", "pendulum", PendulumConfig)
class PendulumEnv(state_attributes(PendulumState), NativeEnv):
    max_episode_steps = 200

    def __init__(self, num_envs: int = 1, device="cpu", seed: int = 0):
        super().__init__(num_envs, device, seed)
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, 3), device=self.device)},
            Bounded(-MAX_TORQUE, MAX_TORQUE, shape=(*b, 1), device=self.device),
        )
        self.env_state = PendulumState(
            state=torch.zeros((*b, 2), device=self.device),
            steps=torch.zeros(b, dtype=torch.int64, device=self.device),
        )
        self._high = torch.tensor([math.pi, 1.0], device=self.device)

    def _reset_where(self, mask):
        state, steps = self.env_state
        u = torch.rand(state.shape, generator=self.rng, device=self.device)
        fresh = (2 * u - 1) * self._high
        self.env_state = PendulumState(
            torch.where(mask.unsqueeze(-1), fresh, state), torch.where(mask, 0, steps)
        )

    def _advance(self, action):
        state, reward = pendulum_step(self.env_state.state, action)
        steps = self.env_state.steps + 1
        self.env_state = PendulumState(state, steps)
        truncated = (steps >= self.max_episode_steps).unsqueeze(-1)
        return StepResult(reward.unsqueeze(-1), torch.zeros_like(truncated), truncated)

    def _observation(self):
        return {"observation": pendulum_observation(self.env_state.state)}

    def lean_core(self) -> LeanCore:
        return LeanCore(
            step=_pendulum_core,
            noise_shapes=(self.env_state.state.shape,),
            observe=lambda state, steps: {"observation": pendulum_observation(state)},
            pack=PendulumState,
        )

    FRAME = (192, 192)  # height, width: multiples of 16, as video encoders like

    def render_frames(self) -> torch.Tensor:
        """Gymnasium's Pendulum picture: the rod from the pivot, theta 0 pointing up."""
        height, width = self.FRAME
        theta = self.env_state.state[:, 0]
        rod = 0.4 * width
        frames = draw.canvas(len(theta), height, width, (255, 255, 255), self.device)
        tip_x, tip_y = width / 2 + rod * torch.sin(theta), height / 2 - rod * torch.cos(theta)
        frames = draw.segments(frames, width / 2, height / 2, tip_x, tip_y, 8.0, (204, 77, 77))
        return draw.discs(frames, width / 2, height / 2, 3.0, (0, 0, 0))


def _pendulum_core(work, torque, noise, force_reset=False):
    """LeanCore.step: advance, then restart where truncated (theta ~ U(-pi, pi),
    theta_dot ~ U(-1, 1) from the uniform `noise` [B, 2]), as lean_step does."""
    state, steps = work
    reached, reward = pendulum_step(state, torque)
    steps = steps + 1
    if force_reset:
        truncated = torch.ones_like(steps, dtype=torch.bool)
    else:
        truncated = steps >= PendulumEnv.max_episode_steps
    u_theta, u_speed = (2 * noise[0] - 1).unbind(-1)
    fresh = torch.stack((u_theta * math.pi, u_speed), dim=-1)
    state = torch.where(truncated.unsqueeze(-1), fresh, reached)
    truncated = truncated.unsqueeze(-1)
    nxt = {
        "observation": pendulum_observation(reached),
        "reward": reward.unsqueeze(-1),
        "done": truncated,
        "terminated": torch.zeros_like(truncated),
        "truncated": truncated,
    }
    return (state, torch.where(truncated.squeeze(-1), 0, steps)), nxt
