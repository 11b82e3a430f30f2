"""Baseline policies: random legal placement and the heightmap-minimisation heuristic.

Both are callables over the env's observation TensorDict that write "action", so they
run wherever a policy does (TorchRL rollouts, gpurl's evaluator). They see the env only
through its PackingGeometry, as a learned policy would.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from gpurl.envs.packing.geometry import PackingGeometry
from gpurl.envs.packing.orientations import NUM_ORIENTATIONS


def _chosen_pool_ids(td: TensorDictBase, slot: torch.Tensor) -> torch.Tensor:
    item = td["candidates"].gather(1, slot[:, None])
    return td["items"].gather(1, item).squeeze(1)


def _decode(flat: torch.Tensor, corners: int) -> tuple[torch.Tensor, ...]:
    """Flat index over (ix, iy, orientation) -> (orientation, ix, iy)."""
    ori = flat % NUM_ORIENTATIONS
    cell = flat // NUM_ORIENTATIONS
    return ori, cell // corners, cell % corners


def uniform_choice(mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Index of a uniformly drawn True entry per row of mask [B, n] (0 if none): no host
    read, no data-dependent shape."""
    u = torch.rand(mask.shape, generator=generator, device=mask.device)
    return torch.where(mask, u, -1.0).argmax(1)


class HeuristicPolicy:
    """Largest bounding-box volume first; the placement with the lowest resting height,
    ties toward the smallest resulting maximum height, then lowest x, then y (then the
    lowest orientation index)."""

    def __init__(self, geometry: PackingGeometry):
        self.geometry = geometry

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        hm = td["heightmap"]
        return self.place(td, torch.zeros(hm.shape[0], dtype=torch.int64, device=hm.device))

    def place(self, td: TensorDictBase, slot: torch.Tensor) -> TensorDictBase:
        """The heuristic's placement of the item in candidate slot [B] (slot 0: the
        largest), whoever chose it: tools/eval_packing.py pairs it with a learned manager."""
        geom = self.geometry
        hm = td["heightmap"]
        pid = _chosen_pool_ids(td, slot)
        z, legal = geom.placement(hm, pid)
        inf = float("inf")
        low = torch.where(legal, z, inf)
        tied = legal & (low == low.amin((1, 2, 3), keepdim=True))
        top = torch.maximum(
            hm.amax((1, 2))[:, None, None, None],
            z + geom.pool.ht_max[pid][:, :, None, None],
        )
        top = torch.where(tied, top, inf)
        tied = tied & (top == top.amin((1, 2, 3), keepdim=True))
        flat = tied.permute(0, 2, 3, 1).flatten(1).to(torch.uint8).argmax(1)
        ori, ix, iy = _decode(flat, geom.corners)
        td.set("action", torch.stack((slot, ori, ix, iy), -1))
        return td


class RandomPolicy:
    """A uniformly random valid candidate, then a uniformly random legal placement of it."""

    def __init__(self, geometry: PackingGeometry, seed: int = 0):
        self.geometry = geometry
        self.rng = torch.Generator(device=geometry.pool.ht.device).manual_seed(seed)

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        geom = self.geometry
        slot = uniform_choice(td["candidate_mask"], self.rng)
        _, legal = geom.placement(td["heightmap"], _chosen_pool_ids(td, slot))
        flat = uniform_choice(legal.permute(0, 2, 3, 1).flatten(1), self.rng)
        ori, ix, iy = _decode(flat, geom.corners)
        td.set("action", torch.stack((slot, ori, ix, iy), -1))
        return td
