"""The renderer: a golden frame of a hand-made map, and the fast path against the reference."""

import pytest
import torch

from gpurl.envs.pixels.atlas import (
    FLOOR,
    FLOWERS,
    GOAL,
    GRASS,
    WALL,
    as_pixels,
    as_words,
    player_sprite,
    tile_atlas,
)
from gpurl.envs.pixels.render import render_frames, render_reference, sprite_words
from gpurl.envs.pixels.reward import frame_distance
from gpurl.envs.pixels.worldgen import generate_worlds
from tests.conftest import devices

from .pixels_helpers import padded_map

F, G, W, O, L = FLOOR, GRASS, WALL, GOAL, FLOWERS
TINY = [
    [W, W, W, W, W],
    [W, F, O, G, W],
    [W, L, F, F, W],
    [W, W, W, W, W],
]


def _render(tiles, pos, aligned=False):
    dev = tiles.device
    ink, keep = sprite_words(*player_sprite(dev))
    atlas_words = as_words(tile_atlas(dev)).view(-1, 8)
    return as_pixels(render_frames(tiles, pos, atlas_words, ink, keep, aligned=aligned))


@pytest.mark.parametrize("aligned", [False, True])
def test_golden_frame_of_a_tiny_map(aligned):
    tiles = padded_map(TINY)
    frame = _render(tiles, torch.tensor([[8, 8]]), aligned)[0]  # player on map tile (1, 1)
    assert frame.shape == (72, 80) and frame.dtype == torch.uint8
    # The camera puts the player's tile at screen tile (4, 4): map tile (r, c) is at
    # screen tile (r + 3, c + 3), everything off the map is VOID (all shade 3).
    assert (frame[:24] == 3).all() and (frame[:, :24] == 3).all() and (frame[56:] == 3).all()
    assert (frame[:, 64:] == 3).all()
    wall = [3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 3, 1, 1, 1, 2, 1, 1, 1]
    assert frame[24:27, 24:32].flatten().tolist() == wall
    # Row 32 is the top row of the player's tile: wall | sprite "..3333.." over floor | goal.
    assert frame[32, 24:48].tolist() == [3] * 8 + [0, 0, 3, 3, 3, 3, 0, 0] + [3] * 8
    # Sprite rows 2 and 5 (".321123.", "3.3223.3"): transparent pixels show the floor (0).
    assert frame[34, 32:40].tolist() == [0, 3, 2, 1, 1, 2, 3, 0]
    assert frame[37, 32:40].tolist() == [3, 0, 3, 2, 2, 3, 0, 3]
    # Goal tile at screen tile (4, 5), grass at (4, 6), flowers at (5, 4).
    assert frame[32:40, 40:48].tolist() == tile_atlas()[GOAL].tolist()
    assert frame[32:40, 48:56].tolist() == tile_atlas()[GRASS].tolist()
    assert frame[40:48, 32:40].tolist() == tile_atlas()[FLOWERS].tolist()


def test_golden_frame_off_the_tile_grid():
    tiles = padded_map(TINY)
    on_grid = _render(tiles, torch.tensor([[8, 8]]))[0]
    frame = _render(tiles, torch.tensor([[11, 13]]))[0]
    # The background moves with the camera (3 px down, 5 px right); the player stays put.
    sprite_rows = slice(32, 40)
    background = torch.ones(72, 80, dtype=torch.bool)
    background[sprite_rows, 32:40] = False
    shifted = torch.full((72, 80), 3, dtype=torch.uint8)
    shifted[:69, :75] = on_grid[3:, 5:]
    # leave out where either frame has the sprite, and the strip the shift brought in
    old_sprite = torch.zeros(72, 80, dtype=torch.bool)
    old_sprite[29:37, 27:35] = True
    keep = background & ~old_sprite
    keep[69:, :] = False
    keep[:, 75:] = False
    assert torch.equal(frame[keep], shifted[keep])
    assert frame[5, 1].item() == 3  # VOID above the map
    # map tile (0, 0), a wall, now starts at screen pixel (21, 19)
    assert frame[22, 19:27].tolist() == [3, 1, 1, 1, 2, 1, 1, 1]


@pytest.mark.parametrize("device", devices())
def test_fast_renderer_matches_reference(device):
    worlds = generate_worlds(torch.arange(24, device=device), 9, 11, 0.3)
    gen = torch.Generator(device="cpu").manual_seed(0)
    jitter = torch.randint(0, 8, (24, 2), generator=gen).to(device)
    pos = worlds.start + jitter * (torch.arange(24, device=device) % 2).view(-1, 1)
    shades, opaque = player_sprite(device)
    ref = render_reference(worlds.tiles, pos, tile_atlas(device), shades, opaque)
    assert torch.equal(_render(worlds.tiles, pos), ref)
    aligned_ref = render_reference(worlds.tiles, worlds.start, tile_atlas(device), shades, opaque)
    assert torch.equal(_render(worlds.tiles, worlds.start, aligned=True), aligned_ref)


def test_frame_distance_is_mean_abs_difference_over_three():
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(0, 4, (5, 3, 72, 80), generator=gen, dtype=torch.uint8)
    b = torch.randint(0, 4, (5, 3, 72, 80), generator=gen, dtype=torch.uint8)
    expected = (a.float() - b.float()).abs().mean((1, 2, 3)) / 3
    assert torch.allclose(frame_distance(a, b), expected)
    assert torch.allclose(
        frame_distance(a[:, 0], b[:, 0]), (a[:, 0].float() - b[:, 0]).abs().mean((1, 2)) / 3
    )
    assert (frame_distance(a, a) == 0).all()


def test_window_distance_equals_frame_distance_on_the_tile_grid():
    from gpurl.envs.pixels import PixelsEnv

    env = PixelsEnv(num_envs=32, seed=5, info_mode="full")
    assert env._aligned
    env.lean_reset()
    gen = torch.Generator().manual_seed(0)
    for _ in range(6):
        nxt, _ = env.lean_step(torch.randint(0, 8, (32,), generator=gen))
        by_pixels = frame_distance(nxt["pixels"][:, -1], env.goal_frame)
        assert torch.allclose(nxt["info", "dist"].squeeze(-1), by_pixels, atol=1e-7)
    assert (by_pixels > 0).any()
