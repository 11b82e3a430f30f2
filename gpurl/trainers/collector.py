"""Collection: a preallocated time-major buffer [T, num_envs], filled in place.

Envs with a lean path (env.lean_path: native envs, and foreign envs through their
adapter, envs/foreign.py) get the LeanCollector: a time loop over the env's lean path
and the policy (a TensorDict module), with autoreset under masks inside the env, no
spec checks and, for native envs, no host reads. It stores only the keys the policy and
the env declare:

    the policy's inputs (observation entries, masks) and outputs (action, log-prob,
    value), the validity mask of a group slot, and under "next" the reward /
    terminated / truncated / done entries the agent learns from (per robot on
    MarineNav) plus the root reward and done the episode tracker reads; the next
    observation entries only when the agent bootstraps from them (off-policy).

The buffer is allocated at the first step and reused: a rollout's TensorDict is
overwritten by the next one, so consumers copy what they keep (the replay does). The
env state after the rollout stays in `obs`, the observation to act on next (on-policy
agents bootstrap from it). The collector advances the progress record's frame and
episode counters as it steps, on the device.

Anything else (a foreign env on a device whose step_and_maybe_reset reads the host, or
env.collector=torchrl) gets TorchRL's stock Collector, its batches transposed to the
same time-major layout. tools/bench_collect.py measures the difference.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.collectors import Collector
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.core.private import foreach_copy_
from gpurl.core.progress import Progress
from gpurl.envs.hooks import EnvHooks
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError


def collected_keys(info: EnvInfo, policy, next_obs: bool) -> tuple[list, list]:
    """(keys stored per step, keys stored under "next")."""
    now = list(policy.in_keys) + ([info.valid_key] if info.valid_key else [])
    now += list(policy.out_keys)
    learn = [info.reward_key, info.terminated_key, info.truncated_key, info.done_key]
    nxt = list(dict.fromkeys(learn + ["reward", "done"]))
    if next_obs:
        nxt += list(policy.in_keys)
    return list(dict.fromkeys(now)), nxt


def frames_per_batch_steps(frames_per_batch: int, num_envs: int) -> int:
    if frames_per_batch % num_envs:
        raise ConfigError(
            f"trainer.frames_per_batch={frames_per_batch} is not a multiple of "
            f"env.num_envs={num_envs}: make it one, or leave it unset (null) to collect "
            f"one step of every env per batch"
        )
    return frames_per_batch // num_envs


class LeanCollector:
    def __init__(
        self,
        env: EnvHooks,
        policy,
        info: EnvInfo,
        frames_per_batch: int,
        progress: Progress,
        next_obs: bool = True,
        step=None,
        act=None,
    ):
        self.env, self.policy, self.info, self.progress = env, policy, info, progress
        # the env's lean step and the policy, or their compiled forms (compile.env,
        # compile.policy: trainers/compile.py); `policy` declares the keys and hooks
        self.step = step if step is not None else env.lean_step
        self.act = act if act is not None else policy
        self.num_envs = env.batch_size.numel()  # 1 for an unbatched foreign env
        self.steps = frames_per_batch_steps(frames_per_batch, self.num_envs)
        self.frames_per_batch = frames_per_batch
        self.keys, self.next_keys = collected_keys(info, policy, next_obs)
        self.obs: TensorDict | None = None
        self.buffer: TensorDict | None = None
        self._views: list[list[torch.Tensor]] = []

    def _allocate(self, td: TensorDict, nxt: TensorDict) -> None:
        T = self.steps
        now = {k: td.get(k) for k in self.keys}
        later = {k: nxt.get(k) for k in self.next_keys}
        buf = TensorDict(
            {k: torch.zeros((T, *v.shape), dtype=v.dtype, device=v.device) for k, v in now.items()},
            batch_size=[T, *self.env.batch_size],
        )
        buf["next"] = TensorDict(
            {
                k: torch.zeros((T, *v.shape), dtype=v.dtype, device=v.device)
                for k, v in later.items()
            },
            batch_size=[T, *self.env.batch_size],
        )
        self.buffer = buf
        dst = [buf.get(k) for k in self.keys] + [buf.get(("next", *_t(k))) for k in self.next_keys]
        self._views = [[d[t] for d in dst] for t in range(T)]

    def rollout(self) -> TensorDict:
        """Collect one batch [steps, num_envs] from where the last one stopped."""
        if self.obs is None:
            self.obs = self.env.lean_reset()
        policy, act, env, progress = self.policy, self.act, self.env, self.progress
        keys, next_keys = self.keys, self.next_keys
        td = self.obs
        with set_exploration_type(ExplorationType.RANDOM):
            for t in range(self.steps):
                td = act(td)
                nxt, next_td = self.step(td.get(self.info.action_key))
                if self.buffer is None:
                    self._allocate(td, nxt)
                src = [td.get(k) for k in keys] + [nxt.get(k) for k in next_keys]
                foreach_copy_(self._views[t], src)
                done = nxt.get("done").reshape(env.batch_size)
                progress.add_frames(self.num_envs)
                progress.add_episodes(done.sum())
                if policy.stateful:
                    policy.episode_end(done)
                td = next_td
        self.obs = td
        return self.buffer

    def state_dict(self) -> dict:
        # a copy: the pixel env's observation is a uint8 view of its int64 frame words,
        # which the env's own state holds too, and torch.save refuses one storage saved
        # as two dtypes
        return {"obs": None if self.obs is None else self.obs.clone().to_dict()}

    def load_state_dict(self, state: dict) -> None:
        obs = state.get("obs")
        self.obs = None if obs is None else TensorDict(obs, batch_size=self.env.batch_size)


def _t(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


class TorchRLCollector:
    """TorchRL's Collector behind the same small interface, batches made time-major."""

    def __init__(
        self,
        env,
        policy,
        info: EnvInfo,
        frames_per_batch: int,
        progress: Progress,
        next_obs: bool = True,
        step=None,
        act=None,
    ):
        if step is not None:
            raise ConfigError("compile.env compiles native envs' lean steps: set it false")
        frames_per_batch_steps(frames_per_batch, int(env.batch_size.numel()))
        self.collector = Collector(
            env,
            act if act is not None else policy,
            frames_per_batch=frames_per_batch,
            total_frames=-1,
            exploration_type=ExplorationType.RANDOM,
            auto_register_policy_transforms=False,
        )
        self.frames_per_batch = frames_per_batch
        self.progress = progress
        self.obs = None
        self._it = None

    def rollout(self) -> TensorDict:
        if self._it is None:
            self._it = iter(self.collector)
        batch = next(self._it).exclude("collector")
        # TorchRL lays a batched env's frames out [num_envs, steps]; gpurl is time-major
        batch = batch.transpose(0, 1).contiguous() if batch.batch_dims == 2 else batch.unsqueeze(1)
        self.progress.add_frames(batch.numel())
        self.progress.add_episodes(batch.get(("next", "done")).sum())
        return batch

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def require_lean_collector(collector, agent) -> None:
    """A recurrent agent's hidden state restarts with each episode through the lean
    collector's episode_end(done); TorchRL's collector never calls it: refused."""
    if agent.recurrent and not isinstance(collector, LeanCollector):
        raise ConfigError(
            "agent.recurrent resets its hidden state through gpurl's lean collector: "
            "this env runs TorchRL's (env.collector=torchrl or an env without a lean "
            "path); use env.collector=auto with a native env, or drop agent.recurrent"
        )


def make_collector(
    env, policy, info, frames_per_batch: int, progress, next_obs=True, step=None, act=None
):
    """The lean collector for native envs, TorchRL's for others; `step` and `act` are the
    compiled env step and acting policy, when compiled (trainers/compile.py)."""
    cls = LeanCollector if env.lean_path else TorchRLCollector
    return cls(env, policy, info, frames_per_batch, progress, next_obs, step, act)
