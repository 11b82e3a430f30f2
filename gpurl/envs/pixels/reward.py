"""Rewards: the goal-template distance reward and a plain reach-the-goal reward."""

from __future__ import annotations

import torch

from gpurl.envs.pixels.atlas import TILE

MAX_SHADE = 3


_BYTES = 0x00FF00FF00FF00FF
_SHORTS = 0x0001000100010001
_WORDS_PER_GROUP = 80  # 80 words of bytes <= 3 sum to lanes <= 240: no carry between bytes


def _byte_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum of small bytes (each <= 3) per env, uint8/int8 [N, L], L a multiple of 640.

    Summing the bytes as int64 words avoids widening every byte to int32 (a full-size
    temporary): sum words in groups, then add up each word's 8 byte lanes.
    """
    words = values.reshape(values.shape[0], -1, _WORDS_PER_GROUP, 8).view(torch.int64)
    lanes = words.sum((-2, -1))  # [N, groups], each of the 8 byte lanes <= 240
    pairs = (lanes & _BYTES) + ((lanes >> 8) & _BYTES)  # 4 lanes of 16 bits, <= 480
    return (((pairs * _SHORTS) >> 48) & 0xFFFF).sum(-1)


def frame_distance(frames: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """mean |frames - goal| / 3 per env, float [N]; uint8 shades 0..3 of any shape [N, ...]."""
    diff = frames.view(torch.int8) - goal.view(torch.int8)  # shades 0..3: no overflow
    count = diff[0].numel()
    return _byte_sum(diff.abs_().reshape(diff.shape[0], -1)).float() / (MAX_SHADE * count)


def tile_pair_tables(
    atlas: torch.Tensor, shades: torch.Tensor, opaque: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(plain, player) int64 [T, T]: sum |tile_a - tile_b| over a tile's 64 pixels, without
    and with the player sprite drawn over both."""
    a = atlas.long()
    with_player = torch.where(opaque, shades, atlas).long()
    plain = (a.unsqueeze(1) - a.unsqueeze(0)).abs().sum((-2, -1))
    player = (with_player.unsqueeze(1) - with_player.unsqueeze(0)).abs().sum((-2, -1))
    return plain, player


def window_distance(
    window: torch.Tensor,
    goal_window: torch.Tensor,
    plain: torch.Tensor,
    player: torch.Tensor,
    player_tile: tuple[int, int],
) -> torch.Tensor:
    """frame_distance for whole-tile frames, from their tile ids (int64 [N, 9, 10]) alone.

    When the camera is on the tile grid a frame is its 9 x 10 tiles (the player's tile
    with the sprite over it), so the pixel sum is a sum of table lookups: 90 per env
    instead of 5,760 pixel differences. Exactly equal to frame_distance on such frames.
    """
    n_tiles = plain.shape[0]
    pair = window * n_tiles + goal_window
    total = plain.view(-1)[pair].sum((1, 2))
    r, c = player_tile
    centre = pair[:, r, c]
    total = total - plain.view(-1)[centre] + player.view(-1)[centre]
    return total.float() / (MAX_SHADE * window[0].numel() * 64)


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
