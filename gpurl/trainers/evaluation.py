"""Evaluation on separate env copies: the env's declared protocol (envs/hooks.py), greedy.

`evaluate_protocol(env, policy)` returns host floats: "return" (the mean episode
return, or the protocol's headline figure) and whatever else the env's protocol
reports (MarineNav: success, travel time, energy, collisions, timeouts, overall and
per stage; packing: packed count, utilisation, C, P, max height). Envs without a
protocol of their own play one greedy episode per copy (NativeEnv, ForeignEnv).
"""

from __future__ import annotations

import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type


def greedy(policy):
    """`policy` as evaluation runs it, for tools that call it themselves: greedy
    (ExplorationType.DETERMINISTIC: means of noisy layers, no epsilon), no gradients."""

    def act(obs):
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            return policy(obs)

    return act


def evaluate_protocol(env, policy) -> dict[str, float]:
    """The env's evaluation protocol, acting greedily with `policy`."""
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        return dict(env.evaluation_protocol(policy))
