"""TD3 (Fujimoto et al. 2018): DDPG with twin critics (min target), target-policy
smoothing and delayed actor and target updates."""

from __future__ import annotations

import torch

from gpurl.agents.ddpg import DDPGAgent


class TD3Agent(DDPGAgent):
    name = "td3"
    n_critics = 2

    def _target_action(self, next_obs):
        action = self.actor_target(next_obs)
        noise = (torch.randn_like(action) * self.cfg.target_noise).clamp(
            -self.cfg.target_noise_clip, self.cfg.target_noise_clip
        )
        return (action + noise).clamp(-1.0, 1.0)
