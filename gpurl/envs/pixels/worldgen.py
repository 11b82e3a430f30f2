"""Procedural tile worlds: each env its own map from its own seed, the goal always reachable.

Env i of an env built with seed s gets the world of seed s + i, whatever the batch size
and the device: the random numbers come from an integer hash of (world seed, stream,
cell), computed with the same int64 arithmetic on CPU and CUDA, so both devices build
bit-identical worlds.

A world is a map of H x W tiles: a wall border, random walls inside (each interior cell
with probability `wall_prob`), floor variants elsewhere, a start cell and a goal cell.
Reachability is by construction: an L-shaped corridor from the start to the goal
(horizontal leg first or vertical leg first, at random) is cleared of walls. The map is
padded with VOID tiles so that the camera window never leaves the tensor.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpurl.envs.pixels.atlas import FLOOR, FLOWERS, GOAL, GRASS, TILE, VOID, WALL

# VOID margin around the map, in tiles: the camera shows 4 tiles above and left of the
# player and 4 below / 5 right of it, plus one partial tile when not tile-aligned.
PAD_TOP, PAD_LEFT, PAD_BOTTOM, PAD_RIGHT = 4, 4, 5, 6

_MASK32 = 0xFFFFFFFF


class Worlds(NamedTuple):
    tiles: torch.Tensor  # uint8 [N, H + 9, W + 10]: padded tile ids
    start: torch.Tensor  # int64 [N, 2]: start pixel (y, x) of the player, map coordinates
    goal: torch.Tensor  # int64 [N, 2]: goal pixel (y, x), map coordinates


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32) on int64 tensors; values stay in [0, 2**32)."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


def hash_uniform(world_seeds: torch.Tensor, stream: int, cells: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) floats for world seeds [N] and cell indices [*S]: shape [N, *S]."""
    key = mix32(mix32(world_seeds) ^ mix32(torch.full_like(world_seeds, stream)))
    key = key.reshape(-1, *([1] * cells.dim()))
    bits = mix32(mix32(key + cells) + 0x9E3779B9)
    return bits.to(torch.float64).div(2.0**32).to(torch.float32)


def generate_worlds(
    world_seeds: torch.Tensor, height: int = 16, width: int = 16, wall_prob: float = 0.25
) -> Worlds:
    """One world per seed in world_seeds (int64 [N]); map size height x width tiles."""
    device = world_seeds.device
    n = world_seeds.shape[0]
    rows = torch.arange(height, device=device).view(height, 1)
    cols = torch.arange(width, device=device).view(1, width)
    cells = rows * width + cols
    one = torch.zeros(1, dtype=torch.int64, device=device)

    def pick(stream: int, lo: int, count: int) -> torch.Tensor:
        return lo + (hash_uniform(world_seeds, stream, one).squeeze(-1) * count).long()

    interior = (rows > 0) & (rows < height - 1) & (cols > 0) & (cols < width - 1)
    walls = (hash_uniform(world_seeds, 1, cells) < wall_prob) | ~interior
    variant = hash_uniform(world_seeds, 2, cells)
    floor = torch.where(variant < 0.6, FLOOR, torch.where(variant < 0.85, GRASS, FLOWERS))

    sr, sc = pick(3, 1, height - 2), pick(4, 1, width - 2)
    gr, gc = pick(5, 1, height - 2), pick(6, 1, width - 2)
    same = (sr == gr) & (sc == gc)
    gc = torch.where(same, torch.where(sc + 1 <= width - 2, sc + 1, sc - 1), gc)
    horizontal_first = hash_uniform(world_seeds, 7, one).squeeze(-1) < 0.5

    def between(v, a, b):
        a, b = a.view(n, 1, 1), b.view(n, 1, 1)
        return (v >= torch.minimum(a, b)) & (v <= torch.maximum(a, b))

    r, c = rows.unsqueeze(0), cols.unsqueeze(0)
    at = lambda v, t: v == t.view(n, 1, 1)  # noqa: E731
    h_leg = torch.where(horizontal_first.view(n, 1, 1), at(r, sr), at(r, gr)) & between(c, sc, gc)
    v_leg = torch.where(horizontal_first.view(n, 1, 1), at(c, gc), at(c, sc)) & between(r, sr, gr)
    walls = walls & ~(h_leg | v_leg)

    tiles = torch.where(walls, WALL, floor)
    tiles = torch.where(at(r, gr) & at(c, gc), GOAL, tiles).to(torch.uint8)
    padded = torch.full(
        (n, height + PAD_TOP + PAD_BOTTOM, width + PAD_LEFT + PAD_RIGHT),
        VOID,
        dtype=torch.uint8,
        device=device,
    )
    padded[:, PAD_TOP : PAD_TOP + height, PAD_LEFT : PAD_LEFT + width] = tiles
    start = torch.stack((sr, sc), -1) * TILE
    goal = torch.stack((gr, gc), -1) * TILE
    return Worlds(padded, start, goal)
