"""PolicyWrapper: the batched TensorDict module that turns observations into env actions.

td in, td out: it reads the observation entries (and the action mask) of an EnvInfo,
and writes the action at the env's action key, plus what the agent stores with it
(the log-probability and the state value of on-policy agents; for PQN, max_a Q(s, a)
read off the Q-values it acts on). One module acts for a batch of envs or a batch of
envs x robots: every network keeps the leading dims.

It composes three things:
- a network whose `kind` says how to act with it: "q" (greedy argmax under the action
  mask), "categorical" (logits: sample, or argmax when greedy), "deterministic" (an
  action in [-1, 1]^d) or "stochastic" (`sample()` draws an action and its log-prob,
  `forward` is the greedy action);
- exploration modules applied in turn while exploring (exploration.py), reading the
  progress record's frame counter;
- for continuous actions, the map from [-1, 1]^d to the env's bounds.

Exploration follows TorchRL's global exploration type: inside
`set_exploration_type(ExplorationType.DETERMINISTIC)` (evaluation) the action is
greedy; under RANDOM, or outside any context, the policy explores.

ActingPolicy is what every policy a collector acts with declares (PolicyWrapper,
packing's hierarchical policy): its input and output keys, and the hooks the collector
and the trainer call, with defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs.utils import ExplorationType, exploration_type

from gpurl.core.progress import Progress
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError
from gpurl.policies.exploration import Exploration
from gpurl.policies.networks import FEATURES, with_features
from gpurl.policies.recurrent import IS_INIT, RECURRENT_STATE, RecurrentCore

LOG_PROB = "sample_log_prob"
VALUE = "state_value"


def sample_categorical(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An action drawn from softmax(logits) by the Gumbel-max trick, and its log-prob.

    No host reads (torch.distributions validates its arguments on the host) and one
    fused pass: argmax(logits + Gumbel noise) is distributed as softmax(logits).
    """
    u = torch.rand_like(logits).clamp_(1e-20, 1.0)
    action = (logits - (-u.log()).log()).argmax(-1)
    log_prob = logits.log_softmax(-1).gather(-1, action.unsqueeze(-1)).squeeze(-1)
    return action, log_prob


def exploring() -> bool:
    return exploration_type() in (None, ExplorationType.RANDOM)


class ActingPolicy(TensorDictModuleBase):
    """td in, td out: reads `in_keys`, writes `out_keys` (the action first).

    The collector calls episode_end(done) after each step when `stateful` (exploration
    or a recurrent state that must restart with an episode); evaluation calls
    start_evaluation() before it plays; the trainer logs `epsilon()` when not None.
    A compiled acting form (trainers/compile.compile_policy) is called in its place;
    these declarations stay the eager policy's."""

    in_keys: list
    out_keys: list
    stateful: bool = False

    def episode_end(self, done: torch.Tensor) -> None:
        """Restart per-episode exploration state where done [*env batch] is True."""

    def start_evaluation(self) -> None:
        """Greedy episodes from a reset follow: drop what earlier greedy calls left
        (a recurrent policy's evaluation state)."""

    def epsilon(self) -> torch.Tensor | None:
        """The current epsilon of epsilon-greedy exploration (a device scalar), or None."""
        return None


class PolicyWrapper(ActingPolicy):
    """The acting policy most agents use: one network acting for a whole batch of envs
    (or envs x robots), with exploration composed around it.

    `network.kind` says what it is: "q" (Q-values [.., A], greedy argmax over the legal
    actions), "categorical" (logits [.., A], sampled while exploring), "deterministic"
    or "stochastic" (an action in [-1, 1]^d, scaled to the env's bounds). Exploration
    modules (epsilon-greedy, Gaussian, Ornstein-Uhlenbeck) act only inside an exploring
    context and read the progress record's frame counter. Writes the action (at the
    env's action key: [B] or [B, R] discrete, [B, d] or [B, R, d] continuous) and, for
    on-policy agents, "sample_log_prob" and "state_value" of the same batch shape.
    """

    def __init__(
        self,
        network: nn.Module,
        info: EnvInfo,
        progress: Progress,
        exploration: Sequence[Exploration] = (),
        value: nn.Module | None = None,
        write_log_prob: bool = False,
        write_max_q: bool = False,
        encoder: nn.Module | None = None,
        core: RecurrentCore | None = None,
    ):
        super().__init__()
        self.network = network
        # a trunk the network and the value head share (built on SharedFeatures): run
        # once per step, its features handed to both (PPO's agent.shared_encoder)
        self.encoder = encoder
        # a recurrent core on the shared trunk's features (policies/recurrent.py): it
        # carries a hidden state per env and writes the one each step began with
        if core is not None and encoder is None:
            raise ConfigError("a recurrent core runs on a shared encoder's features")
        self.core = core
        # a multi-robot env's mask of the robots still running: a stopped one's state is 0
        self.running_key = info.valid_key if core is not None else None
        self.kind = network.kind
        self.discrete = info.discrete
        if self.discrete != (self.kind in ("q", "categorical")):
            raise ConfigError(
                f"a {self.kind} network cannot act in a {info.action_kind()} action space"
            )
        self.action_key, self.mask_key = info.action_key, info.action_mask_key
        self.progress = progress
        self.exploration = nn.ModuleList(exploration)
        self.stateful = core is not None or any(m.stateful for m in self.exploration)
        if write_max_q and (self.kind != "q" or value is not None):
            raise ConfigError("write_max_q needs a Q-network and no separate value network")
        self.value = value
        self.write_log_prob = write_log_prob
        # PQN's Q(lambda) bootstraps from max_a Q(s, a): the acting pass computes it anyway
        self.write_max_q = write_max_q
        self.in_keys = list(info.input_keys)
        if self.running_key is not None and self.running_key not in self.in_keys:
            self.in_keys.append(self.running_key)  # the core reads it: a traced policy too
        self.out_keys = [self.action_key] + ([LOG_PROB] if write_log_prob else [])
        self.out_keys += [VALUE] if value is not None or write_max_q else []
        self.out_keys += [RECURRENT_STATE] if core is not None else []
        if not self.discrete:
            low, high = info.action_bounds
            self.register_buffer("low", low.to(info.device))
            self.register_buffer("high", high.to(info.device))
            # both maps as one multiply-add each (addcmul): an update unscales its batch's
            # actions, and five elementwise ops cost a small network's update about 1%
            half, mid = (high - low) / 2, (high + low) / 2
            maps = {"half_range": half, "middle": mid, "to_unit": 1 / half, "unit_at": -mid / half}
            for name, value in maps.items():
                self.register_buffer(name, value.to(info.device), persistent=False)

    # -- action scaling -----------------------------------------------------------------
    def scale(self, action: torch.Tensor) -> torch.Tensor:
        """[-1, 1]^d -> env bounds: mid + half-range x action."""
        return torch.addcmul(self.middle, action, self.half_range)

    def unscale(self, action: torch.Tensor) -> torch.Tensor:
        """env bounds -> [-1, 1]^d (what critics consume): (action - mid) / half-range."""
        return torch.addcmul(self.unit_at, action, self.to_unit)

    # -- acting ---------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, td: TensorDictBase, frames: torch.Tensor | None = None) -> TensorDictBase:
        """Act on `td`; exploration schedules read `frames` (the progress record's
        counter unless given: a compiled policy passes it as an input)."""
        explore = exploring()
        mask = td.get(self.mask_key) if self.mask_key else None
        obs = with_features(self.encoder, td)
        if self.core is not None:
            # exploring (the collector) moves the training state, greedy calls their own
            running = td.get(self.running_key) if self.running_key is not None else None
            out, began = self.core.act(obs.get(FEATURES), explore, td.get(IS_INIT, None), running)
            obs.set(FEATURES, out)
            td.set(RECURRENT_STATE, began)
        action, log_prob, scores = self._act(obs, mask, explore)
        if explore:
            frames = self.progress.frames if frames is None else frames
            for module in self.exploration:
                action = module(action, td, frames, mask)
        if not self.discrete:
            action = self.scale(action.clamp(-1.0, 1.0))
        td.set(self.action_key, action)
        if self.write_log_prob:
            td.set(LOG_PROB, log_prob)
        if self.value is not None:
            td.set(VALUE, self.value(obs))
        elif self.write_max_q:
            td.set(VALUE, scores.max(-1).values)
        return td

    @torch.no_grad()
    def greedy_step(self, td: TensorDictBase, state: torch.Tensor):
        """(the greedy action for `td`, the recurrent state after it) from `state`
        [*batch, S], restarted where td's "is_init" marks an episode's first step: a
        step that reads and writes no state of the policy's own (what export traces)."""
        mask = td.get(self.mask_key) if self.mask_key else None
        obs = with_features(self.encoder, td)
        running = td.get(self.running_key) if self.running_key is not None else None
        began = self.core.restart(state, td.get(IS_INIT, None), running)
        out, state = self.core.step(obs.get(FEATURES), began)
        action = self._act(obs.set(FEATURES, out), mask, explore=False)[0]
        return (action if self.discrete else self.scale(action.clamp(-1.0, 1.0))), state

    def _act(self, td, mask, explore):
        """(action, log-prob or None, the masked Q-values or logits or None)."""
        kind = self.kind
        if kind in ("q", "categorical"):
            scores = self.network(td)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            if kind == "categorical" and explore:
                return *sample_categorical(scores), scores
            return scores.argmax(-1), None, scores
        if kind == "stochastic" and explore:
            return *self.network.sample(td), None
        return self.network(td), None, None

    def episode_end(self, done: torch.Tensor) -> None:
        """Tell stateful exploration (OU noise) and the recurrent core which envs start
        a new episode."""
        for module in self.exploration:
            module.episode_end(done)
        if self.core is not None:
            self.core.episode_end(done)

    def start_evaluation(self) -> None:
        if self.core is not None:
            self.core.start_evaluation()

    def epsilon(self) -> torch.Tensor | None:
        """The current epsilon (a device scalar), for logging; None without epsilon-greedy."""
        for module in self.exploration:
            rate = module.epsilon(self.progress.frames)
            if rate is not None:
                return rate
        return None
