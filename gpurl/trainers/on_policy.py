"""The on-policy loop: rollout -> the agent's targets -> epochs of minibatch updates (the
rest of the loop is trainers/base.py). It trains OnPolicyAgents (agents/base.py).

    every iteration (rollout_steps x num_envs frames):
        collect a rollout [T, num_envs] with the current policy (actions, log-probs and
        values stored by the policy); the collector keeps next observations when the
        agent bootstraps truncated episodes from them (agent.bootstrap_truncated)
        targets = agent.compute_targets(rollout, obs to act on next): GAE advantages
        and value targets (PPO, A2C), Q(lambda) returns (PQN)
        agent.epochs passes over a device permutation of the T x num_envs samples,
        split in agent.minibatches; agent.update(minibatch, progress) each

A recurrent agent (agent.recurrent: agent.recurrent_hidden units) learns from
sequences: the rollout's T steps of each env cut into T / L sequences of L =
agent.sequence_length steps (the whole rollout when null), each pass dealing a device
permutation of the num_envs x T / L sequences to the minibatches, and a minibatch
[L, num_envs x T / L / minibatches] (its stored hidden states and done flags included:
the agent replays its core from the state stored at each sequence's first step). With N
runs each run's sequences are shuffled among themselves and every minibatch holds as many
of each run's, run-major along its second dim.

On a multi-robot env a sample is one (step, env) pair with all of its robots: entries
keep their group dim, [minibatch, R, ...], and the agent masks the robots that were not
running (agents/ppo.py).

`iteration()` is the hot path: no host reads, and after the first iteration no new
buffers beyond the losses' own (the targets, permutation and minibatch buffers are
allocated once and refilled in place).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from gpurl.errors import ConfigError
from gpurl.trainers.base import Trainer
from gpurl.trainers.collector import make_collector, require_lean_collector


class OnPolicyTrainer(Trainer):
    """Trains an OnPolicyAgent from rollouts [T, num_envs] (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cfg, env, agent, info, progress = self.cfg, self.env, self.agent, self.info, self.progress
        num_envs = env.batch_size.numel()
        self.steps = int(cfg.rollout_steps)
        if self.steps < 1:
            raise ConfigError(f"trainer.rollout_steps must be >= 1, got {self.steps}")
        self.epochs, self.minibatches = agent.epochs, agent.minibatches
        self.frames_per_batch = self.steps * num_envs
        if self.frames_per_batch % self.minibatches:
            raise ConfigError(
                f"agent.minibatches={self.minibatches} does not divide trainer.rollout_steps x "
                f"env.num_envs = {self.frames_per_batch}: pick a divisor"
            )
        self.minibatch_size = self.frames_per_batch // self.minibatches
        self.sequences = agent.recurrent
        self.num_envs = num_envs
        if self.sequences:
            self._check_sequences(agent.sequence_length)
        elif agent.sequence_length is not None:
            raise ConfigError(
                f"agent.sequence_length={agent.sequence_length} cuts a recurrent agent's "
                f"rollouts: set agent.recurrent=lstm or gru too, or drop it"
            )
        # N runs (core/runs.py): each minibatch holds minibatch_size / N rows of every
        # run, drawn from that run's own envs, run-major
        self.n_runs = progress.runs.n
        if (
            self.sequences
            and self.n_runs > 1
            and (self.seq_count // self.n_runs) % self.minibatches
        ):
            raise ConfigError(
                f"agent.minibatches={self.minibatches} does not divide the "
                f"{self.seq_count // self.n_runs} sequences of one run's rollout: a recurrent "
                f"agent's minibatches are whole sequences; pick a divisor"
            )
        if self.n_runs > 1 and (self.frames_per_batch // self.n_runs) % self.minibatches:
            raise ConfigError(
                f"agent.minibatches={self.minibatches} does not divide trainer.rollout_steps "
                f"x env.num_envs = {self.frames_per_batch // self.n_runs} (one run's rollout): "
                f"pick a divisor"
            )
        self.collector = make_collector(
            env,
            agent.policy,
            info,
            self.frames_per_batch,
            progress,
            next_obs=agent.bootstrap_truncated,
            step=self.step,
            act=self.acting,
        )
        require_lean_collector(self.collector, agent)
        agent.set_horizon(int(cfg.total_frames))
        self._batch: TensorDict | None = None
        self.targets: TensorDict | None = None  # the last rollout's, from the agent

    def _check_sequences(self, length: int | None) -> None:
        """The recurrent minibatches' shape: self.seq_steps steps of self.seq_count
        sequences in all (agent.sequence_length, module docstring)."""
        self.seq_steps = self.steps if length is None else int(length)
        if self.seq_steps < 1 or self.steps % self.seq_steps:
            raise ConfigError(
                f"agent.sequence_length={length} does not divide trainer.rollout_steps="
                f"{self.steps}: pick a divisor, or null for the whole rollout"
            )
        self.seq_count = self.num_envs * (self.steps // self.seq_steps)
        if self.seq_count % self.minibatches:
            whole = "env.num_envs" if length is None else "env.num_envs x rollout_steps / L"
            raise ConfigError(
                f"agent.minibatches={self.minibatches} does not divide the {self.seq_count} "
                f"sequences of a rollout ({whole}): a recurrent agent's minibatches are "
                f"whole sequences; pick a divisor"
            )

    def _allocate(self, batch: TensorDict, targets: TensorDict) -> None:
        """Flat views [T x N] of what minibatches carry, and the minibatch buffers."""
        n = self.frames_per_batch
        if self.sequences:
            return self._allocate_sequences(batch, targets)
        self.perm = torch.empty(n, dtype=torch.long, device=self.device)
        if self.n_runs > 1:  # row (t, k, e) of run k's T x E rows, flat in [T, N x E]
            envs = batch.shape[1] // self.n_runs
            own = torch.arange(n // self.n_runs, device=self.device)
            self._run_rows = (
                (own // envs) * batch.shape[1]
                + torch.arange(self.n_runs, device=self.device).unsqueeze(1) * envs
                + own % envs
            )  # [N, T x E]
            self._keys_rand = torch.empty(self._run_rows.shape, device=self.device)
        keys = [*self.agent.policy.in_keys, *self.agent.policy.out_keys]
        sources = {k: batch.get(k) for k in keys} | {k: targets.get(k) for k in targets.keys()}
        self._keys = list(sources)
        self._sources = [v.reshape(n, *v.shape[2:]) for v in sources.values()]
        self._minibatch = TensorDict(
            {
                k: torch.empty((self.minibatch_size, *v.shape[1:]), dtype=v.dtype, device=v.device)
                for k, v in zip(self._keys, self._sources, strict=True)
            },
            batch_size=[self.minibatch_size],
        )
        self._targets = [self._minibatch.get(k) for k in self._keys]

    def _allocate_sequences(self, batch: TensorDict, targets: TensorDict) -> None:
        """A recurrent agent's minibatch buffers [L, sequences / minibatches], filled by
        one index_select per entry from the rollout's [T, num_envs] entries and targets
        seen flat, [T x num_envs] (`shuffle` computes the rows)."""
        steps, count = self.seq_steps, self.seq_count
        per = count // self.minibatches
        self.perm = torch.empty(count, dtype=torch.long, device=self.device)
        if self.n_runs > 1:  # run k's sequences, of its envs [k E, (k + 1) E): [N, count / N]
            envs, own = self.num_envs // self.n_runs, count // self.n_runs
            j = torch.arange(own, device=self.device)
            first_env = torch.arange(self.n_runs, device=self.device).unsqueeze(1) * envs
            self._run_seqs = (j // envs) * self.num_envs + first_env + j % envs
            self._keys_rand = torch.empty(self._run_seqs.shape, device=self.device)
        # the flat rows of minibatch i, step-major: [minibatches, L x per]
        self._rows = torch.empty(
            self.minibatches, steps * per, dtype=torch.long, device=self.device
        )
        # step t of a sequence lies t x num_envs rows after its first
        self._step_rows = torch.arange(steps, device=self.device).unsqueeze(1) * self.num_envs
        keys = [*self.agent.policy.in_keys, *self.agent.policy.out_keys]
        sources = {k: batch.get(k) for k in keys} | {k: targets.get(k) for k in targets.keys()}
        self._keys = list(sources)
        # views (not copies) of the buffers the collector and the agent refill each time
        self._sources = [v.view(-1, *v.shape[2:]) for v in sources.values()]
        self._minibatch = TensorDict(
            {
                k: torch.empty((steps, per, *v.shape[2:]), dtype=v.dtype, device=v.device)
                for k, v in sources.items()
            },
            batch_size=[steps, per],
        )
        self._targets = [self._minibatch.get(k).view(-1, *v.shape[2:]) for k, v in sources.items()]

    def fill_minibatch(self, i: int) -> TensorDict:
        """Minibatch i of the current pass (after `shuffle`), gathered into its buffers."""
        if self.sequences:
            index = self._rows[i]
        else:
            index = self.perm[i * self.minibatch_size : (i + 1) * self.minibatch_size]
        for src, dst in zip(self._sources, self._targets, strict=True):
            torch.index_select(src, 0, index, out=dst)
        return self._minibatch

    # -- the hot path -----------------------------------------------------------------------
    def iteration(self) -> None:
        """Collect one rollout and learn from it. No host reads."""
        self.env.set_global_step(self.frames)  # a host int: nothing is read back
        batch = self.collector.rollout()
        self.tracker.update(batch)
        self.targets = targets = self.agent.compute_targets(batch, self.collector.obs)
        if batch is not self._batch:  # the lean collector reuses one buffer: once
            self._allocate(batch, targets)
            self._batch = batch
        for _ in range(self.epochs):
            self.shuffle()
            for i in range(self.minibatches):
                self.metrics.add(self.agent.update(self.fill_minibatch(i), self.progress))
                self.progress.add_update()
        # after learning: the rollout was learnt with the statistics it was acted on with
        self.agent.observe(batch)

    def shuffle(self) -> None:
        """A device permutation of the rollout's rows into self.perm; with N runs, each
        run's rows shuffled among themselves and dealt run-major into every minibatch."""
        if self.sequences:  # whole sequences
            if self.n_runs == 1:
                torch.randperm(self.seq_count, device=self.device, out=self.perm)
            else:  # each run's shuffled among themselves, dealt run-major into every minibatch
                order = self._keys_rand.uniform_().argsort(dim=1)
                own = self._run_seqs.gather(1, order).view(self.n_runs, self.minibatches, -1)
                self.perm.copy_(own.transpose(0, 1).reshape(-1))
            # sequence s holds env s % num_envs from step (s // num_envs) L on: its first
            # row in the flat [T x num_envs] rollout is (s // num_envs) L num_envs + s % num_envs
            envs, seq = self.num_envs, self.perm
            start = (seq // envs) * (self.seq_steps * envs) + seq % envs
            rows = start.view(self.minibatches, 1, -1) + self._step_rows  # [mb, L, per]
            self._rows.copy_(rows.view(self.minibatches, -1))
            return
        if self.n_runs == 1:
            torch.randperm(self.frames_per_batch, device=self.device, out=self.perm)
            return
        order = self._keys_rand.uniform_().argsort(dim=1)  # [N, T x E]
        rows = self._run_rows.gather(1, order)
        per = self.minibatch_size // self.n_runs
        # minibatch i = rows[:, i per : (i + 1) per], flattened run-major
        dealt = rows.reshape(self.n_runs, self.minibatches, per).transpose(0, 1)
        self.perm.copy_(dealt.reshape(-1))

    # -- checkpoints --------------------------------------------------------------------------
    def extra_state(self) -> dict:
        return {"collector": self.collector.state_dict(), "acting": self.acting_state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.collector.load_state_dict(state["collector"])
        self.load_acting_state(state.get("acting", {}))  # none in checkpoints before it
