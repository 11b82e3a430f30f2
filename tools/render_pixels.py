"""A PNG strip of one env=pixels episode: frames along a shortest path, then the goal frame.

    python tools/render_pixels.py --out docs/pixels_strip.png --seed 6

The episode follows a breadth-first shortest path over the tile map (computed here on
the host: this is a picture tool, not the hot path) and then waits on the goal tile with
NOOP until the goal-template counter ends the episode. Prints one JSON record.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

from gpurl.envs.pixels import PixelsEnv  # noqa: E402
from gpurl.envs.pixels.atlas import BLOCKING, TILE  # noqa: E402
from gpurl.envs.pixels.movement import ACTION_NAMES, DOWN, LEFT, NOOP, RIGHT, UP  # noqa: E402
from gpurl.envs.pixels.worldgen import PAD_LEFT, PAD_TOP  # noqa: E402

# The classic Game Boy greens, lightest (shade 0) to darkest (shade 3).
PALETTE = ListedColormap(["#e0f8d0", "#88c070", "#346856", "#081820"])


def shortest_path_actions(tiles: torch.Tensor, start, goal) -> list[int]:
    grid = tiles.tolist()
    moves = {(-1, 0): UP, (1, 0): DOWN, (0, -1): LEFT, (0, 1): RIGHT}
    came = {start: None}
    todo = deque([start])
    while todo:
        cell = todo.popleft()
        if cell == goal:
            break
        for (dr, dc), action in moves.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in came and grid[nxt[0]][nxt[1]] not in BLOCKING:
                came[nxt] = (cell, action)
                todo.append(nxt)
    actions = []
    cell = goal
    while came[cell] is not None:
        cell, action = came[cell]
        actions.append(action)
    return actions[::-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="PNG path")
    p.add_argument("--seed", type=int, default=6, help="world seed")
    p.add_argument("--max-frames", type=int, default=12, help="frames in the strip (+ goal)")
    p.add_argument("--map-height", type=int, default=16)
    p.add_argument("--map-width", type=int, default=16)
    p.add_argument("--wall-prob", type=float, default=0.25)
    args = p.parse_args(argv)

    env = PixelsEnv(
        num_envs=1,
        seed=args.seed,
        map_height=args.map_height,
        map_width=args.map_width,
        wall_prob=args.wall_prob,
        info_mode="full",
    )
    obs = env.lean_reset()
    cell = lambda pos: (int(pos[0]) // TILE + PAD_TOP, int(pos[1]) // TILE + PAD_LEFT)  # noqa: E731
    plan = shortest_path_actions(env.tiles[0], cell(env.pos[0]), cell(env.goal_pos[0]))
    frames = [(obs["pixels"][0, -1], "start")]
    rewards = []
    for t in range(env.max_episode_steps):
        action = plan[t] if t < len(plan) else NOOP
        nxt, obs = env.lean_step(torch.tensor([action]))
        rewards.append(round(float(nxt["reward"]), 3))
        label = f"t={t + 1} {ACTION_NAMES[action]}\nd={float(nxt['info', 'dist']):.3f}"
        frames.append((nxt["pixels"][0, -1], label))
        if bool(nxt["done"]):
            break
    if len(frames) > args.max_frames:
        keep = torch.linspace(0, len(frames) - 1, args.max_frames).round().long().tolist()
        frames = [frames[i] for i in keep]
    frames.append((env.goal_frame[0], "goal frame"))

    fig, axes = plt.subplots(1, len(frames), figsize=(1.6 * len(frames), 1.9))
    for ax, (frame, label) in zip(axes, frames, strict=True):
        ax.imshow(frame.numpy(), cmap=PALETTE, vmin=0, vmax=3, interpolation="nearest")
        ax.set_title(label, fontsize=7)
        ax.axis("off")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=150)
    record = {
        "tool": "render_pixels",
        "out": args.out,
        "seed": args.seed,
        "path_length": len(plan),
        "episode_steps": len(rewards),
        "terminated": bool(nxt["terminated"]),
        "return": round(sum(rewards), 3),
        "torch": torch.__version__,
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
