"""Movement: one pixel per held frame, walls block, the closed form equals frame stepping."""

import pytest
import torch

from gpurl.envs.pixels.atlas import FLOOR, WALL
from gpurl.envs.pixels.movement import (
    DOWN,
    LEFT,
    RIGHT,
    UP,
    blocking_map,
    move_player,
    move_player_by_frames,
)
from gpurl.envs.pixels.worldgen import generate_worlds

from .pixels_helpers import padded_map

F, W = FLOOR, WALL
ROOM = [
    [W, W, W, W, W, W],
    [W, F, F, F, F, W],
    [W, F, W, F, F, W],
    [W, F, F, F, F, W],
    [W, W, W, W, W, W],
]


def _move(pos, action, fps=24, release=8):
    blocked = blocking_map(padded_map(ROOM))
    return move_player(torch.tensor([pos]), torch.tensor([action]), blocked, min(fps, release))[
        0
    ].tolist()


def test_defaults_move_one_tile_and_walls_block():
    assert _move([8, 8], RIGHT) == [8, 16]
    assert _move([8, 8], DOWN) == [16, 8]
    assert _move([8, 8], UP) == [8, 8]  # wall above
    assert _move([8, 8], LEFT) == [8, 8]  # wall left
    assert _move([8, 16], DOWN) == [8, 16]  # the inner wall at (2, 2)
    for action in range(4):  # NOOP, A, B, START
        assert _move([8, 16], action) == [8, 16]


def test_frames_per_step_and_release_after_frames():
    assert _move([8, 8], RIGHT, fps=24, release=3) == [8, 11]  # held 3 of 24 frames
    assert _move([8, 8], RIGHT, fps=5, release=8) == [8, 13]  # step ends while held
    assert _move([8, 8], RIGHT, fps=24, release=0) == [8, 8]
    assert _move([8, 8], RIGHT, fps=24, release=20) == [8, 28]  # 2.5 tiles, no wall
    assert _move([8, 8], RIGHT, fps=40, release=40) == [8, 32]  # stopped by the east wall
    # Off the grid the 8 x 8 box spans two tile rows (or columns): a wall in either blocks.
    assert _move([11, 8], RIGHT, fps=24, release=24) == [11, 8]  # rows 1-2: wall at (2, 2)
    assert _move([24, 8], RIGHT, fps=24, release=24) == [24, 32]  # row 3 only: free
    assert _move([8, 12], DOWN, fps=24, release=24) == [8, 12]  # columns 1-2: wall at (2, 2)
    assert _move([8, 8], DOWN, fps=24, release=24) == [24, 8]  # column 1: free to row 3


@pytest.mark.parametrize("fps,release", [(24, 8), (24, 3), (5, 8), (24, 13), (2, 2)])
def test_closed_form_equals_frame_by_frame(fps, release):
    n = 256
    worlds = generate_worlds(torch.arange(n), 9, 10, 0.35)
    blocked = blocking_map(worlds.tiles)
    gen = torch.Generator().manual_seed(fps * 100 + release)
    pos = worlds.start
    for _ in range(12):
        action = torch.randint(0, 8, (n,), generator=gen)
        fast = move_player(pos, action, blocked, min(fps, release))
        slow = move_player_by_frames(pos, action, blocked, fps, release)
        assert torch.equal(fast, slow)
        pos = fast
    assert (pos != worlds.start).any()
