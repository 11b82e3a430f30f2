"""Frames from tile maps: camera-following gathers from the tile atlas, 8 pixels per word.

`render_frames` is the fast renderer used in the step. It works on packed rows (one
int64 word = 8 pixels, see atlas.py), so every gather moves 8 pixels at a time:
  1. gather the 10 x 11 window of tile ids under the camera (tiny);
  2. gather those tiles' rows from the atlas, laid out as 80 rows of 11 words;
  3. take the 72 rows at the camera's vertical sub-tile offset;
  4. shift bytes across word pairs for the horizontal sub-tile offset;
  5. draw the player sprite with an and/or on one word column.
`render_reference` is the straightforward per-pixel version the tests hold it to.
"""

from __future__ import annotations

import torch

from gpurl.envs.pixels.atlas import (
    PLAYER_SCREEN_X,
    PLAYER_SCREEN_Y,
    SCREEN_H,
    SCREEN_W,
    SCREEN_WORDS,
    TILE,
    as_words,
)
from gpurl.envs.pixels.worldgen import PAD_LEFT, PAD_TOP

WINDOW_ROWS = SCREEN_H // TILE + 1
WINDOW_COLS = SCREEN_W // TILE + 1


def camera_origin(pos: torch.Tensor) -> torch.Tensor:
    """Top-left pixel (y, x) of the camera in padded-map coordinates, for player pixels [N, 2]."""
    dy, dx = PAD_TOP * TILE - PLAYER_SCREEN_Y, PAD_LEFT * TILE - PLAYER_SCREEN_X
    return torch.stack((pos[:, 0] + dy, pos[:, 1] + dx), -1)


def sprite_words(shades: torch.Tensor, opaque: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(ink, keep) int64 [8]: the sprite rows packed, and the background bytes to keep."""
    ink = as_words(torch.where(opaque, shades, 0).to(torch.uint8)).view(TILE)
    keep = as_words(torch.where(opaque, 0, 0xFF).to(torch.uint8)).view(TILE)
    return ink, keep


def tile_window(tiles: torch.Tensor, pos: torch.Tensor):
    """(window uint8 [N, 10, 11], oy [N], ox [N]): the tile ids under the camera (one more
    row and column than the screen, for sub-tile offsets) and the camera's pixel offset
    inside its top-left tile."""
    n, _, wp = tiles.shape
    cam = camera_origin(pos)
    cy, cx = cam[:, 0], cam[:, 1]
    ty, tx = cy >> 3, cx >> 3
    rows = ty.view(n, 1, 1) + torch.arange(WINDOW_ROWS, device=tiles.device).view(1, -1, 1)
    cols = tx.view(n, 1, 1) + torch.arange(WINDOW_COLS, device=tiles.device).view(1, 1, -1)
    window = tiles.view(n, -1).gather(1, (rows * wp + cols).view(n, -1))
    return window.view(n, WINDOW_ROWS, WINDOW_COLS), cy & 7, cx & 7


def render_frames(
    tiles: torch.Tensor,
    pos: torch.Tensor,
    atlas_words: torch.Tensor,
    ink: torch.Tensor,
    keep: torch.Tensor,
    out: torch.Tensor | None = None,
    aligned: bool = False,
) -> torch.Tensor:
    """Render frames as words int64 [N, 72, 10] (view as uint8 [N, 72, 80] with as_pixels).

    tiles: uint8 [N, Hp, Wp] padded tile ids; pos: int64 [N, 2] player pixels (map coords);
    atlas_words: int64 [T, 8]; ink, keep: int64 [8] from sprite_words; out: where to write.
    aligned: the caller knows every position is a multiple of 8 (a static property of the
    movement settings, so no device read decides it): skip the sub-tile shifts.
    """
    n = tiles.shape[0]
    dev = tiles.device
    window, oy, ox = tile_window(tiles, pos)
    if out is None:
        out = torch.empty((n, SCREEN_H, SCREEN_WORDS), dtype=torch.int64, device=dev)
    if aligned:
        # Whole tiles only: gather each visible tile's 8 row-words, then one transposing
        # copy into the output layout [N, tile row, pixel row, tile col].
        ids = window[:, :-1, :-1].reshape(-1).long()
        rows = atlas_words.index_select(0, ids).view(n, WINDOW_ROWS - 1, SCREEN_WORDS, TILE)
        out.view(n, WINDOW_ROWS - 1, TILE, SCREEN_WORDS).copy_(rows.transpose(2, 3))
        return _draw_player(out, ink, keep)
    rows = atlas_words.index_select(0, window.view(-1).long())
    rows = rows.view(n, WINDOW_ROWS, WINDOW_COLS, TILE).transpose(2, 3)
    rows = rows.reshape(n, WINDOW_ROWS * TILE, WINDOW_COLS)
    pick = oy.view(n, 1, 1) + torch.arange(SCREEN_H, device=dev).view(1, -1, 1)
    rows = rows.gather(1, pick.expand(n, SCREEN_H, WINDOW_COLS))
    lo, hi = rows[..., :SCREEN_WORDS], rows[..., 1:]
    # Little-endian words: pixel k is byte k, so moving the view right by s pixels shifts
    # each word right by 8s bits (logically) and pulls the low bytes of the next word in.
    whole = (ox == 0).view(n, 1, 1)
    bits = torch.where(whole, 8, 8 * ox.view(n, 1, 1))
    low_mask = (torch.ones_like(bits) << (64 - bits)) - 1
    shifted = ((lo >> bits) & low_mask) | (hi << (64 - bits))
    torch.where(whole, lo, shifted, out=out)
    return _draw_player(out, ink, keep)


def _draw_player(out: torch.Tensor, ink: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    body = out[:, PLAYER_SCREEN_Y : PLAYER_SCREEN_Y + TILE, PLAYER_SCREEN_X // TILE]
    body.bitwise_and_(keep).bitwise_or_(ink)
    return out


def world_image(tiles: torch.Tensor, atlas: torch.Tensor) -> torch.Tensor:
    """uint8 [N, Hp * 8, Wp * 8]: the whole padded map in pixels (for tests and tools)."""
    n, hp, wp = tiles.shape
    return atlas[tiles.long()].permute(0, 1, 3, 2, 4).reshape(n, hp * TILE, wp * TILE)


def render_reference(
    tiles: torch.Tensor,
    pos: torch.Tensor,
    atlas: torch.Tensor,
    shades: torch.Tensor,
    opaque: torch.Tensor,
    world: torch.Tensor | None = None,
) -> torch.Tensor:
    """uint8 [N, 72, 80], pixel by pixel from the whole padded map (slow; for tests).

    world: world_image(tiles, atlas), when the caller has it already.
    """
    world = world_image(tiles, atlas) if world is None else world
    cam = camera_origin(pos)
    frames = []
    for i in range(tiles.shape[0]):
        y, x = (int(v) for v in cam[i])
        frame = world[i, y : y + SCREEN_H, x : x + SCREEN_W].clone()
        py, px = PLAYER_SCREEN_Y, PLAYER_SCREEN_X
        region = frame[py : py + TILE, px : px + TILE]
        frame[py : py + TILE, px : px + TILE] = torch.where(opaque, shades, region)
        frames.append(frame)
    return torch.stack(frames)
