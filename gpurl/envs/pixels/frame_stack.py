"""The frame stack: a preallocated ring of the last K frames, never shifted.

Frames are kept as packed words int64 [N, K, 72, 10] (8 pixels a word, see atlas.py).
All envs step in lockstep, so one host-side head index (a Python int, not device data)
names the newest slot: a step renders straight into the next slot and moves the head; no
frame is ever moved and nothing is allocated.

`observation()` is the one copy a step makes of the stack: a fresh tensor in time order
(oldest first), which the env never touches again, so a transition can keep it as its
next observation (and a replay buffer can store it) without another copy. With K = 1 it
is a single copy of the one slot; with K > 1 the same pass also unrolls the ring.

Resets (restore modes, measured in docs/BENCHMARKS.md):
- "lazy" (default): a reset only zeroes the env's age (frames rendered since its reset);
  `observation()` shows the env's start frame in every slot older than its age. The
  frames are never rewritten on reset, so no full-stack kernel runs whether or not any
  env resets, and no host read decides anything. (Right after a step every env's
  newest slot is its own frame, so that slot is copied without the select.)
- "masked": a reset writes the start frame into every slot of the masked envs with one
  torch.where over the whole ring (a full-state kernel every step).
- "host_skip": "masked", skipped when `mask.any()` is False. That is a host read (a
  device sync on CUDA): for measurement only, never for training.
"""

from __future__ import annotations

import torch

from gpurl.envs.pixels.atlas import SCREEN_H, SCREEN_WORDS

RESTORE_MODES = ("lazy", "masked", "host_skip")


class FrameStack:
    def __init__(self, num_envs: int, k: int, device: torch.device, restore: str = "lazy"):
        self.k = k
        self.restore = restore
        self.ring = torch.zeros(
            (num_envs, k, SCREEN_H, SCREEN_WORDS), dtype=torch.int64, device=device
        )
        self.age = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.head = 0
        self._newest_fresh = False

    def next_slot(self) -> torch.Tensor:
        """Advance the head; return the slot view [N, 72, 10] the new frame is rendered into."""
        self.head = (self.head + 1) % self.k
        if self.restore == "lazy":
            self.age = torch.clamp_max(self.age + 1, self.k)
        # Until the next reset every env's newest slot holds its own frame: the
        # observation can copy that slot without the start-frame select.
        self._newest_fresh = True
        return self.ring[:, self.head]

    def reset_where(self, mask: torch.Tensor, start: torch.Tensor) -> None:
        """Start over where mask [N] is set; start: int64 [N, 72, 10] each env's first frame."""
        if self.restore == "lazy":
            self.age = torch.where(mask, 0, self.age)
            self._newest_fresh = False
            return
        if self.restore == "host_skip" and not mask.any():
            return
        torch.where(mask.view(-1, 1, 1, 1), start.unsqueeze(1), self.ring, out=self.ring)

    def observation(self, start: torch.Tensor) -> torch.Tensor:
        """A fresh int64 [N, K, 72, 10] copy of the stack, oldest frame first."""
        if self.restore != "lazy":
            if self.k == 1:
                return self.ring.clone()
            return torch.cat((self.ring[:, self.head + 1 :], self.ring[:, : self.head + 1]), 1)
        out = torch.empty_like(self.ring)
        for j in range(self.k):  # over stack depth, not envs: K kernels, one pass in all
            back = self.k - 1 - j
            slot = self.ring[:, (self.head - back) % self.k]
            if back == 0 and self._newest_fresh:
                out[:, j].copy_(slot)
                continue
            fresh = (self.age > back).view(-1, 1, 1)
            torch.where(fresh, slot, start, out=out[:, j])
        return out
