"""The contract between an off-policy agent and the replay the trainer builds for it.

An agent declares what it needs (ReplaySpec); trainers/replay.py builds and samples
the buffer; the agent's losses read a sample's "weight" and "valid" entries through
`weighted_mean`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tensordict import TensorDict


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


def weighted_mean(loss: torch.Tensor, batch: TensorDict) -> torch.Tensor:
    """sum(weight x loss) / (number of valid samples): the mean over valid slots,
    importance-weighted under prioritized replay."""
    return (batch["weight"] * loss).sum() / batch["valid"].sum().clamp_min(1.0)
