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


def cartpole_step(state: torch.Tensor, action: torch.Tensor):
    """One Euler step for states [B, 4] (x, x_dot, theta, theta_dot) and actions [B].

    Returns the next state and the terminated flags [B].
    """
    x, x_dot, theta, theta_dot = state.unbind(-1)
    force = torch.where(action.reshape(x.shape) == 1, FORCE_MAG, -FORCE_MAG)
    cos, sin = torch.cos(theta), torch.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot.square() * sin) / TOTAL_MASS
    theta_acc = (GRAVITY * sin - cos * temp) / (
        HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos.square() / TOTAL_MASS)
    )
    x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS
    nxt = torch.stack(
        (
            x + TAU * x_dot,
            x_dot + TAU * x_acc,
            theta + TAU * theta_dot,
            theta_dot + TAU * theta_acc,
        ),
        dim=-1,
    )
    terminated = (nxt[:, 0].abs() > X_LIMIT) | (nxt[:, 2].abs() > THETA_LIMIT)
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

    def _reset_where(self, mask):
        fresh = torch.rand(self.state.shape, generator=self.rng, device=self.device) * 0.1 - 0.05
        self.state = torch.where(mask.unsqueeze(-1), fresh, self.state)
        self.steps = torch.where(mask, 0, self.steps)

    def _advance(self, action):
        self.state, terminated = cartpole_step(self.state, action)
        self.steps = self.steps + 1
        truncated = (self.steps >= self.max_episode_steps) & ~terminated
        reward = torch.ones((self.num_envs, 1), device=self.device)
        return reward, terminated.unsqueeze(-1), truncated.unsqueeze(-1)

    def _observation(self):
        return {"observation": self.state}
