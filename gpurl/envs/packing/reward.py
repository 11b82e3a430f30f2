"""Episode quality terms on heightmaps and the shaped reward (spec: the old defaults).

V_occ = sum(hm) sep^2, V_p = placed item volume, C = V_p / (bbox area of occupied cells *
max height), P = V_p / V_occ, J = 0.5 C + 0.3 P,
r = 1 [placed] + 0.4 max(0, dC) + 0.4 max(0, dP) + 0.2 J(s') - 0.1 max(0, dh_max / H),
plus, off by default (not the spec's), `utilisation_gain` x the placed item's share of the
box's volume: an episode's sum of it is its final utilisation, so it rewards packed
volume where the count term rewards packed items (small ones as much as large ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpurl.core.config import Schema, key


@dataclass(frozen=True)
class RewardWeights(Schema):
    """Packing's shaped reward (gpurl/envs/packing/reward.py)."""

    placed: float = key(1.0, "x 1 per item placed")
    compactness_gain: float = key(0.4, "x the rise of compactness C")
    pyramidality_gain: float = key(0.4, "x the rise of pyramidality P")
    quality: float = key(0.2, "x the placement quality J")
    height_gain: float = key(0.1, "x the rise of the pile's top / H (a cost)")
    quality_compactness: float = key(0.5, "J = quality_compactness C + quality_pyramidality P")
    quality_pyramidality: float = key(0.3, "J's weight of P")
    utilisation_gain: float = key(0.0, "x placed volume / box volume (not in the spec; off)")


def occupied_volume(hm: torch.Tensor, sep: float) -> torch.Tensor:
    return hm.sum(dim=(-2, -1)) * (sep * sep)


def max_height(hm: torch.Tensor) -> torch.Tensor:
    return hm.amax(dim=(-2, -1))


def _extent(any_row: torch.Tensor) -> torch.Tensor:
    """Cells from the first to the last True of [B, R] (0 if none)."""
    n = any_row.shape[-1]
    as_int = any_row.to(torch.uint8)
    first = as_int.argmax(-1)
    last = n - 1 - as_int.flip(-1).argmax(-1)
    return torch.where(any_row.any(-1), last - first + 1, 0)


def compactness(hm: torch.Tensor, packed_volume: torch.Tensor, sep: float) -> torch.Tensor:
    occupied = hm > 0
    area = _extent(occupied.any(-1)) * _extent(occupied.any(-2)) * (sep * sep)
    denom = area * max_height(hm)
    c = torch.where(denom > 0, packed_volume / denom.clamp_min(1e-30), 0.0)
    return c.clamp(0.0, 1.0)


def pyramidality(hm: torch.Tensor, packed_volume: torch.Tensor, sep: float) -> torch.Tensor:
    occ = occupied_volume(hm, sep)
    return torch.where(occ > 0, packed_volume / occ.clamp_min(1e-30), 0.0).clamp(0.0, 1.0)


def quality(c: torch.Tensor, p: torch.Tensor, w: RewardWeights) -> torch.Tensor:
    return w.quality_compactness * c + w.quality_pyramidality * p


def shaped_reward(
    placed: torch.Tensor,
    c_before: torch.Tensor,
    c_after: torch.Tensor,
    p_before: torch.Tensor,
    p_after: torch.Tensor,
    h_before: torch.Tensor,
    h_after: torch.Tensor,
    box_height: float,
    w: RewardWeights,
    volume_share: torch.Tensor | float = 0.0,  # placed item volume / box volume
) -> torch.Tensor:
    return (
        w.placed * placed.to(c_after.dtype)
        + w.utilisation_gain * volume_share
        + w.compactness_gain * (c_after - c_before).clamp_min(0.0)
        + w.pyramidality_gain * (p_after - p_before).clamp_min(0.0)
        + w.quality * quality(c_after, p_after, w)
        - w.height_gain * ((h_after - h_before) / box_height).clamp_min(0.0)
    )
