"""The on-policy loop: rollout -> GAE -> epochs of minibatch updates (the rest of the
loop is trainers/base.py).

    every iteration (frames_per_batch = rollout_steps x num_envs frames):
        collect a rollout [T, num_envs] with the current policy (actions, log-probs and
        values stored by the policy)
        bootstrap values: V(obs to act on next) for the last step, or V(s_final) of
        every step when trainer.bootstrap_truncated (the collector then keeps the next
        observations, so a truncated episode bootstraps from its final state, not
        from the reset one)
        GAE in one reverse pass (returns.gae), value targets = advantage + value,
        advantages normalised over the rollout when agent.normalize_advantage; or,
        for an agent with its own `targets` (PQN: Q(lambda) returns), those targets
        alone, under "value_target"
        `epochs` passes over a device permutation of the T x num_envs samples, split in
        `minibatches`; agent.update(minibatch, progress) each

`iteration()` is the hot path: no host reads, and after the first iteration no new
buffers beyond the losses' own (the advantage, targets, permutation and minibatch
buffers are allocated once and refilled in place).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from gpurl.core.returns import gae
from gpurl.errors import ConfigError
from gpurl.policies import VALUE
from gpurl.trainers.base import Trainer
from gpurl.trainers.collector import make_collector


class OnPolicyTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cfg, env, agent, info, progress = self.cfg, self.env, self.agent, self.info, self.progress
        if not agent.on_policy:
            raise ConfigError(
                f"agent={agent.name} learns off-policy from a replay: use trainer=off_policy "
                f"with it (trainer=on_policy fits agent=ppo, a2c or pqn)"
            )
        if info.multi_agent:
            raise ConfigError(
                "trainer=on_policy runs on single-agent envs for now: use trainer=off_policy "
                "for multi-robot envs"
            )
        num_envs = env.batch_size.numel()
        self.steps = int(cfg.rollout_steps)
        self.epochs = int(cfg.epochs if cfg.get("epochs") is not None else agent.cfg.epochs)
        self.minibatches = int(
            cfg.minibatches if cfg.get("minibatches") is not None else agent.cfg.minibatches
        )
        for key, value in (
            ("rollout_steps", self.steps),
            ("epochs", self.epochs),
            ("minibatches", self.minibatches),
        ):
            if value < 1:
                raise ConfigError(f"trainer.{key} must be >= 1, got {value}")
        self.frames_per_batch = self.steps * num_envs
        if self.frames_per_batch % self.minibatches:
            raise ConfigError(
                f"trainer.minibatches={self.minibatches} does not divide rollout_steps x "
                f"num_envs = {self.frames_per_batch}: pick a divisor"
            )
        self.minibatch_size = self.frames_per_batch // self.minibatches
        self.bootstrap_truncated = bool(cfg.bootstrap_truncated)
        self.collector = make_collector(
            env,
            self.acting,
            info,
            self.frames_per_batch,
            progress,
            next_obs=self.bootstrap_truncated,
            step=self.step,
        )
        if hasattr(agent, "set_horizon"):
            agent.set_horizon(int(cfg.total_frames))
        # an agent's own return targets (PQN's Q(lambda)) replace GAE and its advantages
        self.gae = not hasattr(agent, "targets")
        self._batch: TensorDict | None = None

    def _allocate(self, batch: TensorDict) -> None:
        value = batch.get(VALUE)
        self.advantage = torch.empty_like(value)
        self.value_target = torch.empty_like(value)
        self.next_value = torch.empty_like(value)
        self.perm = torch.empty(self.frames_per_batch, dtype=torch.long, device=self.device)
        keys = [*self.agent.policy.in_keys, *self.agent.policy.out_keys]
        flat = {
            k: batch.get(k).reshape(self.frames_per_batch, *batch.get(k).shape[2:]) for k in keys
        }
        if self.gae:
            flat["advantage"] = self.advantage.view(-1)
        flat["value_target"] = self.value_target.view(-1)
        self._flat = TensorDict(flat, batch_size=[self.frames_per_batch])
        self._keys = list(flat)
        self._sources = [self._flat.get(k) for k in self._keys]
        self._minibatch = TensorDict(
            {
                k: torch.empty((self.minibatch_size, *v.shape[1:]), dtype=v.dtype, device=v.device)
                for k, v in zip(self._keys, self._sources, strict=True)
            },
            batch_size=[self.minibatch_size],
        )
        self._targets = [self._minibatch.get(k) for k in self._keys]

    # -- the hot path -----------------------------------------------------------------------
    @torch.no_grad()
    def _returns(self, batch: TensorDict) -> None:
        agent, info = self.agent, self.info
        nxt = batch.get("next")
        value = batch.get(VALUE)
        reward = nxt.get(info.reward_key).reshape(value.shape)
        terminated = nxt.get(info.terminated_key).reshape(value.shape)
        done = nxt.get(info.done_key).reshape(value.shape)
        if self.bootstrap_truncated or self.collector.obs is None:
            self.next_value.copy_(agent.value(nxt))
        else:
            # V of the next row is V(s_{t+1}) within an episode; the last row bootstraps
            # from the obs to act on next. Truncation reads the reset obs: treat it as an end.
            self.next_value[:-1].copy_(value[1:])
            self.next_value[-1].copy_(agent.value(self.collector.obs))
            terminated = done
        if not self.gae:
            agent.targets(reward, self.next_value, terminated, done, out=self.value_target)
            return
        gae(
            reward,
            value,
            self.next_value,
            terminated,
            done,
            agent.gamma,
            agent.gae_lambda,
            out=(self.advantage, self.value_target),
        )
        if agent.normalize_advantage:
            mean, std = self.advantage.mean(), self.advantage.std()
            self.advantage.sub_(mean).div_(std + 1e-8)

    def iteration(self) -> None:
        """Collect one rollout and learn from it. No host reads."""
        self.env.set_global_step(self.frames)  # a host int: nothing is read back
        batch = self.collector.rollout()
        if batch is not self._batch:  # the lean collector reuses one buffer: once
            self._allocate(batch)
            self._batch = batch
        self.frames += batch.numel() * self.world  # every rank collected as many
        self.tracker.update(batch)
        self._returns(batch)
        size = self.minibatch_size
        for _ in range(self.epochs):
            torch.randperm(self.frames_per_batch, device=self.device, out=self.perm)
            for i in range(self.minibatches):
                index = self.perm[i * size : (i + 1) * size]
                for src, dst in zip(self._sources, self._targets, strict=True):
                    torch.index_select(src, 0, index, out=dst)
                self.metrics.add(self.agent.update(self._minibatch, self.progress))
                self.progress.updates.add_(1)

    # -- checkpoints --------------------------------------------------------------------------
    def extra_state(self) -> dict:
        return {"collector": self.collector.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.collector.load_state_dict(state["collector"])
