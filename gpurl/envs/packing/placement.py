"""The one canonical placement computation, shared by the env and its policies.

For box heightmaps hm [B, R, R] and an item's orientation maps ht, hb [B, O, F, F], the
item placed with its footprint's top-left cell at (x, y) rests at

    z(o, x, y) = max over footprint cells (i, j) of hm[x + i, y + j] - hb[o, i, j],

(+inf cells of hb drop out of the max) and is legal iff it fits the footprint inside the
box and z + max(ht) <= H + 1e-6. Corners lie on the stride grid x = grid_step * ix,
ix in [0, G) with G = ceil(R / grid_step); corners whose footprint leaves the box are
illegal. Everything is one batched tensor computation over envs, orientations and
corners; the only Python loop is over the (F / grid_step)^2 footprint blocks of the
memory-lean eager kernel, the compiled kernel has none.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

LEGAL_TOLERANCE = 1e-6


def corner_count(resolution: int, grid_step: int) -> int:
    """Number of stride-grid corners per side: x = grid_step * i for i in [0, G)."""
    return (resolution - 1) // grid_step + 1


def _padded_heightmap(hm: torch.Tensor, g: int, f: int) -> torch.Tensor:
    """hm zero-padded so every window of every grid corner is in range: side G*g + f."""
    r = hm.shape[-1]
    side = corner_count(r, g) * g + math.ceil(f / g) * g
    return F.pad(hm, (0, side - r, 0, side - r))


def _polyphase(hm: torch.Tensor, item: torch.Tensor, g: int, fill: float):
    """hm [B, R, R] and per-orientation footprint maps item [B, O, F, F] in polyphase
    form: with x = g X and i = g a + p, hm[x + i] = hm[g (X + a) + p], so footprint block
    (a, b) of every corner is one shifted slice of the polyphase heightmap. Returns hm as
    [B, 1, p, q, U, V], item (padded with `fill`) as [B, O, p, q, a, b], the blocks per
    side and the corners per side G."""
    b, o, f, _ = item.shape
    fb = math.ceil(f / g)
    hmp = _padded_heightmap(hm, g, f)
    n = hmp.shape[-1] // g
    hmp = hmp.view(b, n, g, n, g).permute(0, 2, 4, 1, 3).contiguous()[:, None]
    itp = F.pad(item, (0, fb * g - f, 0, fb * g - f), value=fill)
    itp = itp.view(b, o, fb, g, fb, g).permute(0, 1, 3, 5, 2, 4).contiguous()
    return hmp, itp, fb, corner_count(hm.shape[-1], g)


def resting_heights_eager(hm: torch.Tensor, hb: torch.Tensor, grid_step: int) -> torch.Tensor:
    """z [B, O, G, G] for hm [B, R, R], hb [B, O, F, F]; memory O(B O R^2): a max over the
    polyphase footprint blocks (`_polyphase`)."""
    hmp, hbp, fb, gc = _polyphase(hm, hb, grid_step, float("inf"))
    g = grid_step
    acc = torch.full((*hb.shape[:2], g, g, gc, gc), -float("inf"), dtype=hm.dtype, device=hm.device)
    for a in range(fb):
        for c in range(fb):
            window = hmp[:, :, :, :, a : a + gc, c : c + gc]
            torch.maximum(acc, window - hbp[:, :, :, :, a, c, None, None], out=acc)
    return acc.amax(dim=(2, 3))


def footprint_sums(hm: torch.Tensor, weight: torch.Tensor, grid_step: int) -> torch.Tensor:
    """S [B, O, G, G]: sum over footprint cells (i, j) of weight[o, i, j] hm[x + i, y + j]
    for hm [B, R, R], weight [B, O, F, F]; the loop of `resting_heights_eager` with a
    weighted sum in place of the max (zero padding beyond the box)."""
    hmp, wp, fb, gc = _polyphase(hm, weight, grid_step, 0.0)
    g = grid_step
    acc = torch.zeros((*weight.shape[:2], g, g, gc, gc), dtype=hm.dtype, device=hm.device)
    for a in range(fb):
        for c in range(fb):
            acc += hmp[:, :, :, :, a : a + gc, c : c + gc] * wp[:, :, :, :, a, c, None, None]
    return acc.sum(dim=(2, 3))


def void_depth(hm: torch.Tensor, hb: torch.Tensor, z: torch.Tensor, grid_step: int):
    """[B, O, G, G]: the mean depth of the empty space an item resting at z [B, O, G, G]
    leaves under its footprint, sum over footprint cells of (z + hb - hm) / cells, for hm
    [B, R, R] and hb [B, O, F, F] (+inf outside the footprint). 0: the item's bottom
    meets the surface everywhere; what `z` alone cannot tell (a flat item on a peak)."""
    inside = torch.isfinite(hb)
    cells = inside.sum((-2, -1)).clamp_min(1).to(hm.dtype)[..., None, None]
    bottom = torch.where(inside, hb, 0.0).sum((-2, -1))[..., None, None]
    under = footprint_sums(hm, inside.to(hm.dtype), grid_step)
    return ((z * cells + bottom - under) / cells).clamp_min(0.0)


def resting_heights_fused(hm: torch.Tensor, hb: torch.Tensor, grid_step: int) -> torch.Tensor:
    """Same result as `resting_heights_eager` as one unfold + amax expression.

    Eager it materialises every window ([B, O, G, G, F, F]); under torch.compile the
    subtraction and the max fuse into one loop and nothing is materialised.
    """
    f = hb.shape[-1]
    gc = corner_count(hm.shape[-1], grid_step)
    hmp = _padded_heightmap(hm, grid_step, f)
    win = hmp.unfold(1, f, grid_step)[:, :gc].unfold(2, f, grid_step)[:, :, :gc]
    return (win[:, None] - hb[:, :, None, None]).amax(dim=(-2, -1))


_COMPILED: dict[str, Callable] = {}


def resting_heights_kernel(compiled: bool = False) -> Callable:
    """The z-map kernel: eager polyphase loop, or the fused expression under torch.compile."""
    if not compiled:
        return resting_heights_eager
    if "fused" not in _COMPILED:
        _COMPILED["fused"] = torch.compile(resting_heights_fused, dynamic=False)
    return _COMPILED["fused"]


def placement_maps(
    hm: torch.Tensor,
    hb: torch.Tensor,
    ht_max: torch.Tensor,
    footprint: torch.Tensor,
    grid_step: int,
    height: float,
    compiled: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resting heights and legal mask over every corner of every orientation.

    hm [B, R, R]; hb [B, O, F, F]; ht_max [B, O]; footprint [B, O, 2] (w, h) in cells.
    Returns z [B, O, G, G] (metres) and legal [B, O, G, G] (bool).
    """
    z = resting_heights_kernel(compiled)(hm, hb, grid_step)
    r = hm.shape[-1]
    gc = z.shape[-1]
    corner = torch.arange(gc, device=hm.device) * grid_step
    fits_x = corner.view(1, 1, gc, 1) <= (r - footprint[..., 0])[..., None, None]
    fits_y = corner.view(1, 1, 1, gc) <= (r - footprint[..., 1])[..., None, None]
    fits_h = z + ht_max[..., None, None] <= height + LEGAL_TOLERANCE
    return z, fits_x & fits_y & fits_h


def placement_at(
    hm: torch.Tensor,
    hb: torch.Tensor,
    ht_max: torch.Tensor,
    footprint: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    height: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resting height and legality of one corner per env: the entries of `placement_maps`
    at (x, y) [B] for hb [B, F, F], ht_max [B], footprint [B, 2], computed the same way
    (same zero padding, same max of hm - hb) so the values are identical."""
    b, r, _ = hm.shape
    f = hb.shape[-1]
    span = torch.arange(f, device=hm.device)
    bidx = torch.arange(b, device=hm.device)[:, None, None]
    window = F.pad(hm, (0, f, 0, f))[
        bidx, (x[:, None] + span)[:, :, None], (y[:, None] + span)[:, None, :]
    ]
    z = (window - hb).amax(dim=(-2, -1))
    fits = (x <= r - footprint[:, 0]) & (y <= r - footprint[:, 1])
    return z, fits & (z + ht_max <= height + LEGAL_TOLERANCE)


def place(
    hm: torch.Tensor,
    ht: torch.Tensor,
    z: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    apply: torch.Tensor,
) -> torch.Tensor:
    """Heightmap after placing item maps ht [B, F, F] at (x, y) [B] resting at z [B].

    hm[x:x+w, y:y+h] = max((ht > 0) * (ht + z), hm[x:x+w, y:y+h]) where `apply` [B];
    a new tensor, hm is not modified. Cells of the padded window past the footprint have
    ht = 0 and leave hm as it was.
    """
    b, r, _ = hm.shape
    f = ht.shape[-1]
    span = torch.arange(f, device=hm.device)
    rows = x[:, None] + span  # [B, F]
    cols = y[:, None] + span
    top = torch.where(ht > 0, ht + z[:, None, None], 0.0)
    top = torch.where(apply[:, None, None], top, 0.0)
    padded = F.pad(hm, (0, f, 0, f))
    bidx = torch.arange(b, device=hm.device)[:, None, None]
    window = padded[bidx, rows[:, :, None], cols[:, None, :]]
    padded = padded.index_put(
        (bidx, rows[:, :, None], cols[:, None, :]), torch.maximum(window, top)
    )
    return padded[:, :r, :r].contiguous()
