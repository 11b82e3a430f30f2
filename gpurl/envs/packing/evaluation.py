"""Per-episode packing metrics over a fixed set of episodes, batched across envs.

One episode per env: the env's seed fixes the items of every episode, so two policies
evaluated on envs built with the same options and seed see the same episodes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from gpurl.envs.base import NativeEnv
from gpurl.envs.packing.geometry import PackingGeometry

Policy = Callable[[TensorDictBase], TensorDictBase]


@torch.no_grad()
def episode_metrics(
    env: NativeEnv, policy_factory: Callable[[PackingGeometry], Policy]
) -> dict[str, torch.Tensor]:
    """Run one episode in every env; metrics [B] as they stood when each episode ended."""
    policy = policy_factory(env.geometry)
    td = env.reset()
    final = None
    ended = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    for t in range(env.max_episode_steps):
        if t > 0 and bool(ended.all()):  # one host read a step: an offline tool, not the hot path
            break
        td = env.step(policy(td))
        done = td["next", "done"].squeeze(-1)
        now = env.episode_metrics()
        first = done & ~ended
        if final is None:
            final = now
        final = {k: torch.where(first, now[k], final[k]) for k in now}
        ended = ended | done
        td = td["next"].exclude("reward", "done", "terminated", "truncated")
    return final


def evaluate(env: NativeEnv, policy_factory: Callable[[PackingGeometry], Policy]) -> dict:
    """Means over the env's episodes (one per env) of packed, success, utilisation, C, P
    and max height; read on the host once, at the end."""
    per_episode = episode_metrics(env, policy_factory)
    return {k: float(v.mean()) for k, v in per_episode.items()}
