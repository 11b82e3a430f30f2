"""Draw one MarineNav episode: trajectories, starts, goals, obstacles and the current field.

Plays an evaluation-set episode (or, with --cores, a fresh scenario of that stage with
vortex currents) under the scripted policy, a random one, or a trained agent's greedy
policy (--run, a run directory or checkpoint), and writes a PNG.

    python tools/plot_marinenav.py --episode 55 --out docs/marinenav_trajectories.png
    python tools/plot_marinenav.py --stage 5 --cores 3 --out /tmp/with_currents.png
    python tools/plot_marinenav.py --run runs/record/marinenav_acqin_s0 --out /tmp/a.png
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv  # noqa: E402
from gpurl.envs.marinenav.currents import rankine_velocity  # noqa: E402
from gpurl.envs.marinenav.curriculum import stage_table  # noqa: E402
from gpurl.envs.marinenav.dynamics import GOAL_RADIUS, ROBOT_RADIUS  # noqa: E402
from gpurl.envs.marinenav.evaluation import evaluation_scenarios, run_episodes  # noqa: E402
from gpurl.envs.marinenav.scenario import WORLD_SIZE, sample_scenarios  # noqa: E402
from gpurl.envs.marinenav.scripted import RandomPolicy, ScriptedPolicy  # noqa: E402
from gpurl.train import load_trained  # noqa: E402
from gpurl.trainers.evaluation import greedy  # noqa: E402


def scenario(args) -> dict[str, torch.Tensor]:
    if args.cores == 0:
        sc = evaluation_scenarios()
        return {k: v[args.episode : args.episode + 1] for k, v in sc.items()}
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    t = stage_table()
    s = torch.tensor([args.stage])
    sc = sample_scenarios(
        gen,
        1,
        t["robots"][s],
        t["obstacles"][s],
        t["min_start_goal_dis"][s],
        num_cores=args.cores,
    )
    sc["stage"] = s
    return sc


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episode", type=int, default=55, help="evaluation-set index, 0..59")
    p.add_argument("--stage", type=int, default=5, help="stage of a --cores scenario")
    p.add_argument("--cores", type=int, default=0, help="vortex cores (fresh scenario)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policy", choices=["scripted", "random"], default="scripted")
    p.add_argument(
        "--run", help="a trained agent's run directory or checkpoint (replaces --policy)"
    )
    p.add_argument(
        "--max-steps", type=int, default=1000, help="episode limit (the protocol's 1000)"
    )
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    sc = scenario(args)
    env_cls, label = MarineNavEnv, args.policy
    if args.run:
        cfg, agent = load_trained(args.run)
        policy, label = greedy(agent.policy), f"{cfg.agent.name} (seed {cfg.seed})"
        if cfg.env.name == "marinenav_continuous":
            env_cls = MarineNavContinuousEnv
    elif args.policy == "scripted":
        policy = ScriptedPolicy()
    else:
        policy = RandomPolicy(seed=args.seed)
    env = env_cls(num_envs=1, num_cores=args.cores, pool_size=16, max_episode_steps=args.max_steps)
    m = run_episodes(env, policy, sc, record=True, check_every=1)
    traj = m["trajectory"][:, 0]  # [T + 1, R, 2]

    fig, ax = plt.subplots(figsize=(7, 7))
    if args.cores > 0:
        g = torch.linspace(0, WORLD_SIZE, 28)
        gx, gy = torch.meshgrid(g, g, indexing="ij")
        cx, cy = rankine_velocity(
            gx.reshape(1, -1), gy.reshape(1, -1), sc["core"], sc["core_gamma"]
        )
        speed = torch.sqrt(cx * cx + cy * cy).clamp_max(3.0)
        # world x is North (drawn up), y is East (drawn right)
        ax.quiver(
            gy.reshape(-1),
            gx.reshape(-1),
            cy.reshape(-1),
            cx.reshape(-1),
            speed.reshape(-1),
            cmap="Blues",
            alpha=0.6,
            scale=60,
        )
    for k in range(sc["obstacle"].shape[1]):
        if sc["obstacle_valid"][0, k]:
            o = sc["obstacle"][0, k]
            ax.add_patch(plt.Circle((o[1], o[0]), float(sc["obstacle_radius"][0, k]), color="k"))
    colors = plt.cm.tab10.colors
    for i in range(traj.shape[1]):
        if not sc["robot_active"][0, i]:
            continue
        col = colors[i % 10]
        path = traj[:, i]
        ax.plot(path[:, 1], path[:, 0], color=col, lw=1.5)
        s, g_ = sc["start"][0, i], sc["goal"][0, i]
        ax.plot(s[1], s[0], "o", color=col)
        ax.add_patch(plt.Circle((g_[1], g_[0]), GOAL_RADIUS, fill=False, color=col, ls="--"))
        end = path[-1]
        outcome = (
            "arrived" if env.arrived[0, i] else ("collided" if env.collided[0, i] else "running")
        )
        ax.add_patch(plt.Circle((end[1], end[0]), ROBOT_RADIUS, fill=False, color=col, lw=1))
        ax.annotate(f"{i}: {outcome}", (end[1], end[0]), fontsize=8, color=col)
    ax.set_xlim(0, WORLD_SIZE)
    ax.set_ylim(0, WORLD_SIZE)
    ax.set_aspect("equal")
    ax.set_xlabel("East (m)")
    ax.set_ylabel("North (m)")
    stage = int(sc["stage"][0])
    ax.set_title(
        f"MarineNav stage {stage}, {label} policy, "
        f"{'eval episode ' + str(args.episode) if args.cores == 0 else 'cores ' + str(args.cores)}"
        f", {int(m['steps'][0])} steps"
    )
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(
        json.dumps(
            {
                "out": args.out,
                "stage": stage,
                "success": bool(m["success"][0]),
                "steps": int(m["steps"][0]),
                "collisions": int(m["collisions"][0]),
            }
        )
    )


if __name__ == "__main__":
    main()
