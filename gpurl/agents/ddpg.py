"""DDPG (Lillicrap et al. 2016): deterministic actor, one critic, Polyak targets."""

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
from gpurl.policies import Critic, DeterministicActor, LinearSchedule, PolicyWrapper, make_encoder


class DDPGAgent(Agent):
    name = "ddpg"
    n_critics = 1

    def __init__(self, cfg, observation_spec, action_spec, device, random_frames: int = 0):
        action_dim = require_continuous(action_spec, self.name)
        self.cfg = cfg
        self.obs_key = observation_key(observation_spec, cfg.get("obs_key"))
        shape = feature_shape(observation_spec, self.obs_key)
        scale = cfg.get("pixel_scale", 255.0)
        self.actor = DeterministicActor(make_encoder(shape, scale), action_dim, cfg.hidden).to(
            device
        )
        self.actor_target = target_copy(self.actor)
        self.critic = torch.nn.ModuleList(
            Critic(make_encoder(shape, scale), action_dim, cfg.hidden)
            for _ in range(self.n_critics)
        ).to(device)
        self.critic_target = target_copy(self.critic)
        self.actor_optimizer = make_optimizer(self.actor.parameters(), cfg.actor_lr)
        self.critic_optimizer = make_optimizer(self.critic.parameters(), cfg.critic_lr)
        self.policy = PolicyWrapper(
            self.actor,
            action_spec,
            obs_key=self.obs_key,
            noise=cfg.noise,
            noise_scale=LinearSchedule(cfg.noise_start, cfg.noise_end, cfg.noise_frames),
            random_frames=random_frames,
        ).to(device)
        self.updates = 0

    def _critic_values(self, critics, obs, action) -> torch.Tensor:
        return torch.stack([c(obs, action) for c in critics])  # [n_critics, B]

    def _target_action(self, next_obs):
        return self.actor_target(next_obs)

    def update(self, batch: TensorDict) -> TensorDict:
        cfg = self.cfg
        obs, next_obs = batch[self.obs_key], batch["next", self.obs_key]
        action = self.policy.unscale(batch["action"])
        reward = batch["next", "reward"].squeeze(-1)
        not_done = 1.0 - batch["next", "terminated"].squeeze(-1).float()
        with torch.no_grad():
            next_q = self._critic_values(
                self.critic_target, next_obs, self._target_action(next_obs)
            )
            target = reward + cfg.gamma * not_done * next_q.min(0).values
        q = self._critic_values(self.critic, obs, action)
        critic_loss = F.mse_loss(q, target.expand_as(q)) * self.n_critics
        clip_and_step(
            self.critic_optimizer, self.critic.parameters(), critic_loss, cfg.max_grad_norm
        )
        self.updates += 1
        metrics = TensorDict(critic_loss=critic_loss.detach(), q=q.detach().mean())
        if self.updates % cfg.get("policy_delay", 1) == 0:
            actor_loss = -self.critic[0](obs, self.actor(obs)).mean()
            clip_and_step(
                self.actor_optimizer, self.actor.parameters(), actor_loss, cfg.max_grad_norm
            )
            polyak_update(self.actor_target, self.actor, cfg.tau)
            polyak_update(self.critic_target, self.critic, cfg.tau)
            metrics["actor_loss"] = actor_loss.detach()
        return metrics
