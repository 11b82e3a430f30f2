"""env=pixels: a ROM-free Game-Boy-like tile world rendered on the device (docs/envs/pixels.md).

Functional core: worldgen (maps), atlas (tiles), render (frames), movement, reward,
frame_stack, reset_cache; shell: env.PixelsEnv.
"""

from gpurl.envs.pixels.env import PixelsEnv

__all__ = ["PixelsEnv"]
