"""Manager candidate features and worker orientation maps, batched on the device.

The env's observation carries only the compact part (candidate ids, mask and the 8
scalars); the R x R map stacks are built on demand by these functions, from the
heightmap and the item ids, so neither env nor replay copies hundreds of MB per step.
"""

from __future__ import annotations

import torch

from gpurl.envs.packing.geometry import PackingGeometry
from gpurl.envs.packing.orientations import FRONT, IDENTITY, LEFT, NUM_ORIENTATIONS, REAR, RIGHT

MANAGER_SCALARS = 8
MANAGER_CHANNELS = 7
WORKER_CHANNELS = 3
CANDIDATE_COUNT_SCALE = 64.0
SIDE_VIEWS = (FRONT, REAR, LEFT, RIGHT)


def candidate_slots(
    bbox_volume: torch.Tensor, packed: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k unpacked items with the largest bounding-box volume, largest first.

    bbox_volume, packed [B, N]. Returns item indices [B, k] and a validity mask [B, k]
    (False past the number of unpacked items). Ties keep the lower item index first.
    """
    key = torch.where(packed, -1.0, bbox_volume)
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices[:, :k]
    return order, ~packed.gather(1, order)


def centre_on_canvas(maps: torch.Tensor, footprint: torch.Tensor, size: int) -> torch.Tensor:
    """Place [..., F, F] maps (footprint (w, h) in the top-left) centred on size x size."""
    f = maps.shape[-1]
    grid = torch.arange(size, device=maps.device)
    off = (size - footprint) // 2  # [..., 2]
    rows = grid - off[..., :1]  # [..., size]
    cols = grid - off[..., 1:]
    ok = (rows >= 0) & (rows < f), (cols >= 0) & (cols < f)
    rows, cols = rows.clamp(0, f - 1), cols.clamp(0, f - 1)
    picked = maps.gather(-2, rows[..., :, None].expand(*maps.shape[:-2], size, f))
    picked = picked.gather(-1, cols[..., None, :].expand(*maps.shape[:-2], size, size))
    return torch.where(ok[0][..., :, None] & ok[1][..., None, :], picked, 0.0)


_VIEWS: dict[torch.device, torch.Tensor] = {}


def _views(device: torch.device) -> torch.Tensor:
    """Orientation indices of the five item views, kept on the device (no copy per call)."""
    if device not in _VIEWS:
        _VIEWS[device] = torch.tensor([*SIDE_VIEWS, IDENTITY], device=device)
    return _VIEWS[device]


def _bottom_map(hb: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(hb), hb, 0.0)


def manager_scalars(
    geom: PackingGeometry, hm: torch.Tensor, pool_ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """[B, K, 8]: dx/L, dy/W, dz/H, bbox volume / box volume, mean and max of hm/H,
    fill ratio sum(hm) / (R^2 H), number of candidates / 64 (zeros at invalid slots)."""
    l, w, h = geom.box_size
    ext = geom.pool.extents[pool_ids]  # [B, K, 3]
    size = torch.stack((ext[..., 0] / l, ext[..., 1] / w, ext[..., 2] / h), -1)
    vol = ext.prod(-1, keepdim=True) / (l * w * h)
    norm = (hm / h).clamp(0.0, 1.0)
    box_stats = torch.stack(
        (norm.mean((1, 2)), norm.amax((1, 2)), hm.sum((1, 2)) / (geom.resolution**2 * h)), -1
    )
    count = mask.sum(-1, keepdim=True).to(hm.dtype) / CANDIDATE_COUNT_SCALE
    k = pool_ids.shape[1]
    scalars = torch.cat(
        (size, vol, box_stats[:, None].expand(-1, k, -1), count[:, None].expand(-1, k, -1)), -1
    )
    return torch.where(mask[..., None], scalars, 0.0)


def manager_maps(geom: PackingGeometry, hm: torch.Tensor, pool_ids: torch.Tensor) -> torch.Tensor:
    """[B, K, 7, R, R]: box heightmap; item tops seen from front, rear, left, right; top and
    bottom at identity; each / H, clipped to [0, 1], item maps centred on the canvas."""
    p, h, r = geom.pool, geom.height, geom.resolution
    views = _views(hm.device)
    tops = p.ht[pool_ids[..., None], views]  # [B, K, 5, F, F]
    bottom = _bottom_map(p.hb[pool_ids, IDENTITY])[:, :, None]
    fp = p.footprint[pool_ids[..., None], views]
    items = centre_on_canvas(torch.cat((tops, bottom), 2), torch.cat((fp, fp[:, :, -1:]), 2), r)
    box = hm[:, None, None].expand(-1, pool_ids.shape[1], 1, r, r)
    return (torch.cat((box, items), 2) / h).clamp(0.0, 1.0)


def orientation_maps(
    geom: PackingGeometry, hm: torch.Tensor, pool_ids: torch.Tensor, orientations: torch.Tensor
) -> torch.Tensor:
    """The worker's input for items `pool_ids` [B] in orientations [B, O]: maps
    [B, O, 3, R, R] (hm / H, centred ht / H, centred hb / H with inf -> 0)."""
    p, h, r = geom.pool, geom.height, geom.resolution
    pid = pool_ids[:, None]
    item = torch.stack((p.ht[pid, orientations], _bottom_map(p.hb[pid, orientations])), 2)
    fp = p.footprint[pid, orientations][:, :, None].expand(-1, -1, 2, -1)
    item = centre_on_canvas(item, fp, r)  # [B, O, 2, R, R]
    box = hm[:, None, None].expand(-1, item.shape[1], 1, r, r)
    return (torch.cat((box, item), 2) / h).clamp(0.0, 1.0)


_ALL: dict[torch.device, torch.Tensor] = {}


def all_orientations(device: torch.device) -> torch.Tensor:
    """[1, 24]: every orientation index, kept on the device."""
    if device not in _ALL:
        _ALL[device] = torch.arange(NUM_ORIENTATIONS, device=device)[None]
    return _ALL[device]


def worker_maps(geom: PackingGeometry, hm: torch.Tensor, pool_ids: torch.Tensor):
    """For items `pool_ids` [B]: maps [B, 24, 3, R, R] (`orientation_maps` of every
    orientation), and the legal mask and z-map [B, 24, G, G] over the stride-grid corners
    (corner (i, j) is the cell (grid_step i, grid_step j))."""
    z, legal = geom.placement(hm, pool_ids)
    every = all_orientations(hm.device).expand(pool_ids.shape[0], -1)
    return orientation_maps(geom, hm, pool_ids, every), legal, z
