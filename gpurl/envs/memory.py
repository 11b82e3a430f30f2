"""A task that needs memory: a cue shown once, a question asked after a delay.

`env=memory env.delay=20 env.cues=2`. Each episode draws one of `cues` cues. The first
observation shows it (one-hot); the next `delay` observations are blank; then the last
observation asks the question (its flag set, the cue not shown). Every action before
the question is ignored; the action taken on seeing the question is the answer, and the
episode ends there, terminated, with reward 1 if it names the cue and 0 otherwise. An
episode is `delay + 1` actions long.

Without memory nothing at the question says which cue it was: a policy that sees one
observation at a time answers at chance, 1 / cues. The greedy return is the success
rate.

    observation  float32 [B, cues + 1]  the cue (one-hot) at the start, the question flag
                                        (the last entry) at the end, zeros between
    action       int64 [B]              Categorical(cues): the answer
    reward       [B, 1]                 1 for the right answer at the question, else 0
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torchrl.data import Categorical, Unbounded

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs import draw
from gpurl.envs.base import NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig


class MemoryState(NamedTuple):
    cue: torch.Tensor  # int64 [B]: the episode's cue
    steps: torch.Tensor  # int64 [B]: actions taken in the episode (its length so far)


@declare(name="memory", num_envs=16, eval_envs=100)
class MemoryConfig(EnvConfig):
    """A cue shown once, a question asked after a delay (gpurl/envs/memory.py)."""

    obs = "vector"

    delay: int = key(20, "blank steps between the cue and the question", ge=0)
    cues: int = key(2, "how many cues (and answers): chance is 1 / cues", ge=2)


@register("env", "memory", MemoryConfig)
class MemoryEnv(state_attributes(MemoryState), NativeEnv):
    def __init__(
        self, num_envs: int = 1, device="cpu", seed: int = 0, delay: int = 20, cues: int = 2
    ):
        super().__init__(num_envs, device, seed)
        self.delay, self.cues = int(delay), int(cues)
        self.max_episode_steps = self.delay + 1
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, self.cues + 1), device=self.device)},
            Categorical(self.cues, shape=b, device=self.device),
        )
        zeros = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.env_state = MemoryState(zeros, zeros.clone())

    def _reset_where(self, mask):
        cue, steps = self.env_state
        fresh = torch.randint(self.cues, cue.shape, generator=self.rng, device=self.device)
        self.env_state = MemoryState(torch.where(mask, fresh, cue), torch.where(mask, 0, steps))

    def _advance(self, action) -> StepResult:
        cue, steps = self.env_state
        asked = steps == self.delay  # this action answers the question
        right = action.reshape(cue.shape) == cue
        reward = (asked & right).float()
        self.env_state = MemoryState(cue, steps + 1)
        truncated = torch.zeros_like(asked)  # every episode ends at its question
        return StepResult(reward[:, None], asked[:, None], truncated[:, None])

    def _observation(self):
        cue, steps = self.env_state
        shown = torch.nn.functional.one_hot(cue, self.cues) * (steps == 0).unsqueeze(-1)
        question = (steps == self.delay).unsqueeze(-1)
        return {"observation": torch.cat((shown, question), -1).float()}

    FRAME = (64, 96)  # height, width: multiples of 16, as video encoders like
    CUE_COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40))

    def render_frames(self) -> torch.Tensor:
        """The cue as a square in its colour at the start, a white square at the
        question, and the time elapsed as a bar along the bottom."""
        cue, steps = self.env_state
        height, width = self.FRAME
        frames = draw.canvas(len(cue), height, width, (60, 60, 60), self.device)
        colours = torch.tensor(self.CUE_COLOURS, dtype=torch.uint8, device=self.device)
        shown = (steps == 0).float() * 16
        frames = draw.boxes(
            frames, width / 2, height / 2 - 6, shown, shown, colours[cue % len(self.CUE_COLOURS)]
        )
        asked = (steps == self.delay).float() * 16
        frames = draw.boxes(frames, width / 2, height / 2 - 6, asked, asked, (255, 255, 255))
        elapsed = steps.clamp(max=self.delay).float() / max(self.delay, 1) * width
        return draw.boxes(frames, elapsed / 2, height - 4, elapsed / 2, 2.0, (200, 200, 200))
