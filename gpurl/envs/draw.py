"""Drawing on the device: RGB frames [B, H, W, 3] (uint8) of a batch of envs, each shape
filled where a pixel's centre falls inside it, for every env at once (a coordinate grid
against per-env positions [B], no loop over envs). Positions, sizes and colours are a
number (or a tuple) for all envs or a tensor [B] (colours [B, 3]) per env; a size of 0
draws nothing. The native envs' `render_frames` draw with these."""

from __future__ import annotations

import torch

Color = tuple[int, int, int]


def canvas(batch: int, height: int, width: int, color: Color, device) -> torch.Tensor:
    """Frames [batch, height, width, 3] of one colour."""
    frame = torch.tensor(color, dtype=torch.uint8, device=device)
    return frame.expand(batch, height, width, 3).clone()


def _grid(frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel-centre coordinates x [1, 1, W] and y [1, H, 1] (y grows downwards)."""
    _, h, w, _ = frames.shape
    x = torch.arange(w, device=frames.device, dtype=torch.float32).view(1, 1, w) + 0.5
    y = torch.arange(h, device=frames.device, dtype=torch.float32).view(1, h, 1) + 0.5
    return x, y


def _paint(frames: torch.Tensor, inside: torch.Tensor, color) -> torch.Tensor:
    fill = torch.as_tensor(color, device=frames.device).to(torch.uint8)
    if fill.dim() == 2:  # a colour per env [B, 3]
        fill = fill.view(-1, 1, 1, 3)
    return torch.where(inside.unsqueeze(-1), fill, frames)


def _column(v, device) -> torch.Tensor:
    """A per-env value [B] (or a number) as [B, 1, 1] for the grid."""
    return torch.as_tensor(v, dtype=torch.float32, device=device).reshape(-1, 1, 1)


def boxes(frames, cx, cy, half_w, half_h, color) -> torch.Tensor:
    """Axis-aligned boxes centred at (cx, cy) [B] pixels."""
    x, y = _grid(frames)
    cx, cy = _column(cx, x.device), _column(cy, x.device)
    half_w, half_h = _column(half_w, x.device), _column(half_h, x.device)
    inside = ((x - cx).abs() <= half_w) & ((y - cy).abs() <= half_h) & (half_w > 0)
    return _paint(frames, inside, color)


def discs(frames, cx, cy, radius, color) -> torch.Tensor:
    """Discs centred at (cx, cy) [B] pixels."""
    x, y = _grid(frames)
    cx, cy, radius = (_column(v, x.device) for v in (cx, cy, radius))
    inside = ((x - cx).square() + (y - cy).square() <= radius.square()) & (radius > 0)
    return _paint(frames, inside, color)


def segments(frames, x0, y0, x1, y1, radius, color) -> torch.Tensor:
    """Thick segments (capsules of `radius`) from (x0, y0) to (x1, y1) [B] pixels."""
    return _paint(frames, segment_mask(frames, x0, y0, x1, y1, radius), color)


def segment_mask(frames, x0, y0, x1, y1, radius) -> torch.Tensor:
    """The pixels [B, H, W] a thick segment from (x0, y0) to (x1, y1) [B] covers."""
    x, y = _grid(frames)
    ax, ay, bx, by = (_column(v, x.device) for v in (x0, y0, x1, y1))
    dx, dy = bx - ax, by - ay
    t = (((x - ax) * dx + (y - ay) * dy) / (dx.square() + dy.square()).clamp(min=1e-9)).clamp(0, 1)
    radius = _column(radius, x.device)
    inside = (x - ax - t * dx).square() + (y - ay - t * dy).square() <= radius.square()
    return inside & (radius > 0)
