"""DDPG (Lillicrap et al. 2016): deterministic actor, one critic, Polyak targets."""

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
    require_continuous,
    scalars,
    target_copy,
)
from gpurl.agents.config import ContinuousOffPolicyConfig
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean
from gpurl.policies import Critic, DeterministicActor, PolicyWrapper, make_encoder, make_exploration
from gpurl.policies.heads import SQUASHES


@declare(name="ddpg")
class DDPGConfig(ContinuousOffPolicyConfig):
    """DDPG (gpurl/agents/ddpg.py): a deterministic actor and a Q critic, Polyak targets,
    action noise."""

    squash: str = key(
        "tanh",
        "actor squash: tanh | atan ((2/pi) atan, the MarineNav spec's)",
        choices=tuple(SQUASHES),
    )
    critic_loss: str = key(
        "mse", "mse | huber (smooth-L1, the MarineNav spec's)", choices=("mse", "huber")
    )
    policy_delay: int = key(1, "critic updates per actor update", ge=1)
    noise: str = key(
        "gaussian", "action noise: gaussian | ou | none", choices=("gaussian", "ou", "none")
    )
    noise_start: float = key(0.1, "noise std in the normalised action box [-1, 1]", ge=0)
    noise_end: float = key(0.1, "noise std after noise_frames (linear in frames)", ge=0)
    noise_frames: int = key(0, "frames over which the std goes from start to end", ge=0)
    ou_theta: float = key(0.15, "ou: the pull back to 0 per step", ge=0)


@register("agent", "ddpg", DDPGConfig)
class DDPGAgent(OffPolicyAgent):
    name = "ddpg"
    n_critics = 1
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        action_dim = require_continuous(info, self.name, "dqn, or a continuous env")
        enc, runs, device = cfg.get("encoder"), self.runs, info.device
        self.actor = runs.build(
            lambda: DeterministicActor(
                make_encoder(info, enc), action_dim, cfg.hidden, cfg.get("squash", "tanh")
            )
        ).to(device)
        self.actor_target = target_copy(self.actor)
        self.critic = runs.build(
            lambda: torch.nn.ModuleList(
                Critic(make_encoder(info, enc), action_dim, cfg.hidden)
                for _ in range(self.n_critics)
            )
        ).to(device)
        self.critic_target = target_copy(self.critic)
        self.targets = TargetPairs(
            (self.actor_target, self.actor), (self.critic_target, self.critic)
        )

        def optimizer(params, key):
            return make_optimizer(params, runs.value(key, cfg[key], device), runs)

        self.actor_optimizer = optimizer(self.actor.parameters(), "actor_lr")
        self.critic_optimizer = optimizer(self.critic.parameters(), "critic_lr")
        self.policy = PolicyWrapper(
            self.actor, info, progress, make_exploration(cfg, info, random_frames, self.runs)
        ).to(info.device)
        self.critic_step_fn = self.compiled(self.critic_step)
        self.actor_step_fn = self.compiled(self.actor_step)

    def modules(self):
        return {
            "actor": self.actor,
            "actor_target": self.actor_target,
            "critic": self.critic,
            "critic_target": self.critic_target,
            "exploration": self.policy.exploration,
        }

    def optimizers(self):
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer}

    def _critic_values(self, critics, obs, action) -> torch.Tensor:
        return torch.stack([c(obs, action) for c in critics])  # [n_critics, B]

    def _target_action(self, next_obs):
        return self.actor_target(next_obs)

    def update(self, batch: TensorDict, progress) -> TensorDict:
        metrics = self.critic_step_fn(batch)
        if is_every(progress, self.cfg.policy_delay):  # TD3's delayed actor and targets
            metrics.update(self.actor_step_fn(batch))
        return metrics

    def critic_step(self, batch: TensorDict) -> TensorDict:
        """The critics' gradient step (tensors in, tensors out: compile.update takes it)."""
        cfg = self.cfg
        nxt = batch["next"]
        action = self.policy.unscale(batch["action"])
        with torch.no_grad():
            next_q = self._critic_values(self.critic_target, nxt, self._target_action(nxt))
            target = batch["reward"] + batch["discount"] * next_q.min(0).values
        q = self._critic_values(self.critic, batch, action)
        loss_fn = F.smooth_l1_loss if cfg.get("critic_loss") == "huber" else F.mse_loss
        elementwise = loss_fn(q, target.expand_as(q), reduction="none").sum(0)
        critic_loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.critic_optimizer, critic_loss, cfg.max_grad_norm)
        metrics = scalars(critic_loss=critic_loss.detach(), q=q.detach().mean())
        if cfg.prioritized:  # the replay's new priorities: the first critic's |TD error|
            metrics.set("priority", (q[0] - target).detach().abs())
        return metrics

    def actor_step(self, batch: TensorDict) -> TensorDict:
        """The actor's gradient step and both Polyak target steps (delayed in TD3)."""
        cfg = self.cfg
        actor_loss = -weighted_mean(
            self.critic[0](batch, self.actor(batch)), batch, self.uniform_sample
        )
        clip_and_step(self.actor_optimizer, actor_loss, cfg.max_grad_norm)
        self.targets.polyak(cfg.tau)
        return scalars(actor_loss=actor_loss.detach())
