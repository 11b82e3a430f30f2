"""Evaluation on separate env copies: the env's declared protocol (envs/hooks.py), greedy.

`evaluate_protocol(env, policy)` returns host floats: "return" (the mean episode
return, or the protocol's headline figure) and whatever else the env's protocol
reports (MarineNav: success, travel time, energy, collisions, timeouts, overall and
per stage; packing: packed count, utilisation, C, P, max height). Envs without a
protocol of their own play one greedy episode per copy (NativeEnv, ForeignEnv).

Each evaluation first tells the policy (`ActingPolicy.start_evaluation`): a recurrent
policy restarts its evaluation hidden state from zeros, leaving the training one alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.policies.wrapper import ActingPolicy


@contextmanager
def greedy_mode() -> Iterator[None]:
    """How evaluation acts: ExplorationType.DETERMINISTIC (means of noisy layers, no
    epsilon) and no gradients."""
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        yield


def start_evaluation(policy) -> None:
    """Fresh greedy episodes ahead: the policy drops state from earlier greedy calls."""
    if isinstance(policy, ActingPolicy):
        policy.start_evaluation()


def greedy(policy):
    """`policy` as evaluation runs it, for tools that call it themselves."""
    start_evaluation(policy)

    def act(obs):
        with greedy_mode():
            return policy(obs)

    return act


def evaluate_protocol(env, policy) -> dict[str, float]:
    """The env's evaluation protocol, acting greedily with `policy`."""
    start_evaluation(policy)
    with greedy_mode():
        return dict(env.evaluation_protocol(policy))


def evaluate_by_run(env, policy, runs: int) -> list[dict[str, float]]:
    """N runs' evaluations in one pass, greedily: `env` holds N x eval_envs copies and
    `policy` is the runs' stacked policy (EnvHooks.evaluation_by_run)."""
    start_evaluation(policy)
    with greedy_mode():
        return env.evaluation_by_run(policy, runs)
