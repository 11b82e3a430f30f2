"""The frame stack: a preallocated ring of the last K frames, never shifted.

Frames are kept as packed words int64 [N, K, 72, 10] (8 pixels a word, see atlas.py).
All envs step in lockstep, so one host-side head index (a Python int, not device data)
names the newest slot: a step renders straight into the next slot and moves the head; no
frame is ever moved and nothing is allocated.

The stack is a FrameStack (its state: ring, ages, head) that the functions below take
and return; the env keeps it in its own state. `stack_observation()` is the one copy a
step makes of the stack: a fresh tensor in time order (oldest first), which the env
never touches again, so a transition can keep it as its next observation (and a replay
buffer can store it) without another copy. With K = 1 it is a single copy of the one
slot; with K > 1 the same pass also unrolls the ring.

Resets (restore modes, measured in docs/benchmarks.md#env-steps):
- "lazy" (default): a reset only zeroes the env's age (frames rendered since its reset);
  `stack_observation()` shows the env's start frame in every slot older than its age. The
  frames are never rewritten on reset, so no full-stack kernel runs whether or not any
  env resets, and no host read decides anything. (Right after a step every env's
  newest slot is its own frame, so that slot is copied without the select.)
- "masked": a reset writes the start frame into every slot of the masked envs with one
  torch.where over the whole ring (a full-state kernel every step).
- "host_skip": "masked", skipped when `mask.any()` is False. That is a host read (a
  device sync on CUDA): for measurement only, never for training.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.pixels.atlas import SCREEN_H, SCREEN_WORDS

RESTORE_MODES = ("lazy", "masked", "host_skip")


class FrameStack(NamedTuple):
    """The stack's state. ring: int64 [N, K, 72, 10] packed frames; age: int64 [N] frames
    rendered since each env's reset (capped at K; "lazy" mode); head: the newest slot (a
    host int); newest_fresh: every env's newest slot holds its own frame (true from a
    step to the next reset, so the observation copies that slot without the select)."""

    ring: torch.Tensor
    age: torch.Tensor
    head: int = 0
    newest_fresh: bool = False


def empty_stack(num_envs: int, k: int, device: torch.device) -> FrameStack:
    ring = torch.zeros((num_envs, k, SCREEN_H, SCREEN_WORDS), dtype=torch.int64, device=device)
    return FrameStack(ring, torch.zeros(num_envs, dtype=torch.int64, device=device))


def next_slot(stack: FrameStack, restore: str) -> tuple[FrameStack, torch.Tensor]:
    """Advance the head; return the stack and the slot view [N, 72, 10] the new frame is
    rendered into."""
    k = stack.ring.shape[1]
    head = (stack.head + 1) % k
    age = torch.clamp_max(stack.age + 1, k) if restore == "lazy" else stack.age
    return FrameStack(stack.ring, age, head, True), stack.ring[:, head]


def reset_stack(
    stack: FrameStack, mask: torch.Tensor, start: torch.Tensor, restore: str
) -> FrameStack:
    """Start over where mask [N] is set; start: int64 [N, 72, 10] each env's first frame."""
    if restore == "lazy":
        return FrameStack(stack.ring, torch.where(mask, 0, stack.age), stack.head, False)
    if restore == "host_skip" and not mask.any():
        return stack
    ring = stack.ring
    torch.where(mask.view(-1, 1, 1, 1), start.unsqueeze(1), ring, out=ring)
    return stack


def stack_observation(stack: FrameStack, start: torch.Tensor, restore: str) -> torch.Tensor:
    """A fresh int64 [N, K, 72, 10] copy of the stack, oldest frame first."""
    ring, head = stack.ring, stack.head
    k = ring.shape[1]
    if restore != "lazy":
        if k == 1:
            return ring.clone()
        return torch.cat((ring[:, head + 1 :], ring[:, : head + 1]), 1)
    out = torch.empty_like(ring)
    for j in range(k):  # over stack depth, not envs: K kernels, one pass in all
        back = k - 1 - j
        slot = ring[:, (head - back) % k]
        if back == 0 and stack.newest_fresh:
            out[:, j].copy_(slot)
            continue
        fresh = (stack.age > back).view(-1, 1, 1)
        torch.where(fresh, slot, start, out=out[:, j])
    return out
