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
    Agent,
    clip_and_step,
    feature_shape,
    make_optimizer,
    observation_key,
    polyak_update,
    require_continuous,
    target_copy,
)
from gpurl.policies import Critic, PolicyWrapper, TanhGaussianActor, make_encoder


class SACAgent(Agent):
    name = "sac"

    def __init__(self, cfg, observation_spec, action_spec, device, random_frames: int = 0):
        action_dim = require_continuous(action_spec, "sac")
        self.cfg = cfg
        self.obs_key = observation_key(observation_spec, cfg.get("obs_key"))
        shape = feature_shape(observation_spec, self.obs_key)
        scale = cfg.get("pixel_scale", 255.0)
        self.actor = TanhGaussianActor(make_encoder(shape, scale), action_dim, cfg.hidden).to(
            device
        )
        self.critic = torch.nn.ModuleList(
            Critic(make_encoder(shape, scale), action_dim, cfg.hidden) for _ in range(2)
        ).to(device)
        self.critic_target = target_copy(self.critic)
        self.log_alpha = torch.nn.Parameter(
            torch.tensor(float(cfg.init_alpha), device=device).log()
        )
        self.target_entropy = -float(action_dim)
        self.actor_optimizer = make_optimizer(self.actor.parameters(), cfg.actor_lr)
        self.critic_optimizer = make_optimizer(self.critic.parameters(), cfg.critic_lr)
        self.alpha_optimizer = make_optimizer([self.log_alpha], cfg.alpha_lr)
        self.policy = PolicyWrapper(
            self.actor, action_spec, obs_key=self.obs_key, random_frames=random_frames
        ).to(device)
        self.updates = 0

    def modules(self):
        return {**super().modules(), "log_alpha": torch.nn.ParameterList([self.log_alpha])}

    def update(self, batch: TensorDict) -> TensorDict:
        cfg = self.cfg
        obs, next_obs = batch[self.obs_key], batch["next", self.obs_key]
        action = self.policy.unscale(batch["action"])
        reward = batch["next", "reward"].squeeze(-1)
        not_done = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_action, next_logp = self.actor.sample(next_obs)
            next_q = torch.stack([c(next_obs, next_action) for c in self.critic_target]).min(0)
            soft_value = next_q.values - alpha * next_logp
            target = reward + cfg.gamma * not_done * soft_value
        q = torch.stack([c(obs, action) for c in self.critic])
        critic_loss = F.mse_loss(q, target.expand_as(q)) * 2
        clip_and_step(
            self.critic_optimizer, self.critic.parameters(), critic_loss, cfg.max_grad_norm
        )

        new_action, logp = self.actor.sample(obs)
        q_new = torch.stack([c(obs, new_action) for c in self.critic]).min(0).values
        actor_loss = (alpha * logp - q_new).mean()
        clip_and_step(self.actor_optimizer, self.actor.parameters(), actor_loss, cfg.max_grad_norm)

        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        clip_and_step(self.alpha_optimizer, [self.log_alpha], alpha_loss, None)

        polyak_update(self.critic_target, self.critic, cfg.tau)
        self.updates += 1
        return TensorDict(
            critic_loss=critic_loss.detach(),
            actor_loss=actor_loss.detach(),
            alpha=alpha,
            entropy=-logp.detach().mean(),
            q=q.detach().mean(),
        )
