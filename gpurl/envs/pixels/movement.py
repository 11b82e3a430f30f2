"""Player movement at frame level: the button is held for the first frames of a step.

With `frames_per_step` frames per env step and the button released after
`release_after_frames`, a direction button moves the player one pixel per held frame,
i.e. `held = min(release_after_frames, frames_per_step)` pixels, until its 8 x 8 box
would overlap a blocking tile. Released frames change nothing in this world. NOOP, A, B
and START do not move the player.

`move_player` gives the result of all held frames at once (a fixed number of batched ops
whatever `held` is); `move_player_by_frames` steps frame by frame, the literal reading
of the rule, and the tests hold the two equal.
"""

from __future__ import annotations

import functools

import torch

from gpurl.envs.pixels.atlas import BLOCKING, TILE
from gpurl.envs.pixels.worldgen import PAD_LEFT, PAD_TOP

NOOP, A, B, START, UP, DOWN, LEFT, RIGHT = range(8)
ACTION_NAMES = ("NOOP", "A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
_DY = (0, 0, 0, 0, -1, 1, 0, 0)
_DX = (0, 0, 0, 0, 0, 0, -1, 1)


def blocking_map(tiles: torch.Tensor) -> torch.Tensor:
    """bool [N, Hp, Wp]: the tiles the player cannot enter."""
    out = torch.zeros_like(tiles, dtype=torch.bool)
    for tile in BLOCKING:
        out |= tiles == tile
    return out


@functools.cache
def _direction_table(device: torch.device) -> torch.Tensor:
    # built once per device: no host-to-device copy in the step
    return torch.tensor([_DY, _DX], device=device)


def action_directions(action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dy, dx) int64 [N] in {-1, 0, 1} for actions [N]."""
    dy, dx = _direction_table(action.device).index_select(1, action.long().reshape(-1))
    return dy, dx


def _padded(pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return pos[:, 0] + PAD_TOP * TILE, pos[:, 1] + PAD_LEFT * TILE


def _axis_limits(line: torch.Tensor, first: torch.Tensor, last: torch.Tensor):
    """Pixel range the box may take along one axis.

    line: bool [N, L] blocking tiles along the axis (either of the 1-2 tile lines the box
    covers); first/last: [N] the tile indices of the box's near and far edges.
    """
    idx = torch.arange(line.shape[1], device=line.device).view(1, -1)
    ahead = torch.where(line & (idx > last.view(-1, 1)), idx, line.shape[1]).amin(1)
    behind = torch.where(line & (idx < first.view(-1, 1)), idx, -1).amax(1)
    return TILE * (behind + 1), TILE * ahead - TILE


def move_player(
    pos: torch.Tensor, action: torch.Tensor, blocked: torch.Tensor, held: int
) -> torch.Tensor:
    """New player pixels [N, 2] (map coords) after holding `action` for `held` frames."""
    n = pos.shape[0]
    dy, dx = action_directions(action)
    y, x = _padded(pos)
    y0, y1, x0, x1 = y >> 3, (y + TILE - 1) >> 3, x >> 3, (x + TILE - 1) >> 3
    wp, hp = blocked.shape[2], blocked.shape[1]
    row = lambda r: blocked.gather(1, r.view(n, 1, 1).expand(n, 1, wp)).view(n, wp)  # noqa: E731
    col = lambda c: blocked.gather(2, c.view(n, 1, 1).expand(n, hp, 1)).view(n, hp)  # noqa: E731
    x_min, x_max = _axis_limits(row(y0) | row(y1), x0, x1)
    y_min, y_max = _axis_limits(col(x0) | col(x1), y0, y1)
    nx = torch.where(dx > 0, torch.minimum(x + held, x_max), x)
    nx = torch.where(dx < 0, torch.maximum(x - held, x_min), nx)
    ny = torch.where(dy > 0, torch.minimum(y + held, y_max), y)
    ny = torch.where(dy < 0, torch.maximum(y - held, y_min), ny)
    return torch.stack((ny - PAD_TOP * TILE, nx - PAD_LEFT * TILE), -1)


def move_player_by_frames(
    pos: torch.Tensor,
    action: torch.Tensor,
    blocked: torch.Tensor,
    frames_per_step: int,
    release_after_frames: int,
) -> torch.Tensor:
    """The same rule, one frame at a time: try one pixel per held frame, keep it if free."""
    n = pos.shape[0]
    dy, dx = action_directions(action)
    y, x = _padded(pos)
    flat = blocked.view(n, -1)
    wp = blocked.shape[2]

    def free(ty, tx):
        corners = torch.stack(
            [((ty + a) >> 3) * wp + ((tx + b) >> 3) for a in (0, TILE - 1) for b in (0, TILE - 1)],
            -1,
        )
        return ~flat.gather(1, corners).any(1)

    for frame in range(frames_per_step):
        if frame >= release_after_frames:
            break
        ok = free(y + dy, x + dx)
        y = torch.where(ok, y + dy, y)
        x = torch.where(ok, x + dx, x)
    return torch.stack((y - PAD_TOP * TILE, x - PAD_LEFT * TILE), -1)
