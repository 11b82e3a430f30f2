"""ForeignEnv: any TorchRL EnvBase (a Gymnasium task, an env a user brings) as a gpurl env.

It is a TransformedEnv over the foreign env (the transform moves data between the env's
device and gpurl's, or does nothing), so TorchRL's collector and `rollout` run it as
they would the env itself, and it carries the declared gpurl hooks (envs/hooks.py) with
their defaults:

    evaluation_protocol   greedy episodes: each env's first episode return, rolled out
                          for at most max_episode_steps (envs that finish early are
                          reset and stepped on: a vector env may not be stepped past
                          its end)
    validate_actions      checked at every step of the TorchRL face, as native envs do

This module is the one place in gpurl that asks a foreign env what it has (`getattr`),
in `as_gpurl_env`: everything else calls the declared hooks.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import EnvBase, Transform, TransformedEnv

from gpurl.envs.hooks import EnvHooks


def first_episode_returns(rollout: TensorDict) -> torch.Tensor:
    """Sum of rewards up to and including each env's first done, for a rollout [N, T]."""
    done = rollout["next", "done"].reshape(*rollout.shape, -1).any(-1).float()
    alive = (done.cumsum(1) - done) == 0  # True until (and at) the first done
    reward = rollout["next", "reward"].reshape(*rollout.shape, -1).sum(-1)
    return (reward * alive).sum(1)


class ForeignEnv(EnvHooks, TransformedEnv):
    """A TorchRL env with gpurl's hooks; `transform` (optional) sits between them."""

    def __init__(
        self,
        env: EnvBase,
        transform: Transform | None = None,
        max_episode_steps: int = 1000,
    ):
        super().__init__(env, transform)
        self.max_episode_steps = int(max_episode_steps)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.validate_actions:  # a Python flag: the check's host read only when asked
            self.check_action(tensordict.get(self.action_key))
        return super()._step(tensordict)

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """The mean of each env's first greedy episode return."""
        rollout = self.rollout(self.max_episode_steps, policy, break_when_any_done=False)
        if rollout.batch_dims == 1:  # an unbatched env: [T] -> [1, T]
            rollout = rollout.unsqueeze(0)
        return {"return": first_episode_returns(rollout).mean().item()}


def as_gpurl_env(env: EnvBase, max_episode_steps: int | None = None) -> EnvHooks:
    """`env` itself if it already carries gpurl's hooks, else wrapped in a ForeignEnv.
    The episode cap is `max_episode_steps`, else the env's own attribute of that name
    (Gymnasium's registry value, say), else 1000."""
    if isinstance(env, EnvHooks):
        return env
    steps = max_episode_steps or getattr(env, "max_episode_steps", None) or 1000
    return ForeignEnv(env, max_episode_steps=int(steps))
