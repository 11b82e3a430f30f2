"""Checkpoints: everything a run needs to continue where it stopped, kept so that one
fault never loses them all.

    checkpoints/last.pt          the newest checkpoint
    checkpoints/last.pt.sha256   its SHA-256 in hex (what `sha256sum last.pt` prints first)
    checkpoints/prev.pt(.sha256) the one before it, kept when last.pt is replaced

A save writes last.pt.tmp and its digest (each flushed to disk), then rotates
last -> prev and moves the new files in place, each step an os.replace. A run killed
at any moment (kill -9), or a write that fails half way (a full disk), leaves at least
one complete checkpoint whose digest is recorded: the new one, or else the previous.
A failed write removes its temporary files and raises; nothing earlier is touched.

A load checks the file's SHA-256 against the recorded digests (its own, or its
partner's: a save killed between two renames leaves prev.pt beside last.pt's digest).
A checkpoint that is missing, truncated, corrupted or unreadable gives way to prev.pt
with one warning line naming both files; when neither can be used, a ConfigError says
why. A checkpoint written before digests existed (no .sha256 beside it) is loaded
unverified.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import torch

from gpurl.errors import ConfigError

log = logging.getLogger(__name__)

LAST, PREVIOUS = "last.pt", "prev.pt"


def previous_path(path: Path) -> Path:
    """Where `path`'s predecessor is kept: prev.pt beside last.pt (X.prev.pt beside X.pt)."""
    path = Path(path)
    if path.name == LAST:
        return path.with_name(PREVIOUS)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def digest_path(path: Path) -> Path:
    """The sidecar holding `path`'s SHA-256."""
    return path.with_name(path.name + ".sha256")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_checkpoint(state: dict, path: Path) -> Path:
    """Write `state` to `path` with its digest, keeping the checkpoint it replaces as
    previous_path(path). Raises what the write raised (OSError, or torch's RuntimeError
    for a failed zip write) after removing the partial files; `path` and its previous
    checkpoint are then untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    digest_tmp = digest_path(path).with_name(digest_path(path).name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        _write_synced(digest_tmp, f"{sha256_file(tmp)}\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        digest_tmp.unlink(missing_ok=True)
        raise
    prev = previous_path(path)
    if path.exists():
        os.replace(path, prev)
        if digest_path(path).exists():
            os.replace(digest_path(path), digest_path(prev))
        else:  # a checkpoint from before digests: prev.pt stays unverified
            digest_path(prev).unlink(missing_ok=True)
    os.replace(digest_tmp, digest_path(path))
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint file, or a run directory holding checkpoints/last.pt. The file may be
    missing when its previous checkpoint exists (load_checkpoint then falls back)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "checkpoints" / LAST
    if not p.is_file() and not (p.name == LAST and previous_path(p).is_file()):
        raise ConfigError(
            f"checkpoint not found: {p}: pass trainer.resume=<run dir or checkpoints/last.pt "
            f"of an earlier run>"
        )
    return p


def load_checkpoint(path: str | os.PathLike, device) -> dict:
    """The state of a verified checkpoint: `path` (a file or run directory), or its
    previous checkpoint when `path` is damaged (with one warning line)."""
    return read_checkpoint(path, device)[0]


def read_checkpoint(path: str | os.PathLike, device) -> tuple[dict, Path]:
    """(state, the file it came from): load_checkpoint, also saying which file was used."""
    p = resolve_checkpoint(path)
    candidates = [p, previous_path(p)] if p.name == LAST else [p]
    problems = []
    for candidate in candidates:
        state, problem = _try_load(candidate, device)
        if state is not None:
            if problems:
                log.warning(
                    "checkpoint %s is %s; using the previous one, %s (frames %s)",
                    p,
                    problems[0],
                    candidate,
                    state["frames"],
                )
            return state, candidate
        problems.append(problem)
    if len(candidates) == 1:
        raise ConfigError(
            f"could not use checkpoint {p}: it is {problems[0]}; resume from another "
            f"checkpoint or start afresh"
        )
    raise ConfigError(
        f"no usable checkpoint: {candidates[0]} is {problems[0]} and {candidates[1]} is "
        f"{problems[1]}; resume from another run or start afresh"
    )


def _try_load(p: Path, device) -> tuple[dict | None, str]:
    if not p.is_file():
        return None, "missing"
    if digest_path(p).exists():
        partners = [p, previous_path(p)] + ([p.with_name(LAST)] if p.name == PREVIOUS else [])
        digests = {_read_digest(digest_path(q)) for q in partners} - {None}
        if sha256_file(p) not in digests:
            return None, "damaged (its sha256 does not match: truncated or corrupted)"
    try:
        state = torch.load(p, map_location=device, weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        return None, f"damaged or not a gpurl checkpoint (unreadable: {type(err).__name__})"
    if not isinstance(state, dict) or "agent" not in state or "frames" not in state:
        return None, "not a gpurl checkpoint (no agent or frames in it)"
    return state, ""


def _read_digest(path: Path) -> str | None:
    try:
        text = path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return None
    return text[0] if text and len(text[0]) == 64 else None


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable too (a power cut); not every platform allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
