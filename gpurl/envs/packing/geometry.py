"""The box, the stride grid and the episode's item pool: what env and policies share."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpurl.envs.packing.heightmaps import ItemMaps
from gpurl.envs.packing.placement import corner_count, placement_maps


@dataclass
class PackingGeometry:
    box_size: tuple[float, float, float]  # L, W, H metres
    resolution: int  # R cells per side
    grid_step: int
    pool: ItemMaps  # heightmaps of every item an episode can draw, on the device
    compiled: bool = False  # fused z-map kernel under torch.compile

    @property
    def sep(self) -> float:
        return self.box_size[0] / self.resolution

    @property
    def height(self) -> float:
        return self.box_size[2]

    @property
    def corners(self) -> int:
        return corner_count(self.resolution, self.grid_step)

    def placement(self, hm: torch.Tensor, pool_ids: torch.Tensor):
        """z [B, 24, G, G] and legal [B, 24, G, G] for items `pool_ids` [B] on hm [B, R, R]."""
        p = self.pool
        return placement_maps(
            hm,
            p.hb[pool_ids],
            p.ht_max[pool_ids],
            p.footprint[pool_ids],
            self.grid_step,
            self.height,
            compiled=self.compiled,
        )
