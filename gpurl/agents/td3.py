"""TD3 (Fujimoto et al. 2018): DDPG with twin critics (min target), target-policy
smoothing and delayed actor and target updates."""

from __future__ import annotations

import torch

from gpurl.agents.ddpg import DDPGAgent, DDPGConfig
from gpurl.core.config import declare, key
from gpurl.core.registry import register


@declare(name="td3", policy_delay=2)
class TD3Config(DDPGConfig):
    """TD3 (gpurl/agents/td3.py): DDPG with twin critics, delayed actor steps and target
    policy smoothing."""

    target_noise: float = key(0.2, "std of the noise on the target action", ge=0)
    target_noise_clip: float = key(0.5, "the target noise is clipped to +- this", ge=0)


@register("agent", "td3", TD3Config)
class TD3Agent(DDPGAgent):
    name = "td3"
    n_critics = 2

    def _target_action(self, next_obs):
        action = self.actor_target(next_obs)
        noise = (torch.randn_like(action) * self.cfg.target_noise).clamp(
            -self.cfg.target_noise_clip, self.cfg.target_noise_clip
        )
        return (action + noise).clamp(-1.0, 1.0)
