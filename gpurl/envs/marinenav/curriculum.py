"""The training curriculum (stages by global step) and the fixed evaluation set."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Stage:
    from_step: int
    robots: int
    obstacles: int
    min_start_goal_dis: float


# The paper's schedule over 6M steps.
CURRICULUM: tuple[Stage, ...] = (
    Stage(0, 3, 0, 30.0),
    Stage(1_000_000, 4, 0, 35.0),
    Stage(2_000_000, 5, 0, 40.0),
    Stage(3_000_000, 5, 2, 40.0),
    Stage(4_000_000, 5, 3, 40.0),
    Stage(5_000_000, 5, 4, 40.0),
)

EVAL_SEED = 253
EVAL_EPISODES_PER_STAGE = 10


def stage_table(device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """The curriculum as device tensors, indexed by stage."""
    return {
        "from_step": torch.tensor([s.from_step for s in CURRICULUM], device=device),
        "robots": torch.tensor([s.robots for s in CURRICULUM], device=device),
        "obstacles": torch.tensor([s.obstacles for s in CURRICULUM], device=device),
        "min_start_goal_dis": torch.tensor(
            [s.min_start_goal_dis for s in CURRICULUM], dtype=torch.float32, device=device
        ),
    }


def stage_at(global_step: torch.Tensor, from_step: torch.Tensor) -> torch.Tensor:
    """Stage index for a (device) global step: a closed form, no host read."""
    return (global_step.reshape(-1, 1) >= from_step.reshape(1, -1)).sum(-1).sub(1).clamp_min(0)
