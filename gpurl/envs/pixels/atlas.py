"""The tile atlas: 8 x 8 tiles in 4 shades (0 lightest .. 3 darkest, as on a Game Boy).

Tiles are uint8 [T, 8, 8]. The renderer also uses them as packed rows: on a
little-endian device one row of 8 pixels is one int64 word whose byte k is pixel k, so
`atlas.view(torch.int64)` gives [T, 8] words and a frame row of 80 pixels is 10 words.
"""

from __future__ import annotations

import sys

import torch

if sys.byteorder != "little":  # packed rows put pixel k in byte k of a word
    raise ImportError(
        "env=pixels packs pixels into little-endian words: big-endian hosts unsupported"
    )

TILE = 8
SCREEN_H = 72
SCREEN_W = 80
SCREEN_WORDS = SCREEN_W // TILE
# The player is drawn at this tile of the screen (as on the Game Boy overworld: row 4,
# column 4 of the 9 x 10 tile screen); the camera follows it.
PLAYER_SCREEN_Y = 4 * TILE
PLAYER_SCREEN_X = 4 * TILE

FLOOR, GRASS, FLOWERS, WALL, GOAL, VOID = range(6)
BLOCKING = (WALL, VOID)

_ROWS = {
    FLOOR: [
        "00000000",
        "00000000",
        "00010000",
        "00000000",
        "00000000",
        "00000100",
        "00000000",
        "00000000",
    ],
    GRASS: [
        "00000000",
        "01000100",
        "01101100",
        "00000000",
        "00000000",
        "00100010",
        "00110110",
        "00000000",
    ],
    FLOWERS: [
        "00000000",
        "00100000",
        "01210000",
        "00100100",
        "00001210",
        "00000100",
        "00000000",
        "00000000",
    ],
    WALL: [
        "33333333",
        "31112111",
        "31112111",
        "22222222",
        "11131112",
        "11131112",
        "11131112",
        "22222222",
    ],
    GOAL: [
        "33333333",
        "32222223",
        "32111123",
        "32133123",
        "32133123",
        "32111123",
        "32222223",
        "33333333",
    ],
    VOID: [
        "33333333",
        "33333333",
        "33333333",
        "33333333",
        "33333333",
        "33333333",
        "33333333",
        "33333333",
    ],
}

# The player sprite; '.' is transparent (the background shows through).
_SPRITE = [
    "..3333..",
    ".322223.",
    ".321123.",
    "..3333..",
    ".322223.",
    "3.3223.3",
    "..3..3..",
    ".33..33.",
]


def _grid(rows: list[str]) -> list[list[int]]:
    return [[0 if ch == "." else int(ch) for ch in row] for row in rows]


def tile_atlas(device: torch.device | str = "cpu") -> torch.Tensor:
    """uint8 [T, 8, 8] with T = 6 tiles indexed by FLOOR, GRASS, FLOWERS, WALL, GOAL, VOID."""
    tiles = [_grid(_ROWS[t]) for t in range(len(_ROWS))]
    return torch.tensor(tiles, dtype=torch.uint8, device=device)


def player_sprite(device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(shades, opaque): uint8 [8, 8] and bool [8, 8]."""
    shades = torch.tensor(_grid(_SPRITE), dtype=torch.uint8, device=device)
    opaque = torch.tensor([[ch != "." for ch in row] for row in _SPRITE], device=device)
    return shades, opaque


def as_words(pixels: torch.Tensor) -> torch.Tensor:
    """View uint8 [..., 8 * n] pixel rows as int64 [..., n] words (no copy)."""
    return pixels.contiguous().view(torch.int64)


def as_pixels(words: torch.Tensor) -> torch.Tensor:
    """View int64 [..., n] words as uint8 [..., 8 * n] pixel rows (no copy)."""
    return words.view(torch.uint8)
