"""Schedules: closed-form functions of a device counter of the progress record
(docs/concepts.md rule 5), so evaluating one never leaves the device."""

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
