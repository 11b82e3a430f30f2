"""Render a packed box: shaded heightmap, item footprints outlined, metrics in the title.

    python tools/render_packing.py --out docs/packing_heuristic.png
    python tools/render_packing.py --checkpoint RUN_DIR --out docs/packing_learned.png
Runs one heuristic episode (or --policy random, or the greedy learned packer of a run
with --checkpoint, on the run's env settings) and prints one JSON record.
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import LightSource  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from gpurl.envs import env_kwargs  # noqa: E402
from gpurl.envs.packing.baselines import HeuristicPolicy, RandomPolicy  # noqa: E402
from gpurl.envs.packing.env import PackingEnv  # noqa: E402
from gpurl.train import load_trained  # noqa: E402
from gpurl.trainers.evaluation import greedy  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--policy", choices=["heuristic", "random", "learned"], default=None)
    ap.add_argument("--checkpoint", help="a gpurl run directory: draw its learned packer")
    ap.add_argument("--num-objects", type=int, default=20)
    ap.add_argument("--resolution", type=int, default=200)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args(argv)
    args.policy = args.policy or ("learned" if args.checkpoint else "heuristic")
    if (args.policy == "learned") != bool(args.checkpoint):
        ap.error("--policy learned goes with --checkpoint RUN_DIR (and only it)")
    options = dict(
        num_objects=args.num_objects,
        resolution=args.resolution,
        max_steps=args.max_steps,
        compile_placement=args.compile,
    )
    if args.checkpoint:
        run_cfg, agent = load_trained(args.checkpoint)
        options = {**env_kwargs(run_cfg.env), "compile_placement": args.compile}
    env = PackingEnv(num_envs=1, seed=args.seed, **options)
    geom = env.geometry
    if args.policy == "learned":
        policy = greedy(agent.policy)
    elif args.policy == "heuristic":
        policy = HeuristicPolicy(geom)
    else:
        policy = RandomPolicy(geom, args.seed)
    td = env.reset()
    boxes = []
    for _ in range(env.max_episode_steps):
        td = policy(td)
        slot, ori, ix, iy = td["action"][0].tolist()
        pid = int(td["items"][0, td["candidates"][0, slot]])
        before = int(env.packed.sum())
        td = env.step(td)
        if int(env.packed.sum()) > before:
            w, h = geom.pool.footprint[pid, ori].tolist()
            boxes.append((ix * geom.grid_step, iy * geom.grid_step, w, h))
        if td["next", "done"].all():
            break
        td = td["next"].exclude("reward", "done", "terminated", "truncated")
    m = {k: float(v[0]) for k, v in env.episode_metrics().items()}
    hm = env.hm[0].numpy()
    l, _, h = geom.box_size
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    shade = LightSource(azdeg=315, altdeg=45).shade(
        hm.T,
        cmap=plt.cm.viridis,
        vert_exag=geom.resolution / l,
        blend_mode="soft",
        vmin=0.0,
        vmax=max(float(hm.max()), 1e-6),
    )
    ax.imshow(shade, origin="lower", extent=(0, l * 100, 0, l * 100))
    sep_cm = geom.sep * 100
    for x, y, w, hh in boxes:
        ax.add_patch(
            Rectangle(
                (x * sep_cm, y * sep_cm), w * sep_cm, hh * sep_cm, fill=False, lw=0.8, ec="white"
            )
        )
    ax.set_xlabel("x (cm)")
    ax.set_ylabel("y (cm)")
    ax.set_title(
        f"{args.policy}: packed {int(m['packed'])}/{env.num_objects}, "
        f"util {m['utilisation']:.3f}, C {m['compactness']:.3f}, P {m['pyramidality']:.3f}\n"
        f"max height {m['max_height'] * 100:.1f} cm of {h * 100:.1f} cm, "
        f"R={geom.resolution}, grid {geom.grid_step}, seed {args.seed}",
        fontsize=9,
    )
    sm = plt.cm.ScalarMappable(cmap=plt.cm.viridis, norm=plt.Normalize(0, float(hm.max()) * 100))
    fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.04, label="height (cm)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(
        json.dumps(
            {
                "out": args.out,
                "policy": args.policy,
                "seed": args.seed,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
                "placed_outlines": len(boxes),
                **m,
            }
        )
    )


if __name__ == "__main__":
    main()
