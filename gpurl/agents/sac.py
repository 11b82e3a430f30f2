"""SAC (Haarnoja et al. 2018) with twin critics and a learned temperature.

The temperature alpha = exp(log_alpha) is tuned toward the target entropy -|A|. The
actor's log-probabilities carry the exact tanh correction (heads.TanhGaussianActor),
matching its squash.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict

from gpurl.agents.base import (
    OffPolicyAgent,
    TargetPairs,
    clip_and_step,
    make_optimizer,
    require_continuous,
    scalars,
    target_copy,
)
from gpurl.agents.config import ContinuousOffPolicyConfig, lr_key
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean
from gpurl.policies import Critic, PolicyWrapper, TanhGaussianActor, make_encoder, make_exploration


def temperature_loss(
    log_alpha, logp, target_entropy: float, batch, uniform: bool = False
) -> torch.Tensor:
    """-log_alpha (log pi + H_target): descending it raises alpha while the policy's
    entropy -log pi is below the target and lowers it above (`uniform`: weighted_mean's)."""
    return -weighted_mean(log_alpha * (logp + target_entropy), batch, uniform)


@declare(name="sac")
class SACConfig(ContinuousOffPolicyConfig):
    """SAC (gpurl/agents/sac.py): a tanh-Gaussian actor, twin critics and a learned
    temperature."""

    alpha_lr: float = lr_key(1.0e-3, "the temperature's Adam learning rate")
    init_alpha: float = key(1.0, "the temperature it starts at", gt=0)
    log_std: str = key(
        "squash",
        "how the actor bounds its log-std: squash (tanh into [-5, 2]: CleanRL's, the std "
        "starts near 0.22) | clamp (a hard clamp to [-20, 2]: Stable-Baselines3's, the std "
        "starts near 1)",
        choices=("squash", "clamp"),
    )
    squash_correction: str = key(
        "exact",
        "the log-probability's tanh correction log(1 - tanh(u)^2): exact (2 (log 2 - u - "
        "softplus(-2u))) | epsilon (log(1 - tanh(u)^2 + 1e-6): Stable-Baselines3's and "
        "CleanRL's, whose penalty on a saturated action stops growing past |u| ~ 7)",
        choices=("exact", "epsilon"),
    )


@register("agent", "sac", SACConfig)
class SACAgent(OffPolicyAgent):
    name = "sac"
    fuses_draw = True
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        action_dim = require_continuous(info, "sac", "dqn, or a continuous env")
        enc, device = cfg.get("encoder"), info.device
        runs = self.runs
        self.actor = runs.build(
            lambda: TanhGaussianActor(
                make_encoder(info, enc),
                action_dim,
                cfg.hidden,
                log_std=cfg.get("log_std", "squash"),
                correction=cfg.get("squash_correction", "exact"),
            )
        ).to(device)
        self.critic = runs.build(
            lambda: torch.nn.ModuleList(
                Critic(make_encoder(info, enc), action_dim, cfg.hidden) for _ in range(2)
            )
        ).to(device)
        self.critic_target = target_copy(self.critic)
        self.targets = TargetPairs((self.critic_target, self.critic))
        # one temperature per run: [] for one run, [N] for N (runs.per_row spreads it)
        self.log_alpha = torch.nn.Parameter(runs.full(cfg.init_alpha, device).log())
        self.target_entropy = -float(action_dim)

        def optimizer(params, key):
            return make_optimizer(params, runs.value(key, cfg[key], device), runs)

        self.actor_optimizer = optimizer(self.actor.parameters(), "actor_lr")
        self.critic_optimizer = optimizer(self.critic.parameters(), "critic_lr")
        self.alpha_optimizer = optimizer([self.log_alpha], "alpha_lr")
        self.policy = PolicyWrapper(
            self.actor, info, progress, make_exploration(cfg, info, random_frames, self.runs)
        ).to(device)
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        return {
            "actor": self.actor,
            "critic": self.critic,
            "critic_target": self.critic_target,
            "log_alpha": torch.nn.ParameterList([self.log_alpha]),
            "exploration": self.policy.exploration,
        }

    def run_tensors(self):
        return [self.log_alpha]

    def optimizers(self):
        return {
            "actor_optimizer": self.actor_optimizer,
            "critic_optimizer": self.critic_optimizer,
            "alpha_optimizer": self.alpha_optimizer,
        }

    def update(self, batch: TensorDict, progress) -> TensorDict:
        return self.learn_step(batch)

    def learn(self, batch: TensorDict) -> TensorDict:
        """Critic, actor and temperature steps and the Polyak target step: tensors in,
        tensors out (compile.update takes it whole)."""
        cfg = self.cfg
        nxt = batch["next"]
        action = self.policy.unscale(batch["action"])
        alpha = self.runs.per_row(self.log_alpha.detach().exp(), batch["reward"])
        with torch.no_grad():
            next_action, next_logp = self.actor.sample(nxt)
            next_q = torch.stack([c(nxt, next_action) for c in self.critic_target]).min(0)
            soft_value = next_q.values - alpha * next_logp
            target = batch["reward"] + batch["discount"] * soft_value
        q = torch.stack([c(batch, action) for c in self.critic])
        elementwise = F.mse_loss(q, target.expand_as(q), reduction="none").sum(0)
        critic_loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.critic_optimizer, critic_loss, cfg.max_grad_norm)

        new_action, logp = self.actor.sample(batch)
        q_new = torch.stack([c(batch, new_action) for c in self.critic]).min(0).values
        actor_loss = weighted_mean(alpha * logp - q_new, batch, self.uniform_sample)
        clip_and_step(self.actor_optimizer, actor_loss, cfg.max_grad_norm)

        log_alpha = self.runs.per_row(self.log_alpha, logp)
        alpha_loss = temperature_loss(
            log_alpha, logp.detach(), self.target_entropy, batch, self.uniform_sample
        )
        clip_and_step(self.alpha_optimizer, alpha_loss, None)

        self.targets.polyak(cfg.tau)
        metrics = scalars(
            critic_loss=critic_loss.detach(),
            actor_loss=actor_loss.detach(),
            alpha=self.log_alpha.detach().exp().mean(),
            entropy=-logp.detach().mean(),
            q=q.detach().mean(),
        )
        if cfg.prioritized:  # the replay's new priorities: the lower critic's |TD error|
            metrics.set("priority", (q.min(0).values - target).detach().abs())
        return metrics
