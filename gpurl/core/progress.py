"""The progress record: how far training has come, the one count every part reads.

    runs      the independent runs this process trains (core/runs.py; one by default)
    frames    env steps taken, summed over envs and over torchrun's ranks (one step
              of a MarineNav env with five robots is one frame, as for
              `trainer.init_random_frames`)
    updates   gradient updates made
    episodes  episodes finished, over this process's envs

Each count is a device tensor, which schedules read (epsilon, exploration noise,
prioritized beta, learning-rate annealing, an agent's stages: docs/concepts.md rule 5), so
reading it never leaves the device. Frames and updates are also kept as host ints,
advanced in the same call that advances the tensors: the host decides on them (the
trainer's intervals, an agent's hard target copies and delayed actor steps) without
reading the device, and the two can never disagree. Episodes are device-only: knowing
them on the host would need a read.

The collector advances frames and episodes as it steps, the trainer updates.
"""

from __future__ import annotations

import torch

from gpurl.core.runs import ONE_RUN, Runs


class Progress:
    """The run's counters: `frames`, `updates`, `episodes` as int64 device scalars,
    `frame_count` and `update_count` as host ints kept equal to the first two, and
    `runs`, the independent runs this process trains (core/runs.py)."""

    def __init__(self, device="cpu", world_size: int = 1, runs: Runs = ONE_RUN):
        # Under torchrun every rank steps as many envs as this one, so a collector adds
        # its own frames x world_size: schedules follow the whole run's frames. With N
        # runs in one process (core/runs.py) each owns 1/N of the envs, and every count
        # is one run's: frames = the process's frames / N.
        self.world_size = int(world_size)
        self.runs = runs
        self.frames = torch.zeros((), dtype=torch.int64, device=device)
        self.updates = torch.zeros((), dtype=torch.int64, device=device)
        self.episodes = torch.zeros((), dtype=torch.int64, device=device)
        self.frame_count = 0  # == frames, on the host
        self.update_count = 0  # == updates, on the host

    def add_frames(self, local_frames: int) -> None:
        """Count `local_frames` steps of this process's envs (x world_size ranks, / N runs)."""
        n = int(local_frames) * self.world_size // self.runs.n
        self.frames.add_(n)
        self.frame_count += n

    def add_episodes(self, finished: torch.Tensor) -> None:
        """Count the episodes ended this step (a device count, never read here)."""
        self.episodes.add_(finished)

    def add_update(self) -> None:
        self.updates.add_(1)
        self.update_count += 1

    def state_dict(self) -> dict:
        return {
            "frames": self.frames.clone(),
            "updates": self.updates.clone(),
            "episodes": self.episodes.clone(),
            "frame_count": self.frame_count,
            "update_count": self.update_count,
            "runs": self.runs.state_dict(),  # per-run hyperparameters (PBT changes them)
        }

    def load_state_dict(self, state: dict) -> None:
        self.frames.copy_(state["frames"])
        self.updates.copy_(state["updates"])
        self.episodes.copy_(state["episodes"])
        self.frame_count = int(state["frame_count"])
        self.update_count = int(state["update_count"])
        self.runs.load_state_dict(state.get("runs", {}))

    def __repr__(self) -> str:  # the host counts only: no device read
        return f"Progress(frames={self.frame_count}, updates={self.update_count})"
