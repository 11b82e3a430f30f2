"""Collection: iterators of TensorDict batches shaped [num_envs, steps], TorchRL-style.

Native gpurl envs get the LeanCollector: a time loop over the env's lean path and the
policy, with autoreset under masks inside the env, no spec checks and no host reads.
Anything else (Gymnasium tasks through TorchRL) gets TorchRL's stock Collector. Both
yield the same entries: the observation, "action", and ("next", ...) observation,
reward, done, terminated, truncated. tools/bench_collect.py measures the difference.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.envs.base import NativeEnv
from gpurl.errors import ConfigError


class LeanCollector:
    def __init__(self, env: NativeEnv, policy, frames_per_batch: int, total_frames: int = -1):
        if frames_per_batch % env.num_envs:
            raise ConfigError(
                f"trainer.frames_per_batch={frames_per_batch} is not a multiple of "
                f"env.num_envs={env.num_envs}: make it one"
            )
        self.env, self.policy = env, policy
        self.steps = frames_per_batch // env.num_envs
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.obs: TensorDict | None = None

    def rollout(self) -> TensorDict:
        """Collect one batch [num_envs, steps] from where the last one stopped."""
        if self.obs is None:
            self.obs = self.env.lean_reset()
        policy = self.policy
        obs_key, mask_key = policy.obs_key, policy.mask_key
        observations, actions, nexts = [], [], []
        # Per step: one policy call on tensors, one lean env step; the TensorDict for the
        # batch is assembled once at the end by stacking along time.
        with set_exploration_type(ExplorationType.RANDOM):
            obs = self.obs
            for _ in range(self.steps):
                action = policy.act(obs.get(obs_key), obs.get(mask_key) if mask_key else None)
                nxt, next_obs = self.env.lean_step(action)
                observations.append(obs)
                actions.append(action)
                nexts.append(nxt)
                obs = next_obs
        self.obs = obs
        batch = torch.stack(observations, dim=1)
        batch.set(policy.action_key, torch.stack(actions, dim=1))
        batch.set("next", torch.stack(nexts, dim=1))
        return batch

    def __iter__(self):
        frames = 0
        while self.total_frames < 0 or frames < self.total_frames:
            batch = self.rollout()
            frames += self.frames_per_batch
            yield batch


class TorchRLCollector:
    """TorchRL's Collector behind the same small interface (rollout / iteration)."""

    def __init__(self, env, policy, frames_per_batch: int, total_frames: int = -1):
        self.collector = Collector(
            env,
            policy,
            frames_per_batch=frames_per_batch,
            total_frames=total_frames,
            exploration_type=ExplorationType.RANDOM,
            auto_register_policy_transforms=False,
        )
        self.frames_per_batch = frames_per_batch
        self._it = None

    def rollout(self) -> TensorDict:
        if self._it is None:
            self._it = iter(self.collector)
        return next(self._it).exclude("collector")

    def __iter__(self):
        for batch in self.collector:
            yield batch.exclude("collector")


def make_collector(env, policy, frames_per_batch: int, total_frames: int = -1):
    if isinstance(env, NativeEnv):
        return LeanCollector(env, policy, frames_per_batch, total_frames)
    return TorchRLCollector(env, policy, frames_per_batch, total_frames)
