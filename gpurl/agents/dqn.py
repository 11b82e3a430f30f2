"""DQN with double-Q targets and a dueling head as options (Mnih et al. 2015; van Hasselt
et al. 2016; Wang et al. 2016), n-step returns and prioritized replay from the replay.

With agent.noisy_sigma0 > 0 the Q-network's layers are noisy (policies/noisy.py):
exploration from learned noise, resampled at every update, none in greedy evaluation
(set the epsilon schedule to 0 to explore by the noise alone).

On a multi-robot env every robot's transition is its own sample (one shared Q-network);
on an env with an action mask, the target's max (or double-Q argmax) runs over the
next state's legal actions only.

Recurrent DQN (agent.recurrent=lstm | gru), after R2D2 (Kapturowski et al. 2019): an
encoder, one recurrent core (policies/recurrent.py) and the Q head on its output. The
acting policy carries the hidden state per env (zeroed at episode ends, checkpointed by
the trainer: acting_state) and writes the state each step began with into the replay.
The replay deals sequences (trainers/sequence_replay.py): the stored state at a
sequence's first row, `burn_in` steps that only warm the online and target cores up (no
gradient), `sequence_length` trained steps with n-step double-Q targets, and the n - 1
look-ahead steps those targets read. A sequence's priority mixes its TD errors as
eta max + (1 - eta) mean (core/replay.sequence_priority).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict
from torch import Tensor, nn

from gpurl.agents.base import (
    OffPolicyAgent,
    TargetPairs,
    clip_and_step,
    is_every,
    make_optimizer,
    require_discrete,
    scalars,
    target_copy,
)
from gpurl.agents.config import QLearningConfig, SequenceReplayKeys, recurrent_key
from gpurl.agents.sequence_q import RecurrentQ
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.private import unchecked_tensordict
from gpurl.core.registry import register
from gpurl.core.replay import sequence_priority, weighted_mean
from gpurl.errors import ConfigError
from gpurl.policies import (
    PolicyWrapper,
    QNetwork,
    SharedFeatures,
    make_encoder,
    make_exploration,
    resample_noise,
)
from gpurl.policies.networks import FEATURES
from gpurl.policies.recurrent import RECURRENT_STATE


def masked_q(q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return q if mask is None else q.masked_fill(~mask, float("-inf"))


def dqn_target(q_target_next, q_online_next, reward, discount, double: bool, mask=None):
    """reward + discount * Q_target(s', a*), a* = argmax of Q_online (double) or Q_target,
    over the legal actions of s'. A state with no legal action bootstraps 0."""
    chooser = q_online_next if double else q_target_next
    best = masked_q(chooser, mask).argmax(-1, keepdim=True)
    next_q = q_target_next.gather(-1, best).squeeze(-1)
    if mask is not None:
        next_q = torch.where(mask.any(-1), next_q, 0.0)
    return reward + discount * next_q


# 3-step targets at 2.5e-4: the default run (40k frames of CartPole) ended at a greedy 500
# on seeds 0-4 with them, against 1-step targets at 5e-4's 306-500 (trainer.num_seeds=5)
@declare(name="dqn", lr=2.5e-4, n_step=3)
class DQNConfig(SequenceReplayKeys, QLearningConfig):
    """DQN (gpurl/agents/dqn.py): Double-Q, dueling and noisy options, Polyak or hard
    targets, n-step returns, epsilon-greedy."""

    dueling: bool = key(False, "dueling heads: a state value plus action advantages")
    noisy_sigma0: float = key(
        0.0, "> 0: noisy layers (factorised, this sigma0; Rainbow 0.5), resampled per update", ge=0
    )
    double: bool = key(
        True, "Double-Q: the online net picks the next action, the target net values it"
    )
    loss: str = key("huber", "huber | mse", choices=("huber", "mse"))
    optimizer: str = key(
        "adam",
        "adam | rmsprop: the DQN papers' centred RMSprop (momentum 0.95, eps 0.01; Nature "
        "DQN's and the MinAtar paper's) at agent.lr",
        choices=("adam", "rmsprop"),
    )
    recurrent: str | None = recurrent_key(
        "between the encoder and the Q head, trained from replayed sequences (R2D2)",
        note=("recurrent DQN (R2D2): sequence replay, read with agent.recurrent only",),
    )


@register("agent", "dqn", DQNConfig)
class DQNAgent(RecurrentQ, OffPolicyAgent):
    name = "dqn"
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        n_actions = require_discrete(info, self.name, "sac, td3 or ddpg, or a discrete env")
        sigma0 = float(cfg.get("noisy_sigma0") or 0.0)
        self.noisy = sigma0 > 0
        self.encoder = self.core = None
        recurrent = cfg.get("recurrent")
        if recurrent:
            self.build_q_sequences(recurrent, n_actions, sigma0)
        else:
            self.q = self.runs.build(
                lambda: QNetwork(
                    make_encoder(info, cfg.get("encoder")),
                    n_actions,
                    cfg.hidden,
                    cfg.dueling,
                    sigma0,
                    support=self.make_support(cfg),
                )
            ).to(info.device)
            self.q_target = target_copy(self.q)
            self.targets = TargetPairs((self.q_target, self.q))
        params = [*self.recurrent_params(), *self.q.parameters()]
        lr = self.runs.value("lr", cfg.lr, info.device)
        self.optimizer = make_optimizer(
            params, lr, self.runs, kind=cfg.get("optimizer", "adam"),
            max_grad_norm=cfg.max_grad_norm,
        )  # fmt: skip
        self.policy = PolicyWrapper(
            self.q,
            info,
            progress,
            make_exploration(cfg, info, random_frames, self.runs),
            encoder=self.encoder,
            core=self.core,
        ).to(info.device)
        self.mask_key = info.action_mask_key
        self.learn_step = self.compiled(self.learn if self.core is None else self.learn_sequences)

    # -- recurrent DQN ------------------------------------------------------------------------
    def build_q_sequences(self, recurrent: str, n_actions: int, sigma0: float) -> None:
        """Encoder -> recurrent core -> Q head (on SharedFeatures, the core's output), each
        with a target copy (sequence_q.RecurrentQ builds the first two)."""
        cfg, device = self.cfg, self.info.device
        pairs = self.build_recurrent(recurrent)
        features = self.core.out_features
        self.q = self.runs.build(
            lambda: QNetwork(
                SharedFeatures(features),
                n_actions,
                cfg.hidden,
                cfg.dueling,
                sigma0,
                support=self.make_support(cfg),
            )
        ).to(device)
        self.q_target = target_copy(self.q)
        self.targets = TargetPairs(*pairs, (self.q_target, self.q))

    def refuse_recurrent(self, recurrent: str, robots: bool = False) -> None:
        """The base refusals, and a subclass that changes DQN's loss on transitions
        only."""
        super().refuse_recurrent(recurrent)
        fix = f"drop agent.recurrent={recurrent}"
        agent = type(self)
        if agent.learn is not DQNAgent.learn and agent.learn_sequences is DQNAgent.learn_sequences:
            # a subclass's own loss (soft Q-learning, say) would silently become DQN's
            raise ConfigError(
                f"agent={self.name} changes DQN's loss on transitions but not on sequences "
                f"(learn_sequences): {fix}"
            )

    def modules(self):
        nets = {"q": self.q, "q_target": self.q_target, **self.recurrent_modules()}
        return {**nets, "exploration": self.policy.exploration}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    def make_support(self, cfg) -> torch.Tensor | None:
        """The return distribution's support: none (Q-values) here, C51's in Rainbow."""
        return None

    def update(self, batch: TensorDict, progress) -> TensorDict:
        if self.noisy:  # fresh noise per update, for the online and target networks
            resample_noise(self.q)
            resample_noise(self.q_target)
        metrics = self.learn_step(batch)
        if self.cfg.target_update == "hard" and is_every(progress, self.cfg.target_update_interval):
            self.targets.copy()
        return metrics

    def learn(self, batch: TensorDict) -> TensorDict:
        """One gradient step (and the Polyak target step): tensors in, tensors out, no
        Python state touched, so compile.update / compile.cudagraphs can take it whole."""
        cfg = self.cfg
        nxt = batch["next"]
        mask = nxt.get(self.mask_key) if self.mask_key else None
        with torch.no_grad():
            online_next = self.q(nxt) if cfg.double else None
            target = dqn_target(
                self.q_target(nxt),
                online_next,
                batch["reward"],
                batch["discount"],
                cfg.double,
                mask,
            )
        q = self.q(batch).gather(-1, batch["action"].long().unsqueeze(-1)).squeeze(-1)
        if cfg.loss == "huber":
            elementwise = F.smooth_l1_loss(q, target, reduction="none")
        else:
            elementwise = F.mse_loss(q, target, reduction="none")
        loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(loss=loss.detach(), q=q.detach().mean())
        if cfg.prioritized:  # the replay's new priorities: |TD error|
            metrics.set("priority", (q - target).detach().abs())
        return metrics

    def learn_sequences(self, batch: TensorDict) -> TensorDict:
        """One gradient step on a batch of B sequences (trainers/sequence_replay.py): the
        online and target cores unrolled from each sequence's stored state, the burn-in
        without gradient, a double-Q n-step TD error at each of the L trained steps."""
        cfg, b, L = self.cfg, self.burn_in, self.sequence_length
        done = batch["done"].transpose(0, 1)  # [W, B]
        start = batch[RECURRENT_STATE]
        last = batch["last"].transpose(0, 1) - b  # [L, B]: where each bootstrap is read
        nxt = batch["next"]
        mask = nxt.get(self.mask_key).transpose(0, 1) if self.mask_key else None
        online = (self.encoder, self.core, self.q)
        out, after = self.unroll_window(self.encoder, self.core, batch, start, done)
        with torch.no_grad():
            target_net = (self.encoder_target, self.core_target, self.q_target)
            _, target_after = self.unroll_window(*target_net[:2], batch, start, done)
            online_next = (
                self.bootstrap_q(online, nxt, after.detach(), last) if cfg.double else None
            )
            target = dqn_target(
                self.bootstrap_q(target_net, nxt, target_after, last),
                online_next,
                batch["reward"].transpose(0, 1),
                batch["discount"].transpose(0, 1),
                cfg.double,
                mask,
            )
        action = batch["action"].transpose(0, 1).long().unsqueeze(-1)
        q = self.head(self.q, out[:L]).gather(-1, action).squeeze(-1)  # [L, B]
        if cfg.loss == "huber":
            elementwise = F.smooth_l1_loss(q, target, reduction="none")
        else:
            elementwise = F.mse_loss(q, target, reduction="none")
        # every trained step counts, each sequence weighted by its importance weight
        loss = (batch["weight"] * elementwise.mean(0)).mean()
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(loss=loss.detach(), q=q.detach().mean())
        if cfg.prioritized:
            metrics.set("priority", sequence_priority((q - target).detach(), self.eta))
        return metrics

    def bootstrap_q(self, nets, nxt: TensorDict, after: Tensor, last: Tensor) -> Tensor:
        """Q of the observation after each trained step's last summed step [L, B, A]
        (RecurrentQ.bootstrap_features)."""
        encoder, core, head = nets
        return self.head(head, self.bootstrap_features(encoder, core, nxt, after, last))

    def head(self, q: nn.Module, out: Tensor) -> Tensor:
        """Q-values [L, B, A] of the core's outputs [L, B, H] (the head reads them as
        FEATURES; with N runs sequences first: Agent.time_major)."""

        def values(x: Tensor) -> Tensor:
            return q(unchecked_tensordict({FEATURES: x}, x.shape[:-1], x.device))

        return self.time_major(values, out)
