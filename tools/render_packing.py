"""Render packed boxes: shaded heightmaps, item footprints outlined, metrics in the titles.

    python tools/render_packing.py --out docs/packing_heuristic.png
    python tools/render_packing.py --checkpoint RUN_DIR --out docs/packing_learned.png
    python tools/render_packing.py --checkpoint RUN_DIR --policies learned heuristic --out cmp.png

Runs one episode per policy (heuristic, random, or the greedy learned packer of a run
with --checkpoint), all on the same episode (--seed: the same items in the same order)
and, with --checkpoint, on the run's env settings; draws them side by side, one panel per
policy, and prints one JSON record per policy.
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
from gpurl.utils.provenance import gpurl_commit  # noqa: E402

POLICIES = ("learned", "heuristic", "random")


def run_episode(env: PackingEnv, policy) -> tuple[dict, list]:
    """One episode of `policy` on env (1 env): its metrics and the placed footprints."""
    geom = env.geometry
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
    return {k: float(v[0]) for k, v in env.episode_metrics().items()}, boxes


def draw(ax, env: PackingEnv, name: str, m: dict, boxes: list, seed: int, vmax: float) -> None:
    geom = env.geometry
    hm = env.hm[0].numpy()
    l, _, h = geom.box_size
    shade = LightSource(azdeg=315, altdeg=45).shade(
        hm.T,
        cmap=plt.cm.viridis,
        vert_exag=geom.resolution / l,
        blend_mode="soft",
        vmin=0.0,
        vmax=vmax,
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
        f"{name}: packed {int(m['packed'])}/{env.num_objects}, "
        f"util {m['utilisation']:.3f}, C {m['compactness']:.3f}, P {m['pyramidality']:.3f}\n"
        f"max height {m['max_height'] * 100:.1f} cm of {h * 100:.1f} cm, "
        f"R={geom.resolution}, grid {geom.grid_step}, episode seed {seed}",
        fontsize=9,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--policies",
        nargs="+",
        choices=POLICIES,
        default=None,
        help="one panel each (default: learned with --checkpoint, else heuristic)",
    )
    ap.add_argument("--policy", choices=POLICIES, default=None, help="one policy (= --policies P)")
    ap.add_argument("--checkpoint", help="a gpurl run directory: its learned packer and env")
    ap.add_argument("--num-objects", type=int, default=20)
    ap.add_argument("--resolution", type=int, default=200)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="the episode (items and their order)")
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args(argv)
    if args.policy and args.policies:
        ap.error("give --policy or --policies, not both")
    policies = args.policies or [args.policy or ("learned" if args.checkpoint else "heuristic")]
    if "learned" in policies and not args.checkpoint:
        ap.error("the learned policy needs --checkpoint RUN_DIR")
    options = dict(
        num_objects=args.num_objects,
        resolution=args.resolution,
        max_steps=args.max_steps,
        compile_placement=args.compile,
    )
    agent = None
    if args.checkpoint:
        run_cfg, agent = load_trained(args.checkpoint)
        options = {**env_kwargs(run_cfg.env), "compile_placement": args.compile}
    episodes = []
    for name in policies:
        env = PackingEnv(num_envs=1, seed=args.seed, **options)  # the same episode each
        if name == "learned":
            policy = greedy(agent.policy)
        elif name == "heuristic":
            policy = HeuristicPolicy(env.geometry)
        else:
            policy = RandomPolicy(env.geometry, args.seed)
        episodes.append((name, env, *run_episode(env, policy)))
    vmax = max(max(float(env.hm.max()) for _, env, _, _ in episodes), 1e-6)
    n = len(episodes)
    fig, axes = plt.subplots(1, n, figsize=(6.4 * n, 6.4), squeeze=False)
    for ax, (name, env, m, boxes) in zip(axes[0], episodes, strict=True):
        draw(ax, env, name, m, boxes, args.seed, vmax)
    sm = plt.cm.ScalarMappable(cmap=plt.cm.viridis, norm=plt.Normalize(0, vmax * 100))
    fig.colorbar(sm, ax=list(axes[0]), fraction=0.046 / n, pad=0.04, label="height (cm)")
    fig.savefig(args.out, dpi=120, bbox_inches="tight")
    for name, _, m, boxes in episodes:
        record = {
            "out": args.out,
            "policy": name,
            "seed": args.seed,
            "checkpoint": args.checkpoint,
            "commit": gpurl_commit(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "placed_outlines": len(boxes),
            **m,
        }
        print(json.dumps(record))


if __name__ == "__main__":
    main()
