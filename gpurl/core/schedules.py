"""Schedules: closed-form functions of a device counter of the progress record
(docs/concepts.md rule 5), so evaluating one never leaves the device."""

from __future__ import annotations

import torch


class LinearSchedule:
    """start -> end linearly over `steps` frames, then constant; `steps=0` means constant end."""

    def __init__(self, start, end, steps: int):
        # floats, or [N] tensors: one schedule per run (trainer.per_seed, core/runs.py)
        self.start = start if isinstance(start, torch.Tensor) else float(start)
        self.end = end if isinstance(end, torch.Tensor) else float(end)
        self.steps = int(steps)

    def __call__(self, step: torch.Tensor) -> torch.Tensor:
        if self.steps <= 0:
            if isinstance(self.end, torch.Tensor):
                return self.end.float().clone()
            return torch.full_like(step, self.end, dtype=torch.float32)
        frac = (step.float() / self.steps).clamp(max=1.0)
        return self.start + (self.end - self.start) * frac
