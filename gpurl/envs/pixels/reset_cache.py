"""Each env's start state, kept on the device and restored under a mask.

The cache is filled once from the generated worlds: the player's start pixel, the start
frame (packed words), the goal-distance of the start observation. Restoring is one
torch.where per small state tensor, over all envs at once: no loop over envs, no host
read. The frame stack restores its own frames (frame_stack.py).
"""

from __future__ import annotations

import torch


class ResetCache:
    def __init__(self, **start: torch.Tensor):
        self.start = start

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.start[name]

    def restore(self, mask: torch.Tensor, **state: torch.Tensor) -> dict[str, torch.Tensor]:
        """state with the entries of envs where mask [N] is set replaced by their start."""
        out = {}
        for name, value in state.items():
            m = mask.view(-1, *([1] * (value.dim() - 1)))
            out[name] = torch.where(m, self.start[name], value)
        return out
