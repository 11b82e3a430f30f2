"""PQN (Gallici et al., ICLR 2025, "Simplifying Deep Temporal Difference Learning").

Q-learning the on-policy way: many envs act epsilon-greedily with one Q-network, a
rollout of T steps is turned into Q(lambda) returns, and a few epochs of minibatch
regression of Q(s_t, a_t) onto them follow. No replay buffer and no target network:
a LayerNorm after each hidden layer is what keeps the bootstrapped regression stable
(the paper's argument), and the targets are fixed for the epochs of one rollout.

It is an on-policy agent (trainers/on_policy.py):

    value(obs)             max_a Q(s, a) over the legal actions: the bootstrap of the
                           rollout's last step, and of every step when
                           agent.bootstrap_truncated keeps the next observations
    compute_targets(...)   the Q(lambda) returns (core/returns.q_lambda), "value_target"

and `update` gets shuffled minibatches holding the observation entries, "action" and
"value_target". The acting pass writes max_a Q(s_t, a) as the state value
(PolicyWrapper write_max_q): the network does not change during a rollout, so that is
max Q(s_{t+1}) for the step before, at no extra forward pass; only the steps whose next
observation is not the one stored next (the last, and truncated ones when bootstrapped
from the final observation) need an extra pass.

Recurrent PQN (agent.recurrent=lstm | gru): encoder -> one recurrent core
(policies/recurrent.py) -> the Q head, as recurrent PPO builds its trunk. The acting
pass stores the state each step began with; minibatches are whole sequences, each
env's rollout or pieces of agent.sequence_length steps (trainers/on_policy.py), and
the core is replayed over each
from its stored first state, the state zeroed after every step that ended an episode.
The Q(lambda) targets are unchanged: max_a Q(s_t, a) was computed by the acting pass
with the state it acted with.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from torch import Tensor

from gpurl.agents.base import (
    OnPolicyAgent,
    clip_and_step,
    make_optimizer,
    require_discrete,
    require_single_agent,
    scalars,
)
from gpurl.agents.config import (
    EpsilonGreedyKeys,
    OnPolicyConfig,
    encoder_key,
    hidden_key,
    max_grad_norm_key,
    recurrent_hidden_key,
    recurrent_key,
    rollout_sequence_key,
)
from gpurl.agents.dqn import masked_q
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.returns import q_lambda
from gpurl.errors import ConfigError
from gpurl.policies import (
    VALUE,
    PolicyWrapper,
    QNetwork,
    SharedFeatures,
    make_encoder,
    make_exploration,
)
from gpurl.policies.networks import EncoderConfig
from gpurl.policies.recurrent import (
    RECURRENT_STATE,
    RecurrentCore,
    features_from,
    next_features,
    replay,
)


@declare(name="pqn", lr=1.0e-4, epochs=4, minibatches=16, epsilon_frames=20000)
class PQNConfig(EpsilonGreedyKeys, OnPolicyConfig):
    """PQN (gpurl/agents/pqn.py), an on-policy agent. Defaults: the paper's CartPole
    settings (purejaxql), which the pqn_cartpole preset shortens."""

    hidden: list[int] = hidden_key([256, 256])
    layer_norm: bool = key(
        True, "LayerNorm after each hidden layer: what replaces the target network"
    )
    q_lambda: float = key(0.95, "Q(lambda) trace; 0 = one-step Q-learning targets", ge=0, le=1)
    reward_scale: float = key(0.1, "rewards are multiplied by this in the targets", gt=0)
    loss: str = key("mse", "mse (0.5 (Q - G)^2) | huber", choices=("mse", "huber"))
    max_grad_norm: float | None = max_grad_norm_key(10.0)
    recurrent: str | None = recurrent_key(
        "between the encoder and the Q head; trained by backpropagation through the "
        "rollout, minibatches of whole sequences (agent.sequence_length)"
    )
    recurrent_hidden: int = recurrent_hidden_key()
    sequence_length: int | None = rollout_sequence_key()
    encoder: EncoderConfig = encoder_key()


@register("agent", "pqn", PQNConfig)
class PQNAgent(OnPolicyAgent):
    name = "pqn"
    many_seeds = True

    def __init__(self, cfg, info, progress, compile=EAGER):
        super().__init__(cfg, info, progress, compile)
        n_actions = require_discrete(info, self.name, "ppo, sac or td3, or a discrete env")
        require_single_agent(info, self.name, "agent=dqn")
        if cfg.loss not in ("mse", "huber"):
            raise ConfigError(f"agent.loss={cfg.loss} is unknown: use mse or huber")
        device = info.device
        self.encoder = self.core = None
        recurrent = cfg.get("recurrent")
        if recurrent:  # N runs' encoders and cores stacked
            self.refuse_recurrent(recurrent)
            encoder = self.runs.build(lambda: make_encoder(info, cfg.get("encoder")))
            self.encoder = encoder.to(device)
            self.core = self.runs.build(lambda: RecurrentCore.for_agent(cfg, encoder, info))

        def trunk():
            if self.core is None:
                return make_encoder(info, cfg.get("encoder"))
            return SharedFeatures(self.core.out_features)  # the core's output

        self.q = self.runs.build(
            lambda: QNetwork(trunk(), n_actions, list(cfg.hidden), layer_norm=bool(cfg.layer_norm))
        ).to(device)
        params = [*self.q.parameters()]
        if self.core is not None:
            params = [*self.encoder.parameters(), *self.core.parameters(), *params]
        self.optimizer = make_optimizer(params, self.lr, self.runs)
        self.policy = PolicyWrapper(
            self.q,
            info,
            progress,
            make_exploration(cfg, info, runs=self.runs),
            write_max_q=True,
            encoder=self.encoder,
            core=self.core,
        ).to(device)
        self.q_lambda = float(cfg.q_lambda)
        self.reward_scale = float(cfg.reward_scale)
        self.mask_key = info.action_mask_key
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        if self.core is None:
            return {"q": self.q}
        return {"encoder": self.encoder, "core": self.core, "q": self.q}

    @property
    def recurrent(self) -> bool:
        return self.core is not None

    def acting_state(self) -> dict[str, Tensor]:
        return {} if self.core is None else {RECURRENT_STATE: self.core.state}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    # -- targets -------------------------------------------------------------------------------
    def max_q(self, obs, q: Tensor) -> Tensor:
        """max_a of Q-values `q` over the legal actions of `obs`."""
        mask = obs.get(self.mask_key) if self.mask_key else None
        return masked_q(q, mask).max(-1).values

    def value(self, obs) -> Tensor:
        """max_a Q(s, a) over the legal actions; recurrent: from the state the policy acts
        with next."""
        if self.core is not None:
            obs = features_from(self.encoder, self.core, obs, self.core.state)
        return self.max_q(obs, self.q(obs))

    def next_values(self, rollout: TensorDict) -> Tensor:
        if self.core is None:
            return super().next_values(rollout)

        def max_q_next(r: TensorDict) -> Tensor:
            nxt = next_features(self.encoder, self.core, r)
            return self.max_q(nxt, self.q(nxt))

        return self.time_major(max_q_next, rollout)

    @torch.no_grad()
    def compute_targets(self, rollout: TensorDict, last_obs) -> TensorDict:
        """The Q(lambda) returns [T, N] of the rollout's rewards x agent.reward_scale."""
        reward, next_value, terminated, done = self.bootstrap(rollout, last_obs)
        if self.core is None:
            out = self.target_buffers(rollout.get(VALUE), "value_target")
        else:  # the sequences' resets ride with the targets
            out = self.target_buffers(rollout.get(VALUE), "value_target", "done")
            out.get("done").copy_(done)
        if self.reward_scale != 1.0:
            reward = reward * self.reward_scale
        target = out.get("value_target")
        gamma = self.runs.per_row(self.gamma, reward[0])  # a float, or per env with N runs
        q_lambda(reward, next_value, terminated, done, gamma, self.q_lambda, target)
        return out

    def learn(self, batch: TensorDict) -> TensorDict:
        """One minibatch gradient step: tensors in, tensors out (compile.update takes it)."""
        cfg = self.cfg
        obs = batch
        if self.core is not None:  # whole sequences [L, n] from the stored first state
            batch, obs = replay(self.encoder, self.core, batch, self.runs.many)
        action = batch.get(self.info.action_key).long().unsqueeze(-1)
        q = self.q(obs).gather(-1, action).squeeze(-1)
        target = batch["value_target"]
        if cfg.loss == "huber":
            loss = F.smooth_l1_loss(q, target)
        else:
            loss = 0.5 * F.mse_loss(q, target)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        return scalars(loss=loss.detach(), q=q.detach().mean(), lr=self.lr.mean())
