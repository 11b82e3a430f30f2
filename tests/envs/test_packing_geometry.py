"""Orientations, item heightmaps, catalog sampling and candidate features."""

import itertools
import math

import pytest
import torch

from gpurl.envs.packing import orientations as ori
from gpurl.envs.packing.catalog import PROCEDURAL_KINDS, box, procedural_items, sample_points
from gpurl.envs.packing.features import candidate_slots, centre_on_canvas
from gpurl.envs.packing.heightmaps import build_item_maps, footprints, max_footprint

SEP = 0.256 / 64


def test_24_distinct_rotations_closed_under_composition():
    rots = ori.rotation_matrices(torch.float64)
    assert rots.shape == (24, 3, 3)
    keys = {tuple(m.flatten().tolist()) for m in rots}
    assert len(keys) == 24
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose(rots @ rots.transpose(1, 2), eye.expand(24, 3, 3))
    assert torch.allclose(torch.linalg.det(rots), torch.ones(24, dtype=torch.float64))
    for a, b in itertools.product(rots, rots):
        assert tuple((a @ b).flatten().tolist()) in keys
    assert torch.equal(rots[0], eye)


def test_euler_triples_reproduce_the_rotations():
    rots = ori.rotation_matrices(torch.int64)
    for k, (r, p, y) in enumerate(ori.euler_quarter_turns().tolist()):
        assert torch.equal(ori.euler_rotation(r, p, y), rots[k])
        ang = [v * math.pi / 2 for v in (r, p, y)]
        rx = torch.tensor(
            [
                [1, 0, 0],
                [0, math.cos(ang[0]), -math.sin(ang[0])],
                [0, math.sin(ang[0]), math.cos(ang[0])],
            ]
        )
        ry = torch.tensor(
            [
                [math.cos(ang[1]), 0, math.sin(ang[1])],
                [0, 1, 0],
                [-math.sin(ang[1]), 0, math.cos(ang[1])],
            ]
        )
        rz = torch.tensor(
            [
                [math.cos(ang[2]), -math.sin(ang[2]), 0],
                [math.sin(ang[2]), math.cos(ang[2]), 0],
                [0, 0, 1],
            ]
        )
        assert torch.allclose(rz @ ry @ rx, rots[k].float(), atol=1e-6)
    assert len({ori.FRONT, ori.REAR, ori.LEFT, ori.RIGHT, ori.IDENTITY}) == 5


def test_box_heightmaps_match_its_dimensions_in_every_orientation():
    dims = torch.tensor([0.0411, 0.0257, 0.0173])
    item = sample_points(box(*dims.tolist()), 1.0, SEP)
    f = max_footprint(dims, SEP) + 1
    maps = build_item_maps([item], SEP, f)
    rotated = (ori.rotation_matrices().abs() @ dims).abs()  # [24, 3] extents per orientation
    expected_fp = footprints(rotated[:, :2], SEP)
    assert torch.equal(maps.footprint[0], expected_fp)
    cells = torch.arange(f)
    for k in range(24):
        w, h = expected_fp[k].tolist()
        inside = (cells[:, None] < w) & (cells[None, :] < h)
        ht, hb = maps.ht[0, k], maps.hb[0, k]
        assert torch.allclose(ht[inside], rotated[k, 2].expand(w * h), atol=1e-6)
        assert torch.all(hb[inside] == 0)
        assert torch.all(ht[~inside] == 0) and torch.all(torch.isinf(hb[~inside]))
        assert maps.ht_max[0, k] == pytest.approx(float(rotated[k, 2]), abs=1e-6)
    assert torch.allclose(maps.extents[0], dims, atol=1e-6)
    assert maps.volume[0] == pytest.approx(float(dims.prod()), rel=1e-5)


def test_catalog_items_are_bounded_and_their_footprints_have_no_holes():
    items = procedural_items(len(PROCEDURAL_KINDS) * 2, SEP, (0.256,) * 3, seed=1)
    assert len({it.kind for it in items}) >= 5
    ext = torch.tensor([it.extents for it in items])
    maps = build_item_maps(items, SEP, max_footprint(ext, SEP) + 1)
    for k, it in enumerate(items):
        assert 0 < len(it.points) <= 50_000
        assert torch.allclose(it.points.mean(0), torch.zeros(3), atol=1e-6)
        assert it.volume > 0 and it.volume <= float(ext[k].prod()) * 1.0001
    # boxes: the identity top view is a full rectangle of the box's height
    for k, it in enumerate(items):
        if it.kind == "box":
            w, h = maps.footprint[k, 0].tolist()
            assert torch.all(torch.isfinite(maps.hb[k, 0, :w, :h]))
    assert torch.all(maps.ht <= maps.ht_max[..., None, None] + 1e-7)


def test_candidate_slots_are_unpacked_items_largest_first():
    vol = torch.tensor([[3.0, 1.0, 5.0, 2.0, 5.0]])
    packed = torch.tensor([[False, False, True, False, False]])
    ids, mask = candidate_slots(vol, packed, 4)
    assert ids.tolist() == [[4, 0, 3, 1]] and mask.all()
    ids, mask = candidate_slots(vol, packed, 5)
    assert mask.tolist() == [[True, True, True, True, False]]


def test_centre_on_canvas_places_the_footprint_in_the_middle():
    maps = torch.zeros(1, 4, 4)
    maps[0, :2, :3] = torch.arange(1.0, 7.0).view(2, 3)
    out = centre_on_canvas(maps, torch.tensor([[2, 3]]), 8)
    assert torch.equal(out[0, 3:5, 2:5], maps[0, :2, :3])
    assert out.sum() == maps.sum()


def test_mesh_box_heightmaps_match_its_dimensions(tmp_path):
    trimesh = pytest.importorskip("trimesh")
    from gpurl.envs.packing.meshes import mesh_items

    dims = (0.0411, 0.0257, 0.0173)
    path = tmp_path / "box.stl"
    trimesh.creation.box(extents=dims).export(path)
    (item,) = mesh_items([str(path)], 1, SEP, (0.256,) * 3, seed=0, scale_range=(1.0, 1.0))
    assert item.volume == pytest.approx(dims[0] * dims[1] * dims[2], rel=1e-6)
    maps = build_item_maps([item], SEP, max_footprint(torch.tensor(dims), SEP) + 1)
    w, h = maps.footprint[0, 0].tolist()
    assert (w, h) == tuple(footprints(torch.tensor(dims[:2]), SEP).tolist())
    assert torch.allclose(maps.ht[0, 0, :w, :h], torch.full((w, h), dims[2]), atol=1e-6)
    assert torch.all(maps.hb[0, 0, :w, :h] == 0)
