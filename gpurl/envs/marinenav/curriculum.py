"""The training curriculum (stages by global step) and the fixed evaluation set.

The default is the paper's schedule; an env config may give its own as a list of rows
(`env.curriculum` in gpurl/configs/env/marinenav.yaml), which `parse_curriculum`
checks. The global step is the trainer's frame count: one frame is one step of one env
(all of its robots act in it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from gpurl.errors import ConfigError


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
# Starts and goals lie in [2, 53]^2, so no start-goal distance beyond its diagonal.
MAX_START_GOAL_DIS = 51.0 * 2**0.5


def parse_curriculum(rows: Sequence[Mapping] | None) -> tuple[Stage, ...]:
    """Stages from config rows {from_step, robots, obstacles, min_start_goal_dis};
    None gives the default. Errors name the row and the fix."""
    if rows is None:
        return CURRICULUM
    names = [f.name for f in fields(Stage)]
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence) or not rows:
        raise ConfigError(f"env.curriculum must be a non-empty list of rows with keys {names}")
    stages = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or set(row) != set(names):
            got = sorted(row) if isinstance(row, Mapping) else type(row).__name__
            raise ConfigError(f"env.curriculum[{i}] needs exactly the keys {names}, got {got}")
        stage = Stage(
            int(row["from_step"]),
            int(row["robots"]),
            int(row["obstacles"]),
            float(row["min_start_goal_dis"]),
        )
        if stage.robots < 1 or stage.obstacles < 0:
            raise ConfigError(f"env.curriculum[{i}]: robots must be >= 1 and obstacles >= 0")
        if not 0 < stage.min_start_goal_dis < MAX_START_GOAL_DIS:
            raise ConfigError(
                f"env.curriculum[{i}]: min_start_goal_dis must be in (0, "
                f"{MAX_START_GOAL_DIS:.1f}) m, got {stage.min_start_goal_dis}"
            )
        stages.append(stage)
    if stages[0].from_step != 0:
        raise ConfigError("env.curriculum[0].from_step must be 0")
    steps = [s.from_step for s in stages]
    if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        raise ConfigError(f"env.curriculum from_step values must increase, got {steps}")
    return tuple(stages)


def stage_table(
    device: torch.device | str = "cpu", curriculum: Sequence[Stage] = CURRICULUM
) -> dict[str, torch.Tensor]:
    """The curriculum as device tensors, indexed by stage."""
    return {
        "from_step": torch.tensor([s.from_step for s in curriculum], device=device),
        "robots": torch.tensor([s.robots for s in curriculum], device=device),
        "obstacles": torch.tensor([s.obstacles for s in curriculum], device=device),
        "min_start_goal_dis": torch.tensor(
            [s.min_start_goal_dis for s in curriculum], dtype=torch.float32, device=device
        ),
    }


def stage_at(global_step: torch.Tensor, from_step: torch.Tensor) -> torch.Tensor:
    """Stage index for a (device) global step: a closed form, no host read."""
    return (global_step.reshape(-1, 1) >= from_step.reshape(1, -1)).sum(-1).sub(1).clamp_min(0)
