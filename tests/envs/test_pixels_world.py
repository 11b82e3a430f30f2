"""World generation: per-env seeds, bounds, reachability, device independence."""

from collections import deque

import pytest
import torch

from gpurl.envs.pixels.atlas import BLOCKING, GOAL, TILE, VOID
from gpurl.envs.pixels.worldgen import PAD_LEFT, PAD_TOP, generate_worlds
from tests.conftest import requires_cuda


def _reachable(tiles: torch.Tensor, start, goal) -> bool:
    grid = tiles.tolist()
    seen, todo = {start}, deque([start])
    while todo:
        r, c = todo.popleft()
        if (r, c) == goal:
            return True
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if (nr, nc) not in seen and grid[nr][nc] not in BLOCKING:
                seen.add((nr, nc))
                todo.append((nr, nc))
    return False


@pytest.mark.parametrize("wall_prob", [0.25, 0.6])
def test_goal_always_reachable_and_inside(wall_prob):
    n = 48
    w = generate_worlds(torch.arange(n) * 7 + 3, 12, 14, wall_prob)
    assert w.tiles.shape == (n, 12 + 9, 14 + 10) and w.tiles.dtype == torch.uint8
    for i in range(n):
        start = tuple((w.start[i] // TILE + torch.tensor([PAD_TOP, PAD_LEFT])).tolist())
        goal = tuple((w.goal[i] // TILE + torch.tensor([PAD_TOP, PAD_LEFT])).tolist())
        assert start != goal
        assert w.tiles[i][goal].item() == GOAL
        assert w.tiles[i][start].item() not in BLOCKING
        assert _reachable(w.tiles[i], start, goal)
    assert (w.start % TILE == 0).all() and (w.goal % TILE == 0).all()
    inner = w.tiles[:, PAD_TOP + 1 : PAD_TOP + 11, PAD_LEFT + 1 : PAD_LEFT + 13]
    assert not (inner == VOID).any()
    assert (w.tiles[:, :PAD_TOP] == VOID).all()
    walls = (inner == BLOCKING[0]).float().mean().item()
    assert 0.5 * wall_prob < walls < wall_prob  # the corridor clears some of them


def test_each_env_has_its_own_world_from_its_seed():
    a = generate_worlds(torch.arange(10, 18), 16, 16)
    b = generate_worlds(torch.arange(13, 15), 16, 16)
    assert torch.equal(a.tiles[3:5], b.tiles) and torch.equal(a.start[3:5], b.start)
    assert torch.equal(a.goal[3:5], b.goal)
    assert len({tuple(t.flatten().tolist()) for t in a.tiles}) == 8


@requires_cuda
def test_cpu_and_cuda_build_the_same_worlds():
    seeds = torch.arange(64)
    cpu = generate_worlds(seeds, 16, 16)
    gpu = generate_worlds(seeds.cuda(), 16, 16)
    for x, y in zip(cpu, gpu, strict=True):
        assert torch.equal(x, y.cpu())
