"""What every MinAtar game module shares: the full action set, the game interface and
small batched helpers for drawing objects on the 10 x 10 grid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

SIZE = 10  # the grid is SIZE x SIZE cells
# MinAtar's full action set; a game acts through its minimal subset of these
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)
FULL_ACTIONS = (NOOP, LEFT, UP, RIGHT, DOWN, FIRE)


# Inductor options for a game whose step walks many slots an env (Seaquest's 32 enemies,
# Asterix's 8 lanes): values read by several loops over the slots are written once
# first, not recomputed inside each. Compiled step at 1,024 envs, one thread: Seaquest
# and Asterix 1.15-1.2x faster; Freeway 1.1x slower, Breakout and Space Invaders level.
REALIZE_SHARED = {
    "realize_cpu_opcount_threshold": 8,
    "realize_reads_threshold": 2,
    "realize_cpu_acc_reads_threshold": 2,
}


@dataclass(frozen=True)
class Game:
    """One MinAtar game as pure batched tensor functions over its state (a NamedTuple
    of tensors, batch first).

    init(batch, device)            a state (contents irrelevant: every env is reset first)
    reset(state, mask, u)          fresh episodes where mask [B]; u [B, reset_noise] uniforms
    step(state, action, u, ramp)   one frame for every env; `action` [B] full-set indices,
                                   u [B, step_noise] uniforms, `ramp` a Python flag;
                                   returns (state, reward [B] float, terminal [B] bool)
    observe(state)                 bool [B, channels, 10, 10]
    observe_packed(state)          optional: the same cells packed by pack_rows (int32
                                   [B, 25 channels]); observe is then its unpack_cells
    inductor_options               Inductor config for this game's compiled step on the
                                   CPU, over the options every game shares (lean_core)
    """

    name: str
    channels: int
    actions: tuple[int, ...]  # the minimal action set, as full-set indices
    step_noise: int
    reset_noise: int
    init: Callable
    reset: Callable
    step: Callable
    observe: Callable
    observe_packed: Callable | None = None
    inductor_options: dict = field(default_factory=dict)


def draw(*layers) -> torch.Tensor:
    """bool [B, len(layers), 10, 10], channel c drawn from layers[c]: a bool [B, 10, 10]
    grid, or positions (y, x) or (y, x, on), each [B] or [B, N] (broadcast together),
    whose cells are set where `on` is True; positions outside the grid set nothing.

    The positioned channels are drawn by one scatter into one canvas, not a scatter
    each: an observation is drawn twice a step (the state reached, then after resets).
    Compiled, this beats comparing every cell with the positions by several times."""
    size = SIZE * SIZE
    drawn = [c for c, layer in enumerate(layers) if not isinstance(layer, torch.Tensor)]
    if not drawn:
        return torch.stack(layers, dim=1)
    spare = len(drawn) * size  # off the grid or off: one spare cell, dropped
    flats = []
    for i, c in enumerate(drawn):
        y, x, on = (*layers[c], None)[:3]
        y, x = torch.broadcast_tensors(y, x)
        inside = (y >= 0) & (y < SIZE) & (x >= 0) & (x < SIZE)
        if on is not None:
            inside = inside & on
        flat = torch.where(inside, i * size + y * SIZE + x, spare)
        flats.append(flat.reshape(len(flat), -1))
    batch = len(flats[0])
    canvas = torch.zeros((batch, spare + 1), dtype=torch.bool, device=flats[0].device)
    canvas = canvas.scatter(1, torch.cat(flats, 1), True)[:, :spare]
    canvas = canvas.reshape(batch, len(drawn), SIZE, SIZE)
    if len(drawn) == len(layers):
        return canvas
    where = {c: i for i, c in enumerate(drawn)}
    return torch.stack(
        [canvas[:, where[c]] if c in where else layer for c, layer in enumerate(layers)], dim=1
    )


def pack_rows(rows: torch.Tensor) -> torch.Tensor:
    """The cells of rows [B, R] of 10 bits (bit x: column x; R even) as bytes of 0 or 1
    packed four to an int32 word: int32 [B, 5R / 2], in memory the bytes of bool
    [B, R, 10] (little-endian), which unpack_cells views with no copy.

    Compiled for a CPU, writing an observation four cells a word ran 3x faster than a
    cell a byte (expanding each bit by a shift). Viewing the words as bool is left to
    the caller, outside the compiled graph: inside it, the view costs a copy."""
    b = rows.shape[0]
    pairs = rows.reshape(b, -1, 2)
    twenty = (pairs[..., 0] | (pairs[..., 1] << SIZE)).to(torch.int32)  # 2 rows, 20 bits
    shifts = torch.arange(5, dtype=torch.int32, device=rows.device) * 4
    nibbles = (twenty.unsqueeze(-1) >> shifts) & 0xF
    # n * (1 + 2^7 + 2^14 + 2^21) puts bit k of the nibble on bit 8k, with no carries
    return ((nibbles * 0x204081) & 0x01010101).reshape(b, -1)


def unpack_cells(words: torch.Tensor, channels: int) -> torch.Tensor:
    """pack_rows' words [B, 25 channels] as the bool [B, channels, 10, 10] they hold."""
    return words.view(torch.bool).view(len(words), channels, SIZE, SIZE)


def randint(u: torch.Tensor, low, high) -> torch.Tensor:
    """An integer uniform on [low, high) from a uniform [0, 1): low + floor(u (high - low))
    (int64); `high` may be a tensor."""
    return (low + (u * (high - low)).floor()).long().clamp_max(high - 1)


def lookup(values: tuple[int, ...], index: torch.Tensor) -> torch.Tensor:
    """values[index] for an int64 index tensor and a small table of Python ints: a chain
    of selects, no table tensor (so the step traces with no tensor constants)."""
    out = torch.full_like(index, values[0])
    for i, value in enumerate(values[1:], start=1):
        out = torch.where(index == i, value, out)
    return out
