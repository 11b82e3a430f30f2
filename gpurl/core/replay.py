"""The contract between an off-policy agent and the replay the trainer builds for it.

An agent declares what it needs (ReplaySpec); trainers/replay.py builds and samples
the buffer; the agent's losses read a sample's "weight" and "valid" entries through
`weighted_mean`. An agent that learns from sequences (recurrent DQN) declares a
SequenceSpec and mixes its sequences' priorities with `sequence_priority`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tensordict import TensorDict


@dataclass(frozen=True)
class SequenceSpec:
    """Samples are sequences of one stream (R2D2, Kapturowski et al. 2019): `burn_in`
    steps that only warm the recurrent state up, then `length` trained steps, then the
    n_step - 1 steps their n-step returns look ahead into. Sequence starts are `stride`
    rows apart (stride = burn_in + length - overlap), one priority per start; the stored
    `state_key` entry at the start row is the state the unroll begins with."""

    length: int
    burn_in: int
    stride: int
    state_key: str

    def window(self, n_step: int) -> int:
        """Rows a sample reads: burn-in, trained steps and the n-step look-ahead."""
        return self.burn_in + self.length + n_step - 1


@dataclass
class ReplaySpec:
    """What an off-policy agent's replay must do, declared by the agent
    (`OffPolicyAgent.replay_spec()`): n-step returns with discount `gamma`, proportional
    prioritized sampling (`alpha`, importance-weight exponent annealed from `beta_start`
    to `beta_end` over `beta_frames`, the `sampler` that draws), whether samples carry
    the next observation, and entries stored in a narrower dtype."""

    n_step: int = 1
    gamma: float = 0.99
    prioritized: bool = False
    alpha: float = 0.6
    beta_start: float = 0.4
    beta_end: float = 1.0
    beta_frames: int = 0  # 0: the whole run (set by the trainer to total_frames)
    priority_eps: float = 1e-6
    sampler: str = "auto"  # auto | sumtree | cumsum (priority.auto_sampler_kind)
    next_obs: bool = True
    # observation entries kept in a narrower dtype than the env's (packing's heightmaps
    # in float16) and handed back in the env's dtype when sampled
    storage_dtypes: dict = field(default_factory=dict)
    # sequences instead of transitions (trainers/replay.SequenceReplay); None: transitions
    sequence: SequenceSpec | None = None


def weighted_mean(loss: torch.Tensor, batch: TensorDict, uniform: bool = False) -> torch.Tensor:
    """sum(weight x loss) / (number of valid samples): the mean over valid slots,
    importance-weighted under prioritized replay. `uniform` (the agent's
    `uniform_sample`: a uniform replay of an env whose every slot is a sample, so
    weight and valid are all 1): loss.mean(), the same mean without four ops and their
    backward on every update."""
    if uniform:
        return loss.mean()
    return (batch["weight"] * loss).sum() / batch["valid"].sum().clamp_min(1.0)


def sequence_priority(td_error: torch.Tensor, eta: float) -> torch.Tensor:
    """R2D2's priority of a sequence from the TD errors of its trained steps [T, B]:
    eta max_t |delta_t| + (1 - eta) mean_t |delta_t|, per sequence [B]. The max keeps a
    sequence with one surprising step likely to be drawn; the mean keeps long sequences
    of small errors from all looking alike (eta 0.9 in the paper)."""
    error = td_error.abs()
    return eta * error.amax(0) + (1.0 - eta) * error.mean(0)
