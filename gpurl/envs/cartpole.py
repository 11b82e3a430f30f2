"""CartPole with Gymnasium's CartPole-v1 dynamics, batched over envs on any device.

Constants, Euler integration, termination (|x| > 2.4, |theta| > 12 degrees), reward 1
on every step including the terminal one, truncation at 500 steps and the reset
distribution U(-0.05, 0.05)^4 are Gymnasium's. Actions: 0 pushes left, 1 pushes right.
"""

from __future__ import annotations

import math

import torch
from torchrl.data import Categorical, Unbounded

from gpurl.envs.base import NativeEnv

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
HALF_LENGTH = 0.5
POLEMASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4


# Constants folded for the batched step: fewer, fused tensor ops per step.
_FORCE_OVER_MASS = FORCE_MAG / TOTAL_MASS
_PML_OVER_MASS = POLEMASS_LENGTH / TOTAL_MASS
_DEN_CONST = HALF_LENGTH * 4.0 / 3.0
_DEN_COS2 = HALF_LENGTH * MASS_POLE / TOTAL_MASS
_LIMITS = (X_LIMIT, math.inf, THETA_LIMIT, math.inf)


def cartpole_limits(device=None) -> torch.Tensor:
    """|x| and |theta| bounds past which an episode terminates, as one row."""
    return torch.tensor(_LIMITS, device=device)


def cartpole_step(state: torch.Tensor, action: torch.Tensor, limits: torch.Tensor):
    """One Euler step for states [B, 4] (x, x_dot, theta, theta_dot) and actions [B].

    Gymnasium's equations, with constants folded and multiply-adds fused. `limits` is
    cartpole_limits(), kept by the caller on the state's device. Returns the next state
    and the terminated flags [B].
    """
    _, x_dot, theta, theta_dot = state.unbind(-1)
    push = torch.where(action.reshape(theta.shape) == 1, _FORCE_OVER_MASS, -_FORCE_OVER_MASS)
    cos, sin = torch.cos(theta), torch.sin(theta)
    temp = torch.addcmul(push, theta_dot.square(), sin, value=_PML_OVER_MASS)
    theta_acc = torch.addcmul(GRAVITY * sin, cos, temp, value=-1.0) / (
        _DEN_CONST - _DEN_COS2 * cos.square()
    )
    x_acc = torch.addcmul(temp, theta_acc, cos, value=-_PML_OVER_MASS)
    nxt = torch.add(state, torch.stack((x_dot, x_acc, theta_dot, theta_acc), dim=-1), alpha=TAU)
    terminated = (nxt.abs() > limits).any(-1)
    return nxt, terminated


class CartPoleEnv(NativeEnv):
    max_episode_steps = 500

    def __init__(self, num_envs: int = 1, device="cpu", seed: int = 0):
        super().__init__(num_envs, device, seed)
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, 4), device=self.device)},
            Categorical(2, shape=b, device=self.device),
        )
        self.state = torch.zeros((*b, 4), device=self.device)
        self.steps = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.reward = torch.ones((*b, 1), device=self.device)  # constant: never written
        self.limits = cartpole_limits(self.device)

    def _reset_where(self, mask):
        fresh = torch.rand(self.state.shape, generator=self.rng, device=self.device)
        self.state = torch.where(mask.unsqueeze(-1), fresh.mul_(0.1).sub_(0.05), self.state)
        self.steps = torch.where(mask, 0, self.steps)

    def _advance(self, action):
        self.state, terminated = cartpole_step(self.state, action, self.limits)
        self.steps = self.steps + 1
        truncated = (self.steps >= self.max_episode_steps) & ~terminated
        return self.reward, terminated.unsqueeze(-1), truncated.unsqueeze(-1)

    def _observation(self):
        return {"observation": self.state}
