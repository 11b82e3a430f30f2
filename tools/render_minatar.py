"""A PNG of MinAtar frames: one row per game, frames of one episode under random actions.

    python tools/render_minatar.py --out docs/img/minatar_strip.png
    python tools/render_minatar.py --out /tmp/strip.png --games breakout seaquest --every 2

Each frame is the env's own drawing (MinAtarEnv.render_frames: a cell in the colour of
its highest set channel, on black), so the picture shows what the observation holds.
A row starts at the episode's first frame and takes one frame every --every steps; an
episode that ends early starts over (its frames are marked "new"). Prints one JSON
record.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gpurl.envs import make_env  # noqa: E402
from gpurl.envs.minatar.env import GAMES  # noqa: E402


def game_frames(game: str, frames: int, every: int, seed: int) -> list[tuple[torch.Tensor, str]]:
    """`frames` (image [H, W, 3] uint8, label) of one env under random actions."""
    env = make_env({"name": "minatar", "game": game}, num_envs=1, seed=seed)
    env.lean_reset()
    gen = torch.Generator().manual_seed(seed)
    out, t, fresh = [(env.render_frames()[0], "t=0")], 0, False
    while len(out) < frames:
        action = torch.randint(0, env.action_spec.space.n, (1,), generator=gen)
        nxt, _ = env.lean_step(action)
        t += 1
        fresh = fresh or bool(nxt["done"])
        if t % every == 0:
            out.append((env.render_frames()[0], f"t={t}" + (" new" if fresh else "")))
            fresh = False
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="PNG path")
    p.add_argument("--games", nargs="+", choices=sorted(GAMES), default=sorted(GAMES))
    p.add_argument("--frames", type=int, default=8, help="frames per game")
    p.add_argument("--every", type=int, default=4, help="steps between frames")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    rows = {g: game_frames(g, args.frames, args.every, args.seed) for g in args.games}
    fig, axes = plt.subplots(
        len(rows), args.frames, figsize=(1.3 * args.frames, 1.45 * len(rows)), squeeze=False
    )
    for axes_row, (game, frames) in zip(axes, rows.items(), strict=True):
        for ax, (image, label) in zip(axes_row, frames, strict=True):
            ax.imshow(image.numpy(), interpolation="nearest")
            ax.set_title(label, fontsize=7)
            ax.set_xticks([]), ax.set_yticks([])
        axes_row[0].set_ylabel(game, fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    record = {
        "tool": "render_minatar",
        "out": args.out,
        "games": list(rows),
        "frames": args.frames,
        "every": args.every,
        "seed": args.seed,
        "torch": torch.__version__,
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
