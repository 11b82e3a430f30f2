"""Closed-form schedules of a device step counter (DESIGN.md rule 5) and noise processes.

A schedule is evaluated on a tensor step counter and returns a tensor, so reading it
never leaves the device.
"""

from __future__ import annotations

import torch


class LinearSchedule:
    """start -> end linearly over `steps` frames, then constant; `steps=0` means constant end."""

    def __init__(self, start: float, end: float, steps: int):
        self.start, self.end, self.steps = float(start), float(end), int(steps)

    def __call__(self, step: torch.Tensor) -> torch.Tensor:
        if self.steps <= 0:
            return torch.full_like(step, self.end, dtype=torch.float32)
        frac = (step.float() / self.steps).clamp(max=1.0)
        return self.start + (self.end - self.start) * frac


def uniform_legal_action(mask: torch.Tensor) -> torch.Tensor:
    """An action drawn uniformly among the True entries of mask [..., n], without syncs.

    Uniform noise is zeroed on illegal actions and the argmax taken: every legal action
    is equally likely to hold the largest draw. An all-False row yields action 0.
    """
    return (torch.rand(mask.shape, device=mask.device) * mask).argmax(-1)


def ou_step(state: torch.Tensor, theta: float, sigma: float, dt: float = 1e-2) -> torch.Tensor:
    """One Ornstein-Uhlenbeck step toward 0: dx = -theta x dt + sigma sqrt(dt) N(0, 1)."""
    return state - theta * state * dt + sigma * dt**0.5 * torch.randn_like(state)
