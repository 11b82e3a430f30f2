"""A2C (Mnih et al. 2016, synchronous): PPO's actor-critic and losses without clipping.

One pass over each rollout (agent.epochs = agent.minibatches = 1), where the ratio is
1 and its gradient is the plain policy gradient A grad log pi (ppo.ppo_policy_loss with
clip None). Everything else, networks, GAE, the value loss, the entropy bonus, is
PPO's (ppo.py); A2C's config has no clipping keys.
"""

from __future__ import annotations

from gpurl.agents.ppo import ActorCriticConfig, PPOAgent
from gpurl.core.config import declare
from gpurl.core.registry import register


@declare(name="a2c", lr=7.0e-4, anneal_lr=False, gae_lambda=1.0, normalize_advantage=False)
class A2CConfig(ActorCriticConfig):
    """A2C (gpurl/agents/a2c.py), an on-policy agent: PPO's actor-critic without clipping,
    one pass per rollout."""


@register("agent", "a2c", A2CConfig)
class A2CAgent(PPOAgent):
    name = "a2c"

    def clips(self, cfg) -> tuple[None, None]:
        return None, None
