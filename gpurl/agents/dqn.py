"""DQN with double-Q targets and a dueling head as options (Mnih et al. 2015; van Hasselt
et al. 2016; Wang et al. 2016), n-step returns and prioritized replay from the replay.

With agent.noisy_sigma0 > 0 the Q-network's layers are noisy (policies/noisy.py):
exploration from learned noise, resampled at every update, none in greedy evaluation
(set the epsilon schedule to 0 to explore by the noise alone).

On a multi-robot env every robot's transition is its own sample (one shared Q-network);
on an env with an action mask, the target's max (or double-Q argmax) runs over the
next state's legal actions only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict

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
from gpurl.agents.config import QLearningConfig
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean
from gpurl.policies import (
    PolicyWrapper,
    QNetwork,
    make_encoder,
    make_exploration,
    resample_noise,
)


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


@declare(name="dqn")
class DQNConfig(QLearningConfig):
    """DQN (gpurl/agents/dqn.py): Double-Q, dueling and noisy options, Polyak or hard
    targets, epsilon-greedy."""

    dueling: bool = key(False, "dueling heads: a state value plus action advantages")
    noisy_sigma0: float = key(
        0.0, "> 0: noisy layers (factorised, this sigma0; Rainbow 0.5), resampled per update", ge=0
    )
    double: bool = key(
        True, "Double-Q: the online net picks the next action, the target net values it"
    )
    loss: str = key("huber", "huber | mse", choices=("huber", "mse"))


@register("agent", "dqn", DQNConfig)
class DQNAgent(OffPolicyAgent):
    name = "dqn"
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        n_actions = require_discrete(info, self.name, "sac, td3 or ddpg, or a discrete env")
        sigma0 = float(cfg.get("noisy_sigma0") or 0.0)
        self.noisy = sigma0 > 0
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
        lr = self.runs.value("lr", cfg.lr, info.device)
        self.optimizer = make_optimizer(self.q.parameters(), lr, self.runs)
        self.policy = PolicyWrapper(
            self.q, info, progress, make_exploration(cfg, info, random_frames, self.runs)
        ).to(info.device)
        self.mask_key = info.action_mask_key
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        return {"q": self.q, "q_target": self.q_target, "exploration": self.policy.exploration}

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
        loss = weighted_mean(elementwise, batch)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(loss=loss.detach(), q=q.detach().mean())
        if cfg.prioritized:  # the replay's new priorities: |TD error|
            metrics.set("priority", (q - target).detach().abs())
        return metrics
