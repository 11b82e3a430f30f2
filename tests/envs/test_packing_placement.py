"""The canonical placement function against a plain Python-loop reference."""

import numpy as np
import pytest
import torch

from gpurl.envs.packing.placement import (
    corner_count,
    place,
    placement_at,
    placement_maps,
    resting_heights_fused,
    void_depth,
)

HEIGHT = 0.3


def _random_case(b, r, o, f, seed, full_side=False):
    g = torch.Generator().manual_seed(seed)
    hm = torch.zeros(b, r, r)
    for _ in range(6):  # stepped terrain: a few raised rectangles plus noise
        x0, y0 = torch.randint(0, r, (2,), generator=g).tolist()
        hm[:, x0 : x0 + r // 3, y0 : y0 + r // 4] += torch.rand(b, 1, 1, generator=g) * 0.08
    hm += torch.rand(b, r, r, generator=g) * 0.01
    fp = torch.randint(1, f + 1, (b, o, 2), generator=g)
    if full_side:
        fp[:, 0, 0] = r  # footprint spanning the whole x side of the box
        fp[:, 1, 1] = r
    hb = torch.rand(b, o, f, f, generator=g) * 0.05
    ht = hb + torch.rand(b, o, f, f, generator=g) * 0.2
    cells = torch.arange(f)
    inside = (cells[:, None] < fp[..., 0, None, None]) & (cells[None, :] < fp[..., 1, None, None])
    holes = torch.rand(b, o, f, f, generator=g) < 0.2
    holes[..., 0, 0] = False  # every footprint keeps at least one point
    occupied = inside & ~holes
    hb = torch.where(occupied, hb, float("inf"))
    ht = torch.where(occupied, ht, 0.0)
    ht_max = ht.flatten(2).amax(-1)
    return hm, ht, hb, ht_max, fp


def _reference(hm, hb, ht_max, fp, step, height):
    hm, hb = hm.numpy(), hb.numpy()
    b, r, _ = hm.shape
    o = hb.shape[1]
    gc = corner_count(r, step)
    z = np.full((b, o, gc, gc), -np.inf, dtype=np.float32)
    legal = np.zeros((b, o, gc, gc), dtype=bool)
    for e in range(b):
        for k in range(o):
            w, h = fp[e, k].tolist()
            for ix in range(gc):
                for iy in range(gc):
                    x, y = ix * step, iy * step
                    best = -np.inf
                    for i in range(hb.shape[2]):
                        for j in range(hb.shape[3]):
                            if np.isinf(hb[e, k, i, j]):
                                continue
                            cell = hm[e, x + i, y + j] if x + i < r and y + j < r else np.float32(0)
                            best = max(best, np.float32(cell - hb[e, k, i, j]))
                    z[e, k, ix, iy] = best
                    fits = x + w <= r and y + h <= r
                    top = np.float32(best + np.float32(ht_max[e, k].item()))  # float32, as torch
                    legal[e, k, ix, iy] = fits and top <= np.float32(height + 1e-6)
    return torch.from_numpy(z), torch.from_numpy(legal)


@pytest.mark.parametrize(
    "r,step,f,full_side",
    [(12, 1, 4, False), (16, 4, 6, False), (13, 3, 5, False), (10, 5, 10, True), (8, 2, 8, True)],
)
def test_resting_heights_and_legality_match_loop_reference(r, step, f, full_side):
    hm, ht, hb, ht_max, fp = _random_case(2, r, 3, f, seed=r * 7 + step, full_side=full_side)
    z, legal = placement_maps(hm, hb, ht_max, fp, step, HEIGHT)
    z_ref, legal_ref = _reference(hm, hb, ht_max, fp, step, HEIGHT)
    assert torch.equal(z, z_ref)
    assert torch.equal(legal, legal_ref)
    assert legal.any() and not legal.all()  # the cases exercise both outcomes
    if full_side:  # a footprint as wide as the box fits only at x = 0
        assert not legal[:, 0, 1:].any() and legal[:, 0, 0].any()
    assert torch.equal(resting_heights_fused(hm, hb, step), z)
    # the single-corner form the env steps with gives the same entries
    g = torch.Generator().manual_seed(r)
    gc = z.shape[-1]
    for _ in range(4):
        k = torch.randint(0, 3, (2,), generator=g)
        ix, iy = torch.randint(0, gc, (2, 2), generator=g)
        e = torch.arange(2)
        z1, l1 = placement_at(hm, hb[e, k], ht_max[e, k], fp[e, k], ix * step, iy * step, HEIGHT)
        assert torch.equal(z1, z[e, k, ix, iy]) and torch.equal(l1, legal[e, k, ix, iy])


def test_void_depth_by_hand_and_against_a_loop():
    """A flat 2 x 2 item on a floor with one cell raised 3 mm rests at 3 mm and leaves
    three cells of 3 mm empty under it: mean void depth 3 * 3 / 4 mm. Where it misses
    the raised cell it lies flat on the floor: no void."""
    hm = torch.zeros(1, 6, 6)
    hm[0, 1, 1] = 0.003
    flat = torch.zeros(1, 1, 2, 2)
    z, _ = placement_maps(hm, flat, torch.full((1, 1), 0.01), torch.full((1, 1, 2), 2), 1, HEIGHT)
    void = void_depth(hm, flat, z, 1)
    assert z[0, 0, 0, 0] == pytest.approx(0.003) and void[0, 0, 0, 0] == pytest.approx(0.00225)
    assert z[0, 0, 2, 2] == 0 and void[0, 0, 2, 2] == 0
    # random items with holes in their footprint, every grid step: the loop's sums
    for r, step, f in [(12, 1, 4), (13, 3, 5), (8, 2, 8)]:
        hm, _, hb, ht_max, fp = _random_case(2, r, 3, f, seed=r + step, full_side=False)
        z, _ = placement_maps(hm, hb, ht_max, fp, step, HEIGHT)
        void = void_depth(hm, hb, z, step)
        padded = torch.nn.functional.pad(hm, (0, 2 * f + step, 0, 2 * f + step))
        for e, k, ix, iy in [(0, 0, 0, 0), (1, 2, 1, 2), (0, 1, z.shape[-1] - 1, 0)]:
            x, y = ix * step, iy * step
            inside = torch.isfinite(hb[e, k])
            gap = z[e, k, ix, iy] + hb[e, k] - padded[e, x : x + f, y : y + f]
            assert void[e, k, ix, iy] == pytest.approx(gap[inside].mean().item(), abs=1e-7)


def test_a_high_item_is_illegal_by_height():
    hm, ht, hb, ht_max, fp = _random_case(1, 12, 2, 4, seed=3)
    _, legal = placement_maps(hm, hb, ht_max + HEIGHT, fp, 2, HEIGHT)
    assert not legal.any()
    # at the lid: z + max(ht) == H fits, 1e-5 above does not
    flat = torch.zeros(1, 1, 2, 2)
    one = torch.ones(1, 1, 2, dtype=torch.int64)
    _, at = placement_maps(torch.zeros(1, 6, 6), flat, torch.full((1, 1), HEIGHT), one, 2, HEIGHT)
    _, above = placement_maps(
        torch.zeros(1, 6, 6), flat, torch.full((1, 1), HEIGHT + 1e-5), one, 2, HEIGHT
    )
    assert at.all() and not above.any()


@pytest.mark.parametrize("r,f", [(12, 4), (9, 9)])
def test_heightmap_update_matches_loop_reference(r, f):
    b = 3
    hm, ht, hb, ht_max, fp = _random_case(b, r, 1, f, seed=r)
    ht = ht[:, 0]
    g = torch.Generator().manual_seed(1)
    x = torch.stack([torch.randint(0, r - int(fp[e, 0, 0]) + 1, (), generator=g) for e in range(b)])
    y = torch.stack([torch.randint(0, r - int(fp[e, 0, 1]) + 1, (), generator=g) for e in range(b)])
    z = torch.rand(b, generator=g) * 0.1
    apply = torch.tensor([True, True, False])
    out = place(hm, ht, z, x, y, apply)
    ref = hm.clone()
    for e in range(b):
        if not apply[e]:
            continue
        w, h = fp[e, 0].tolist()
        for i in range(w):
            for j in range(h):
                top = (ht[e, i, j] + z[e]) if ht[e, i, j] > 0 else torch.tensor(0.0)
                ref[e, x[e] + i, y[e] + j] = torch.maximum(top, hm[e, x[e] + i, y[e] + j])
    assert torch.equal(out, ref)
    assert not torch.equal(out[0], hm[0])  # the item raised something
    assert torch.equal(out[2], hm[2])
