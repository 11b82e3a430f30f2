"""Rewards: the goal-template distance reward and a plain reach-the-goal reward."""

from __future__ import annotations

import torch

from gpurl.envs.pixels.atlas import TILE

MAX_SHADE = 3


def frame_distance(frames: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """mean |frames - goal| / 3 per env, float [N]; uint8 shades 0..3 of any shape [N, ...]."""
    diff = frames.view(torch.int8) - goal.view(torch.int8)  # shades 0..3: no overflow
    total = diff.abs_().flatten(1).sum(1, dtype=torch.int32)
    return total.float() / (MAX_SHADE * diff[0].numel())


def goal_template_reward(
    dist: torch.Tensor,
    prev_dist: torch.Tensor,
    counter: torch.Tensor,
    step_cost: float,
    alpha: float,
    goal_bonus: float,
    tau: float,
    k_consecutive: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reward [N], counter [N], terminated [N]).

    The counter grows while dist < tau and drops to 0 otherwise; the episode is done when
    it reaches k_consecutive. reward = step_cost + alpha (prev_dist - dist) + goal_bonus done.
    """
    counter = torch.where(dist < tau, counter + 1, 0)
    done = counter >= k_consecutive
    reward = step_cost + alpha * (prev_dist - dist) + goal_bonus * done.float()
    return reward, counter, done


def tile_distance(pos: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """Manhattan distance in tiles (float [N]) between player and goal pixels [N, 2]."""
    return (pos - goal).abs().sum(1).float() / TILE


def reach_reward(
    pos: torch.Tensor,
    goal: torch.Tensor,
    prev_tiles: torch.Tensor,
    step_cost: float,
    shaping: float,
    goal_bonus: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reward [N], tiles [N], terminated [N]): done when the player stands on the goal tile.

    reward = step_cost + shaping (prev_tiles - tiles) + goal_bonus done; shaping = 0 makes
    it sparse.
    """
    tiles = tile_distance(pos, goal)
    done = (pos == goal).all(1)
    reward = step_cost + shaping * (prev_tiles - tiles) + goal_bonus * done.float()
    return reward, tiles, done
