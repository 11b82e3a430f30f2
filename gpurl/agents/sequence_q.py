"""What gpurl's recurrent Q-learners share (R2D2, Kapturowski et al. 2019: DQN and IQN
with agent.recurrent): an encoder and a recurrent core before the agent's head, each
with a target copy; the sequence replay they learn from (trainers/sequence_replay.py);
and the two passes every sequence update makes:

- `unroll_window`: the core over a replayed window [W, B] from the state stored at its
  first row, the burn-in's steps without gradient, then the trained and look-ahead steps;
- `bootstrap_features`: the core's output for the observation after each trained step's
  last summed step (n-step), from the state after that step, before a reset (a truncated
  episode's final observation continues its episode's state).

The heads and losses are the agents' own (dqn.py, iqn.py).
"""

from __future__ import annotations

import dataclasses

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from gpurl.agents.base import target_copy
from gpurl.core.replay import ReplaySpec, SequenceSpec
from gpurl.errors import ConfigError
from gpurl.policies import make_encoder
from gpurl.policies.recurrent import RECURRENT_STATE, RecurrentCore


class RecurrentQ:
    """A mixin for an OffPolicyAgent whose encoder and core exist with agent.recurrent
    (`build_recurrent`), None otherwise."""

    encoder: nn.Module | None = None
    core: RecurrentCore | None = None

    def build_recurrent(self, recurrent: str) -> list[tuple[nn.Module, nn.Module]]:
        """The encoder and the core, their target copies, the sequence settings checked;
        the (target, online) pairs for the agent's TargetPairs."""
        cfg, info = self.cfg, self.info
        self.refuse_recurrent(recurrent)
        self.sequence_length, self.burn_in = int(cfg.sequence_length), int(cfg.burn_in)
        self.stride = self.burn_in + self.sequence_length - int(cfg.sequence_overlap)
        if self.stride < 1:
            raise ConfigError(
                f"agent.sequence_overlap={cfg.sequence_overlap} must be below agent.burn_in + "
                f"agent.sequence_length = {self.burn_in + self.sequence_length}: lower it"
            )
        self.eta = float(cfg.priority_eta)
        runs = self.runs  # N runs: each run's encoder and core built from its seed, stacked
        encoder = runs.build(lambda: make_encoder(info, cfg.get("encoder"))).to(info.device)
        self.encoder = encoder
        self.core = runs.build(lambda: RecurrentCore.for_agent(cfg, encoder, info))
        self.encoder_target, self.core_target = target_copy(self.encoder), target_copy(self.core)
        return [(self.encoder_target, self.encoder), (self.core_target, self.core)]

    @property
    def recurrent(self) -> bool:
        return self.core is not None

    @property
    def fuses_draw(self) -> bool:  # sequences are drawn eagerly (trainers/sequence_replay.py)
        return self.core is None

    def recurrent_params(self) -> list[nn.Parameter]:
        if self.core is None:
            return []
        return [*self.encoder.parameters(), *self.core.parameters()]

    def recurrent_modules(self) -> dict[str, nn.Module]:
        if self.core is None:
            return {}
        return {
            "encoder": self.encoder,
            "core": self.core,
            "encoder_target": self.encoder_target,
            "core_target": self.core_target,
        }

    def acting_state(self) -> dict[str, Tensor]:
        return {} if self.core is None else {RECURRENT_STATE: self.core.state}

    def replay_spec(self) -> ReplaySpec:
        spec = super().replay_spec()
        if self.core is None:
            return spec
        sequence = SequenceSpec(self.sequence_length, self.burn_in, self.stride, RECURRENT_STATE)
        return dataclasses.replace(spec, sequence=sequence)

    def unroll_window(
        self, encoder: nn.Module, core: RecurrentCore, batch: TensorDict, start: Tensor, done
    ) -> tuple[Tensor, Tensor]:
        """The core over a batch's windows [B, W] from the stored `start` states: the
        burn-in's first `burn_in` steps without gradient, then the rest (trained and
        look-ahead steps). Returns the rest's outputs and states after each step, before
        its reset, [W - burn_in, B, ...]; `done` is [W, B]."""
        x = encoder(batch).transpose(0, 1)  # [W, B, F]
        b = self.burn_in
        state = start
        if b:
            # the state after the burn-in is a constant to the trained steps: no gradient
            # reaches the burn-in steps, as in R2D2
            with torch.no_grad():
                _, _, state = core.unroll(x[:b], start, done[:b])
        out, after, _ = core.unroll(x[b:], state, done[b:])
        return out, after

    def bootstrap_features(
        self, encoder: nn.Module, core: RecurrentCore, nxt, after: Tensor, last: Tensor
    ) -> Tensor:
        """The core's output [L, B, H] for the observation after each trained step's last
        summed step, from the state after that step (`after` [W - burn_in, B, S], `last`
        [L, B] its index there)."""
        state = after.gather(0, last.unsqueeze(-1).expand(*last.shape, after.shape[-1]))
        if self.runs.many:  # the stacked core steps rows run-major: sequences first
            out, _ = core.step(encoder(nxt), state.transpose(0, 1))
            return out.transpose(0, 1)
        out, _ = core.step(encoder(nxt).transpose(0, 1), state)
        return out
