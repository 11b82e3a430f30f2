"""Item heightmaps for the 24 orientations, padded to one footprint with validity masks.

For an orientation the item's points are rotated, each falls in cell
floor((p - min) / sep) clipped to the footprint w = max(1, ceil(span / sep)), and per cell
`ht` = zmax - zmin_global (0 where empty) and `hb` = zmin - zmin_global (+inf where
empty). All items and orientations are one scatter-amax / scatter-amin on the device.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from gpurl.envs.packing.orientations import NUM_ORIENTATIONS, rotation_matrices


class ItemMaps(NamedTuple):
    """Heightmaps of a set of items, every tensor with the item index first."""

    ht: torch.Tensor  # [P, 24, F, F] float32, 0 outside the footprint
    hb: torch.Tensor  # [P, 24, F, F] float32, +inf where no point falls
    footprint: torch.Tensor  # [P, 24, 2] int64, (w, h) in cells
    ht_max: torch.Tensor  # [P, 24] float32, the item's height in that orientation
    extents: torch.Tensor  # [P, 3] float32, bounding box at identity, metres
    volume: torch.Tensor  # [P] float32, m^3

    @property
    def size(self) -> int:
        return self.ht.shape[-1]

    def to(self, device) -> ItemMaps:
        return ItemMaps(*(t.to(device) for t in self))

    def take(self, idx: torch.Tensor) -> ItemMaps:
        """The maps of items `idx` (any shape), gathered on the device."""
        return ItemMaps(*(t[idx] for t in self))


def footprints(spans: torch.Tensor, sep: float) -> torch.Tensor:
    """w = max(1, ceil(span / sep)) per axis."""
    return torch.ceil(spans / sep).to(torch.int64).clamp_min(1)


def item_heightmaps(
    points: torch.Tensor,
    counts: torch.Tensor,
    volume: torch.Tensor,
    sep: float,
    size: int | None = None,
) -> ItemMaps:
    """Heightmaps of P items given as padded points [P, N, 3] with `counts` [P] valid rows.

    `size` pads every map to F x F (default: the largest footprint among the items).
    """
    p, n, _ = points.shape
    dev = points.device
    rot = rotation_matrices(points.dtype, dev)
    valid = torch.arange(n, device=dev)[None] < counts[:, None]  # [P, N]
    q = torch.einsum("oij,pnj->poni", rot, points)  # [P, 24, N, 3]; entries 0/+-1: exact
    inf = torch.tensor(float("inf"), device=dev)
    vmask = valid[:, None, :, None]
    lo = torch.where(vmask, q, inf).amin(2)  # [P, 24, 3]
    hi = torch.where(vmask, q, -inf).amax(2)
    fp = footprints(hi[..., :2] - lo[..., :2], sep)  # [P, 24, 2]
    f = int(fp.max()) if size is None else int(size)
    if int(fp.max()) > f:
        raise ValueError(f"an item footprint of {int(fp.max())} cells exceeds the padding {f}")
    rel = q - lo[:, :, None]
    cell = torch.floor(rel[..., :2] / sep).to(torch.int64)
    cell = torch.minimum(cell.clamp_min(0), fp[:, :, None] - 1)
    flat = (
        torch.arange(p * NUM_ORIENTATIONS, device=dev).view(p, NUM_ORIENTATIONS, 1) * f * f
        + cell[..., 0] * f
        + cell[..., 1]
    )
    dump = p * NUM_ORIENTATIONS * f * f  # padded points go to one extra cell, dropped below
    flat = torch.where(valid[:, None], flat, dump).reshape(-1)
    zrel = rel[..., 2].reshape(-1)
    top = torch.full((dump + 1,), -float("inf"), device=dev)
    top.scatter_reduce_(0, flat, zrel, reduce="amax")
    bot = torch.full((dump + 1,), float("inf"), device=dev)
    bot.scatter_reduce_(0, flat, zrel, reduce="amin")
    shape = (p, NUM_ORIENTATIONS, f, f)
    top, bot = top[:-1].view(shape), bot[:-1].view(shape)
    ht = torch.where(torch.isfinite(top), top, 0.0)
    return ItemMaps(
        ht=ht,
        hb=bot,
        footprint=fp,
        ht_max=ht.flatten(2).amax(-1),
        extents=(hi[:, 0] - lo[:, 0]),
        volume=volume.to(dev, torch.float32),
    )


def build_item_maps(items, sep: float, size: int, device="cpu", chunk: int = 8) -> ItemMaps:
    """Heightmaps of catalog items, computed `chunk` items at a time to bound memory."""
    parts = []
    for start in range(0, len(items), chunk):
        group = items[start : start + chunk]
        pts, counts = pad_points(group)
        vol = torch.tensor([it.volume for it in group])
        parts.append(item_heightmaps(pts.to(device), counts.to(device), vol, sep, size))
    return ItemMaps(*(torch.cat(field) for field in zip(*parts, strict=True)))


def pad_points(items) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack the items' point sets into [P, N, 3] with counts [P]."""
    counts = torch.tensor([len(it.points) for it in items])
    out = torch.zeros(len(items), int(counts.max()), 3)
    for i, it in enumerate(items):
        out[i, : len(it.points)] = it.points
    return out, counts


def max_footprint(extents: torch.Tensor, sep: float) -> int:
    """The padding F that holds every orientation of items with these extents."""
    return int(math.ceil(float(extents.max()) / sep))
