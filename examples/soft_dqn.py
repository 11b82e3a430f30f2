"""Soft Q-learning (Haarnoja et al. 2017) for discrete actions: an agent outside gpurl.

The target replaces DQN's max with a soft maximum at temperature tau,

    y = r + discount * tau * logsumexp(Q_target(s', .) / tau),

which tends to the max as tau -> 0. It extends gpurl's DQN, so it keeps DQN's networks,
exploration, replay and config keys, and adds `agent.temperature`. Installed
(pip install -e examples/), its entry point registers it as agent=soft_dqn:

    python -m gpurl.train env=catch agent=soft_dqn agent.temperature=0.05
"""

import torch
import torch.nn.functional as F
from tensordict import TensorDict

from gpurl.agents.base import clip_and_step
from gpurl.agents.dqn import DQNAgent, DQNConfig
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean


def soft_target(q_next: torch.Tensor, reward, discount, temperature: float) -> torch.Tensor:
    """r + discount * tau * logsumexp(q_next / tau) over the actions [B, A]."""
    return reward + discount * temperature * torch.logsumexp(q_next / temperature, dim=-1)


@declare(name="soft_dqn")
class SoftDQNConfig(DQNConfig):
    """Soft Q-learning (examples/soft_dqn.py): DQN with a soft-maximum target."""

    temperature: float = key(0.05, "tau of the soft maximum; 0 < tau (-> 0: DQN's max)", gt=0)


@register("agent", "soft_dqn", SoftDQNConfig)
class SoftDQNAgent(DQNAgent):
    name = "soft_dqn"

    def learn(self, batch: TensorDict) -> TensorDict:
        cfg = self.cfg
        with torch.no_grad():
            q_next = self.q_target(batch["next"])
            target = soft_target(q_next, batch["reward"], batch["discount"], cfg.temperature)
        q = self.q(batch).gather(-1, batch["action"].long().unsqueeze(-1)).squeeze(-1)
        loss = weighted_mean(F.smooth_l1_loss(q, target, reduction="none"), batch)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        self.targets.polyak(cfg.tau)
        return TensorDict(loss=loss.detach(), q=q.detach().mean())
