"""The fixed evaluation protocol: 60 episodes (10 per curriculum stage) from seed 253.

A custom curriculum (env.curriculum) gets 10 episodes per stage of its own.

The scenarios are drawn once on the CPU from a generator seeded with 253, so they are the
same on every call and every device; all 60 run side by side, one env each. Perception
noise is reseeded from the same seed before every evaluation, so an evaluation of a
deterministic policy replays identically.

Metrics per episode: success (every robot arrived, none collided or timed out),
collisions and timeouts (robot counts), travel time (0.5 s x steps a robot was running,
averaged over the episode's robots) and energy (sum over its steps of
(|T_L| + |T_R|) x 0.5 s, averaged over the robots). Travel time and energy are
reported over successful episodes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase

from gpurl.envs.base import NativeEnv
from gpurl.envs.marinenav.curriculum import (
    CURRICULUM,
    EVAL_EPISODES_PER_STAGE,
    EVAL_SEED,
    Stage,
    stage_table,
)
from gpurl.envs.marinenav.scenario import sample_scenarios

NUM_EVAL_EPISODES = EVAL_EPISODES_PER_STAGE * len(CURRICULUM)


def evaluation_scenarios(
    max_robots: int = 5,
    max_obstacles: int = 4,
    num_cores: int = 0,
    seed: int = EVAL_SEED,
    curriculum: Sequence[Stage] = CURRICULUM,
) -> dict[str, torch.Tensor]:
    """The evaluation scenarios, 10 per curriculum stage (60 for the default curriculum);
    CPU tensors, stage-major: 10 of stage 0, then 1, ..."""
    gen = torch.Generator()
    gen.manual_seed(seed)
    table = stage_table(curriculum=curriculum)
    stage = torch.arange(len(curriculum)).repeat_interleave(EVAL_EPISODES_PER_STAGE)
    sc = sample_scenarios(
        gen,
        stage.numel(),
        table["robots"][stage],
        table["obstacles"][stage],
        table["min_start_goal_dis"][stage],
        max_robots,
        max_obstacles,
        num_cores,
    )
    sc["stage"] = stage
    return sc


@torch.no_grad()
def run_episodes(
    env: NativeEnv,
    policy: Callable[[TensorDictBase], TensorDictBase],
    scenarios: dict[str, torch.Tensor],
    seed: int = EVAL_SEED,
    check_every: int = 50,
    record: bool = False,
) -> dict[str, torch.Tensor]:
    """Play every env's scenario to its end (no autoreset); per-episode metrics.

    With record=True the result also holds "trajectory" [T + 1, B, R, 2] positions.
    The host checks whether all episodes ended once every `check_every` steps. The
    metrics include each episode's "return" (the root reward, summed over its robots).
    """
    env.load_scenarios(scenarios)
    env.rng.manual_seed(seed)
    obs = env._observation_td()
    path = [torch.stack((env.x, env.y), -1)] if record else None
    returns = torch.zeros(env.num_envs, device=env.device)
    alive = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    for t in range(env.max_episode_steps):
        # the shell's step without autoreset: validated where env.validate_actions is set
        out = env._advance_checked(policy(obs).get(("agents", "action")))
        obs = env._td(out.reached)
        ended = out.terminated | out.truncated
        returns += out.reward.reshape(-1) * alive
        alive &= ~ended.reshape(-1)
        if record:
            path.append(torch.stack((env.x, env.y), -1))
        if (t + 1) % check_every == 0 and bool(ended.all()):
            break
    metrics = env.episode_metrics()
    metrics["return"] = returns
    if record:
        metrics["trajectory"] = torch.stack(path)
    return metrics


def summarize(metrics: dict[str, torch.Tensor]) -> list[dict]:
    """Per-stage summary rows (host floats), plus an "all" row."""
    rows = []
    stage = metrics["stage"].cpu()
    groups = [(int(s), stage == s) for s in stage.unique()] + [
        ("all", torch.ones_like(stage, dtype=torch.bool))
    ]
    for name, sel in groups:
        ok = metrics["success"].cpu()[sel]
        row = {
            "stage": name,
            "episodes": int(sel.sum()),
            "success_rate": round(float(ok.float().mean()), 3),
            "collisions": int(metrics["collisions"].cpu()[sel].sum()),
            "timeouts": int(metrics["timeouts"].cpu()[sel].sum()),
            "travel_time_s": None,
            "energy": None,
        }
        if ok.any():
            row["travel_time_s"] = round(float(metrics["travel_time"].cpu()[sel][ok].mean()), 2)
            row["energy"] = round(float(metrics["energy"].cpu()[sel][ok].mean()), 1)
        rows.append(row)
    return rows


def protocol_metrics(metrics: dict[str, torch.Tensor]) -> dict[str, float]:
    """The flat metrics a training run logs: overall and per stage (`stage<i>/success`),
    plus the mean episode return."""
    rows = summarize(metrics)
    out: dict[str, float] = {"return": float(metrics["return"].mean())}
    for row in rows:
        prefix = "" if row["stage"] == "all" else f"stage{row['stage']}/"
        out[prefix + "success"] = row["success_rate"]
        out[prefix + "collisions"] = row["collisions"]
        out[prefix + "timeouts"] = row["timeouts"]
        for key in ("travel_time_s", "energy"):
            if row[key] is not None:
                out[prefix + key.removesuffix("_s")] = row[key]
    return out
