"""The progress record: how far training has come, as device counters the trainer owns.

Schedules (epsilon, exploration noise, prioritized beta, an agent's stages) are
closed-form functions of these counters (DESIGN.md rule 5), so reading them never
leaves the device and every schedule agrees on what "a frame" is:

    frames    env steps taken, summed over envs and over torchrun's ranks (one step
              of a MarineNav env with five robots is one frame, as for
              `trainer.init_random_frames`)
    updates   gradient updates made
    episodes  episodes finished, over this process's envs

The collector advances `frames` and `episodes` as it steps, the trainer `updates`.
"""

from __future__ import annotations

import torch

COUNTERS = ("frames", "updates", "episodes")


class Progress:
    def __init__(self, device="cpu", world_size: int = 1):
        # Under torchrun every rank steps as many envs as this one, so a collector adds
        # its own frames x world_size: schedules follow the whole run's frames.
        self.world_size = int(world_size)
        for name in COUNTERS:
            setattr(self, name, torch.zeros((), dtype=torch.int64, device=device))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name).clone() for name in COUNTERS}

    def load_state_dict(self, state) -> None:
        for name in COUNTERS:
            getattr(self, name).copy_(state[name])

    def __repr__(self) -> str:  # a host read: for debugging, never on the hot path
        return "Progress(" + ", ".join(f"{n}={int(getattr(self, n))}" for n in COUNTERS) + ")"
