"""OBJ/STL parts through trimesh (optional extra: pip install 'gpurl[meshes]').

trimesh only reads the file; the inside test is the generalised winding number computed
here with torch (the solid angle every triangle subtends, summed; > 1/2 is inside), so no
ray or BVH backend is needed. Meshes are taken in metres and should be closed.
"""

from __future__ import annotations

import torch

from gpurl.envs.packing.catalog import Shape, _uniform, fit_scale, sample_points
from gpurl.errors import ConfigError

WINDING_CHUNK = 4096


def winding_number(points: torch.Tensor, triangles: torch.Tensor) -> torch.Tensor:
    """Generalised winding number of points [N, 3] w.r.t. triangles [T, 3, 3] (float64)."""
    out = []
    for start in range(0, len(points), WINDING_CHUNK):  # bounds memory at N x T
        d = triangles[None] - points[start : start + WINDING_CHUNK, None, None]  # [n, T, 3, 3]
        a, b, c = d.unbind(2)
        la, lb, lc = a.norm(dim=-1), b.norm(dim=-1), c.norm(dim=-1)
        det = (a * torch.cross(b, c, dim=-1)).sum(-1)
        den = la * lb * lc + (a * b).sum(-1) * lc + (b * c).sum(-1) * la + (c * a).sum(-1) * lb
        out.append((2 * torch.atan2(det, den)).sum(-1) / (4 * torch.pi))
    return torch.cat(out)


def load_mesh_shape(path: str) -> Shape:
    try:
        import trimesh
    except ImportError as err:
        raise ConfigError("mesh parts need trimesh: pip install 'gpurl[meshes]'") from err
    mesh = trimesh.load(path, force="mesh")
    lo, hi = mesh.bounds
    centre = (lo + hi) / 2
    tris = torch.from_numpy(mesh.vertices[mesh.faces] - centre).to(torch.float64)
    ext = tuple(float(v) for v in hi - lo)

    def inside(x, y, z):
        pts = torch.stack((x, y, z), -1).reshape(-1, 3).to(torch.float64)
        # points on the bounding box surface lie on faces of box-like meshes: nudge inward
        pts = pts * (1 - 1e-9)
        return (winding_number(pts, tris) > 0.5).reshape(x.shape)

    return Shape("mesh", ext, float(abs(mesh.volume)), inside)


def mesh_items(paths, count: int, cell: float, box_size, seed: int, scale_range=(0.8, 1.2)) -> list:
    """`count` items drawn uniformly from the meshes at `paths`, scale uniform."""
    shapes = [load_mesh_shape(p) for p in paths]
    g = torch.Generator().manual_seed(seed)
    items = []
    for _ in range(count):
        shape = shapes[int(torch.randint(0, len(shapes), (), generator=g))]
        scale = fit_scale(shape.extents, box_size, _uniform(g, *scale_range))
        items.append(sample_points(shape, scale, cell))
    return items
