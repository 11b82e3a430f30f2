"""Small builders shared by the pixels tests."""

from __future__ import annotations

import torch

from gpurl.envs.pixels.atlas import VOID
from gpurl.envs.pixels.worldgen import PAD_BOTTOM, PAD_LEFT, PAD_RIGHT, PAD_TOP


def padded_map(rows: list[list[int]], device="cpu") -> torch.Tensor:
    """uint8 [1, Hp, Wp]: a hand-made map of tile ids, padded with VOID like worldgen's."""
    h, w = len(rows), len(rows[0])
    out = torch.full(
        (1, h + PAD_TOP + PAD_BOTTOM, w + PAD_LEFT + PAD_RIGHT), VOID, dtype=torch.uint8
    )
    out[0, PAD_TOP : PAD_TOP + h, PAD_LEFT : PAD_LEFT + w] = torch.tensor(rows)
    return out.to(device)
