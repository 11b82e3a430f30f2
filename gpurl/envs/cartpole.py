"""CartPole with Gymnasium's CartPole-v1 dynamics, batched over envs on any device.

Constants, Euler integration, termination (|x| > 2.4, |theta| > 12 degrees), reward 1
on every step including the terminal one, truncation at 500 steps and the reset
distribution U(-0.05, 0.05)^4 are Gymnasium's. Actions: 0 pushes left, 1 pushes right.

`observe_velocity=false` observes the cart's position and the pole's angle only: the
velocities must then be inferred from consecutive observations, a task that needs
memory (a recurrent policy, or a stack of frames).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torchrl.data import Categorical, Unbounded

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs import draw
from gpurl.envs.base import LeanCore, NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig

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


def cartpole_physics(x, x_dot, theta, theta_dot, action):
    """One Euler step on the state's columns, each [B]; actions [B] (1 pushes right).

    Gymnasium's equations, with constants folded and multiply-adds fused. Returns the next
    columns and the terminated flags [B]. Column-wise, so a compiled multi-step rollout
    keeps each env's state in registers from one step to the next.
    """
    push = torch.where(action.reshape(theta.shape) == 1, _FORCE_OVER_MASS, -_FORCE_OVER_MASS)
    cos, sin = torch.cos(theta), torch.sin(theta)
    temp = torch.addcmul(push, theta_dot.square(), sin, value=_PML_OVER_MASS)
    theta_acc = torch.addcmul(GRAVITY * sin, cos, temp, value=-1.0) / (
        _DEN_CONST - _DEN_COS2 * cos.square()
    )
    x_acc = torch.addcmul(temp, theta_acc, cos, value=-_PML_OVER_MASS)
    x = torch.add(x, x_dot, alpha=TAU)
    x_dot = torch.add(x_dot, x_acc, alpha=TAU)
    theta = torch.add(theta, theta_dot, alpha=TAU)
    theta_dot = torch.add(theta_dot, theta_acc, alpha=TAU)
    # Python-float bounds: no tensor constants, so the step traces as a pure function.
    terminated = (x.abs() > X_LIMIT) | (theta.abs() > THETA_LIMIT)
    return (x, x_dot, theta, theta_dot), terminated


def cartpole_step(state: torch.Tensor, action: torch.Tensor, limits: torch.Tensor | None = None):
    """One Euler step for states [B, 4] (x, x_dot, theta, theta_dot) and actions [B].

    cartpole_physics on the columns. Returns the next state and the terminated flags [B].
    `limits` (cartpole_limits()) is accepted for backward compatibility; the bounds are
    X_LIMIT and THETA_LIMIT.
    """
    columns, terminated = cartpole_physics(*state.unbind(-1), action)
    return torch.stack(columns, dim=-1), terminated


def cartpole_lean_step(columns: tuple, steps: torch.Tensor, action, noise, force_reset=False):
    """The lean step as one pure function: advance, then reset the envs that are done.

    `columns` are the state's four columns [B], `steps` the episode lengths [B] (integer),
    `noise` uniform [0, 1) [B, 4] (drawn for every env, used where an episode restarts:
    fresh states are U(-0.05, 0.05)^4). `force_reset` (a Python flag, fixed when traced)
    reports every step as truncated, as NativeEnv.force_reset does. Returns (reached,
    terminated, truncated, columns, steps): `reached` the columns this step reached
    (before any reset), flags [B], and the columns and lengths to act on next.
    """
    reached, terminated = cartpole_physics(*columns, action)
    steps = steps + 1
    if force_reset:
        truncated = torch.ones_like(terminated)
    else:
        truncated = (steps >= CartPoleEnv.max_episode_steps) & ~terminated
    done = terminated | truncated
    fresh = (noise * 0.1 - 0.05).unbind(-1)
    columns = tuple(torch.where(done, f, c) for f, c in zip(fresh, reached, strict=True))
    return reached, terminated, truncated, columns, torch.where(done, 0, steps)


class CartPoleState(NamedTuple):
    """CartPole's state: the physics [B, 4] (x, x_dot, theta, theta_dot) and the episode
    lengths [B] (int64)."""

    state: torch.Tensor
    steps: torch.Tensor


@declare(name="cartpole", num_envs=8, eval_envs=10)
class CartPoleConfig(EnvConfig):
    """gpurl's native CartPole (Gymnasium CartPole-v1 dynamics), batched on the device."""

    obs = "vector"

    observe_velocity: bool = key(
        True, "false: observe x and theta only (a partially observed CartPole, for memory)"
    )


POSITIONS = [0, 2]  # x and theta: what a CartPole without its velocities observes


@register("env", "cartpole", CartPoleConfig)
class CartPoleEnv(state_attributes(CartPoleState), NativeEnv):
    max_episode_steps = 500

    def __init__(
        self, num_envs: int = 1, device="cpu", seed: int = 0, observe_velocity: bool = True
    ):
        super().__init__(num_envs, device, seed)
        b = self.batch_size
        self.observe_velocity = bool(observe_velocity)
        width = 4 if self.observe_velocity else len(POSITIONS)
        self._set_specs(
            {"observation": Unbounded(shape=(*b, width), device=self.device)},
            Categorical(2, shape=b, device=self.device),
        )
        self.env_state = CartPoleState(
            state=torch.zeros((*b, 4), device=self.device),
            steps=torch.zeros(b, dtype=torch.int64, device=self.device),
        )
        self.reward = torch.ones((*b, 1), device=self.device)  # constant: never written

    def _reset_where(self, mask):
        state, steps = self.env_state
        fresh = torch.rand(state.shape, generator=self.rng, device=self.device)
        self.env_state = CartPoleState(
            torch.where(mask.unsqueeze(-1), fresh.mul_(0.1).sub_(0.05), state),
            torch.where(mask, 0, steps),
        )

    def _advance(self, action):
        state, terminated = cartpole_step(self.env_state.state, action)
        steps = self.env_state.steps + 1
        self.env_state = CartPoleState(state, steps)
        truncated = (steps >= self.max_episode_steps) & ~terminated
        return StepResult(self.reward, terminated.unsqueeze(-1), truncated.unsqueeze(-1))

    def _observation(self):
        return {"observation": self._observed(self.env_state.state)}

    def _observed(self, state: torch.Tensor) -> torch.Tensor:
        return state if self.observe_velocity else state[..., POSITIONS]

    def lean_core(self) -> LeanCore:
        return LeanCore(
            step=_cartpole_core if self.observe_velocity else _positions_core,
            noise_shapes=(self.env_state.state.shape,),
            observe=lambda state, steps: {"observation": self._observed(state)},
            # working state: the columns, and the lengths as int32 (<= 500): 32-bit
            # lanes throughout, so a vector of them is as wide as a vector of floats
            unpack=lambda state, steps: (*state.unbind(-1), steps.to(torch.int32)),
            pack=lambda x, x_dot, theta, theta_dot, steps: CartPoleState(
                torch.stack((x, x_dot, theta, theta_dot), dim=-1),
                steps.to(torch.int64),
            ),
        )

    # frames as Gymnasium draws CartPole, at half its size: the track 4.8 m wide
    FRAME = (208, 320)  # height, width: multiples of 16, as video encoders like

    def render_frames(self) -> torch.Tensor:
        height, width = self.FRAME
        scale = width / (2 * X_LIMIT)
        x, theta = self.env_state.state[:, 0], self.env_state.state[:, 2]
        cart_x, cart_y = x * scale + width / 2, height * 0.7
        pole = 2 * HALF_LENGTH * scale
        frames = draw.canvas(len(x), height, width, (255, 255, 255), self.device)
        frames = draw.boxes(frames, width / 2, cart_y, width, 0.5, (0, 0, 0))  # the track
        frames = draw.boxes(frames, cart_x, cart_y, 12.5, 7.5, (0, 0, 0))
        tip_x, tip_y = cart_x + pole * torch.sin(theta), cart_y - pole * torch.cos(theta)
        frames = draw.segments(frames, cart_x, cart_y, tip_x, tip_y, 2.5, (202, 152, 101))
        return draw.discs(frames, cart_x, cart_y, 2.5, (129, 132, 203))


def _cartpole_core(work, action, noise, force_reset=False):
    """LeanCore.step on the working state (x, x_dot, theta, theta_dot, steps)."""
    reached, terminated, truncated, columns, steps = cartpole_lean_step(
        work[:4], work[4], action, noise[0], force_reset
    )
    terminated, truncated = terminated.unsqueeze(-1), truncated.unsqueeze(-1)
    nxt = {
        "observation": torch.stack(reached, dim=-1),
        "reward": torch.ones_like(terminated, dtype=reached[0].dtype),
        "done": terminated | truncated,
        "terminated": terminated,
        "truncated": truncated,
    }
    return (*columns, steps), nxt


def _positions_core(work, action, noise, force_reset=False):
    """_cartpole_core observing x and theta only (observe_velocity=false)."""
    work, nxt = _cartpole_core(work, action, noise, force_reset)
    nxt["observation"] = nxt["observation"][..., POSITIONS]
    return work, nxt
