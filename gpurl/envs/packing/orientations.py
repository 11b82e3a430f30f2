"""The 24 distinct axis-aligned rotations of an item.

The old code enumerated roll, pitch, yaw in {0, pi/2, pi, 3pi/2}: 64 triples that give
only 24 distinct rotations (spec FIX). We enumerate the same triples in the same
lexicographic (roll, pitch, yaw) order and keep each rotation the first time it appears,
so index 0 is the identity and every kept rotation has a readable Euler triple.
"""

from __future__ import annotations

import math

import torch

QUARTER_TURNS = 4
NUM_ORIENTATIONS = 24


def _rx(k: int) -> torch.Tensor:
    c, s = _cos_sin(k)
    return torch.tensor([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=torch.int64)


def _ry(k: int) -> torch.Tensor:
    c, s = _cos_sin(k)
    return torch.tensor([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=torch.int64)


def _rz(k: int) -> torch.Tensor:
    c, s = _cos_sin(k)
    return torch.tensor([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=torch.int64)


def _cos_sin(k: int) -> tuple[int, int]:
    # exact integers for multiples of pi/2, so the rotations stay exact permutations
    return round(math.cos(k * math.pi / 2)), round(math.sin(k * math.pi / 2))


def euler_rotation(roll_k: int, pitch_k: int, yaw_k: int) -> torch.Tensor:
    """R = Rz(yaw) Ry(pitch) Rx(roll) for angles given in quarter turns, as int64 [3, 3]."""
    return _rz(yaw_k) @ _ry(pitch_k) @ _rx(roll_k)


def _enumerate() -> tuple[torch.Tensor, torch.Tensor]:
    mats, eulers, seen = [], [], set()
    for r in range(QUARTER_TURNS):
        for p in range(QUARTER_TURNS):
            for y in range(QUARTER_TURNS):
                m = euler_rotation(r, p, y)
                key = tuple(m.flatten().tolist())
                if key not in seen:
                    seen.add(key)
                    mats.append(m)
                    eulers.append((r, p, y))
    return torch.stack(mats), torch.tensor(eulers, dtype=torch.int64)


_MATRICES, _EULER_QUARTERS = _enumerate()
assert len(_MATRICES) == NUM_ORIENTATIONS


def rotation_matrices(dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """The 24 rotations as [24, 3, 3]; entries are exactly 0 or +-1."""
    return _MATRICES.to(dtype=dtype, device=device)


def euler_quarter_turns() -> torch.Tensor:
    """(roll, pitch, yaw) of each rotation in quarter turns, [24, 3] int64."""
    return _EULER_QUARTERS.clone()


def orientation_index(roll_k: int, pitch_k: int, yaw_k: int) -> int:
    """Index among the 24 of the rotation Rz(yaw) Ry(pitch) Rx(roll) (quarter turns)."""
    m = euler_rotation(roll_k, pitch_k, yaw_k)
    hits = (_MATRICES == m).flatten(1).all(1)
    return int(hits.to(torch.int64).argmax())


# The manager's side views (spec): item tops seen with these rotations applied.
IDENTITY = 0
FRONT = orientation_index(1, 0, 0)
REAR = orientation_index(3, 0, 0)
LEFT = orientation_index(0, 1, 0)
RIGHT = orientation_index(0, 3, 0)
