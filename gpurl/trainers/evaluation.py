"""Evaluation on separate env copies: the env's own protocol when it has one, else one
greedy episode per copy.

`evaluate_protocol(env, policy)` returns host floats: "return" (the mean episode
return, or the protocol's headline figure) and whatever else the env's protocol
reports (MarineNav: success, travel time, energy, collisions, timeouts, overall and
per stage; packing: packed count, utilisation, C, P, max height).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.envs.base import NativeEnv


def first_episode_returns(rollout: TensorDict) -> torch.Tensor:
    """Sum of rewards up to and including each env's first done, for a rollout [N, T]."""
    done = rollout["next", "done"].reshape(*rollout.shape, -1).any(-1).float()
    alive = (done.cumsum(1) - done) == 0  # True until (and at) the first done
    reward = rollout["next", "reward"].reshape(*rollout.shape, -1).sum(-1)
    return (reward * alive).sum(1)


@torch.no_grad()
def evaluate(env, policy, max_steps: int | None = None) -> torch.Tensor:
    """Run every copy of `env` greedily for one episode; return their returns [N]."""
    max_steps = max_steps or env.max_episode_steps
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        if not isinstance(env, NativeEnv):
            # Envs that finish early are reset and stepped on (a vector env may not be
            # stepped past its end); only each env's first episode is counted.
            rollout = env.rollout(max_steps, policy, break_when_any_done=False)
            return first_episode_returns(rollout)
        return env.play_episodes(policy, max_steps)["return"]


def greedy(policy):
    """`policy` as evaluation runs it, for tools that call it themselves: greedy
    (ExplorationType.DETERMINISTIC: means of noisy layers, no epsilon), no gradients."""

    def act(obs):
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            return policy(obs)

    return act


def evaluate_protocol(env, policy) -> dict[str, float]:
    """The env's evaluation protocol, greedy, with the greedy-return fallback."""
    protocol = getattr(env, "evaluation_protocol", None)
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        if protocol is not None:
            return dict(protocol(policy))
    return {"return": evaluate(env, policy).mean().item()}
