"""Checkpoints: one file holding everything a run needs to continue where it stopped.

Written to a temporary file and renamed, so a run killed mid-write leaves the previous
checkpoint intact.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from gpurl.errors import ConfigError


def save_checkpoint(state: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint file, or a run directory holding checkpoints/last.pt."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "checkpoints" / "last.pt"
    if not p.is_file():
        raise ConfigError(
            f"checkpoint not found: {p}: pass trainer.resume=<run dir or checkpoints/last.pt "
            f"of an earlier run>"
        )
    return p


def load_checkpoint(path: str | os.PathLike, device) -> dict:
    p = resolve_checkpoint(path)
    try:
        state = torch.load(p, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        raise ConfigError(
            f"could not read checkpoint {p} ({type(err).__name__}): the file is damaged or "
            f"not a gpurl checkpoint; resume from another one or start afresh"
        ) from err
    if not isinstance(state, dict) or "agent" not in state or "frames" not in state:
        raise ConfigError(f"{p} is not a gpurl checkpoint: resume from a checkpoints/last.pt")
    return state
