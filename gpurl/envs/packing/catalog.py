"""The item catalog: procedural solids sampled into point sets, no download needed.

Each shape is an implicit solid (an `inside(x, y, z)` test in its local frame, sizes in
metres) with an analytic volume. An item is one shape at one scale, sampled on a lattice
that spans its bounding box end to end: every surface lattice point is kept and the
interior is thinned to about 3 mm spacing. The heightmaps only read per-column extremes,
which lie on the surface, so the lattice spacing is min(3 mm, cell size): coarser points
would leave empty cells inside a footprint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

MAX_POINTS = 50_000
INTERIOR_SPACING = 0.003

Inside = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class Shape:
    kind: str
    extents: tuple[float, float, float]  # bounding box, metres
    volume: float  # m^3
    inside: Inside  # local frame centred on the bounding box


@dataclass
class Item:
    kind: str
    points: torch.Tensor  # [N, 3] float32, centred on the centroid
    volume: float
    extents: tuple[float, float, float]


def _uniform(g: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=g))


def box(a: float, b: float, c: float) -> Shape:
    return Shape("box", (a, b, c), a * b * c, lambda x, y, z: torch.ones_like(x, dtype=torch.bool))


def cylinder(r: float, h: float) -> Shape:
    return Shape(
        "cylinder", (2 * r, 2 * r, h), math.pi * r * r * h, lambda x, y, z: x * x + y * y <= r * r
    )


def sphere(r: float) -> Shape:
    return Shape(
        "sphere",
        (2 * r,) * 3,
        4 / 3 * math.pi * r**3,
        lambda x, y, z: x * x + y * y + z * z <= r * r,
    )


def cone(r: float, h: float) -> Shape:
    def inside(x, y, z):
        rad = r * (0.5 - z / h)  # z in [-h/2, h/2]: radius r at the base, 0 at the tip
        return x * x + y * y <= rad * rad

    return Shape("cone", (2 * r, 2 * r, h), math.pi * r * r * h / 3, inside)


def torus(big: float, small: float) -> Shape:
    def inside(x, y, z):
        q = torch.sqrt(x * x + y * y) - big
        return q * q + z * z <= small * small

    ext = 2 * (big + small)
    return Shape("torus", (ext, ext, 2 * small), 2 * math.pi**2 * big * small**2, inside)


def polycube(kind: str, cells: torch.Tensor, unit: float) -> Shape:
    """Unit cubes at the True cells of a boolean [nx, ny, nz] grid."""
    n = torch.tensor(cells.shape)
    ext = tuple(float(v) * unit for v in n)

    def inside(x, y, z):
        idx = []
        for coord, e, k in zip((x, y, z), ext, n.tolist(), strict=True):
            i = torch.floor((coord + e / 2) / unit).to(torch.int64).clamp(0, k - 1)
            idx.append(i)
        return cells[idx[0], idx[1], idx[2]]

    return Shape(kind, ext, float(cells.sum()) * unit**3, inside)


_LETTERS = {
    "L": ["X..", "X..", "XXX"],
    "T": ["XXX", ".X.", ".X."],
    "U": ["X.X", "X.X", "XXX"],
}


def letter(kind: str, unit: float, depth: int) -> Shape:
    rows = _LETTERS[kind]
    plane = torch.tensor([[ch == "X" for ch in row] for row in rows])
    return polycube(kind, plane[:, :, None].expand(3, 3, depth).clone(), unit)


def blob(g: torch.Generator, unit: float) -> Shape:
    """A random 3x3x3 voxel blob grown from the centre, so it is one connected piece."""
    cells = torch.zeros(3, 3, 3, dtype=torch.bool)
    cells[1, 1, 1] = True
    target = 6 + int(torch.randint(0, 10, (), generator=g))
    steps = torch.tensor([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    while int(cells.sum()) < target:
        filled = cells.nonzero()
        src = filled[int(torch.randint(0, len(filled), (), generator=g))]
        dst = (src + steps[int(torch.randint(0, 6, (), generator=g))]).clamp(0, 2)
        cells[dst[0], dst[1], dst[2]] = True
    keep = cells.any(2).any(1), cells.any(2).any(0), cells.any(1).any(0)
    cells = cells[keep[0]][:, keep[1]][:, :, keep[2]]
    return polycube("blob", cells, unit)


PROCEDURAL_KINDS = ("box", "cylinder", "sphere", "cone", "torus", "L", "T", "U", "blob")


def random_shape(kind: str, g: torch.Generator) -> Shape:
    """A shape of the given kind with random proportions, bounding box 1-5 cm a side.

    Small parts keep the padded footprint (and so the z-map cost) bounded: at scale 1.2
    the largest side is 6 cm, 47 cells at the default 1.28 mm cell.
    """
    u = lambda lo, hi: _uniform(g, lo, hi)  # noqa: E731
    if kind == "box":
        return box(u(0.025, 0.05), u(0.025, 0.05), u(0.015, 0.04))
    if kind == "cylinder":
        return cylinder(u(0.012, 0.025), u(0.025, 0.05))
    if kind == "sphere":
        return sphere(u(0.015, 0.025))
    if kind == "cone":
        return cone(u(0.015, 0.025), u(0.025, 0.05))
    if kind == "torus":
        return torus(u(0.014, 0.018), u(0.005, 0.007))
    if kind in _LETTERS:
        return letter(kind, u(0.01, 0.016), 1 + int(torch.randint(0, 2, (), generator=g)))
    if kind == "blob":
        return blob(g, u(0.01, 0.016))
    raise ValueError(f"unknown procedural shape '{kind}': choose one of {PROCEDURAL_KINDS}")


def sample_points(shape: Shape, scale: float, cell: float) -> Item:
    """Surface lattice points at spacing <= min(3 mm, cell) plus thinned interior points."""
    spacing = min(INTERIOR_SPACING, cell)
    ext = [e * scale for e in shape.extents]
    axes = [torch.linspace(-e / 2, e / 2, math.ceil(e / spacing) + 1) for e in ext]
    x, y, z = torch.meshgrid(*axes, indexing="ij")
    occ = shape.inside(x / scale, y / scale, z / scale)
    pad = torch.nn.functional.pad(occ[None, None].float(), (1, 1, 1, 1, 1, 1)).bool()[0, 0]
    interior = occ.clone()
    for dim in range(3):
        for shift in (-1, 1):
            interior &= pad.roll(shift, dim)[1:-1, 1:-1, 1:-1]
    surface = occ & ~interior
    stride = max(1, round(INTERIOR_SPACING / spacing))
    thin = torch.zeros_like(occ)
    thin[::stride, ::stride, ::stride] = True
    keep = surface | (interior & thin)
    pts = torch.stack((x[keep], y[keep], z[keep]), dim=-1).to(torch.float32)
    if len(pts) > MAX_POINTS:  # surface first, so thinning the interior loses no column extreme
        order = torch.argsort((~surface[keep]).to(torch.int8), stable=True)
        pts = pts[order[:MAX_POINTS]]
    pts = pts - pts.mean(0)
    return Item(shape.kind, pts, shape.volume * scale**3, tuple(ext))


def fit_scale(extents: tuple[float, float, float], box_size, scale: float) -> float:
    """Clamp a scale so the item fits the box in its identity orientation."""
    limit = min(b / e for b, e in zip(box_size, extents, strict=True))
    return min(scale, limit)


def procedural_items(
    count: int, cell: float, box_size, seed: int, kinds=PROCEDURAL_KINDS, scale_range=(0.8, 1.2)
) -> list[Item]:
    """`count` items: a kind uniformly from `kinds`, random proportions, scale uniform."""
    g = torch.Generator().manual_seed(seed)
    items = []
    for _ in range(count):
        kind = kinds[int(torch.randint(0, len(kinds), (), generator=g))]
        shape = random_shape(kind, g)
        scale = fit_scale(shape.extents, box_size, _uniform(g, *scale_range))
        items.append(sample_points(shape, scale, cell))
    return items
