"""A2C (Mnih et al. 2016, synchronous): PPO's actor-critic and losses without clipping.

One pass over each rollout (agent.epochs = agent.minibatches = 1), where the ratio is
1 and its gradient is the plain policy gradient A grad log pi (ppo.ppo_policy_loss with
clip None). Everything else, networks, GAE, the value loss, the entropy bonus, is
PPO's (ppo.py); A2C's config has no clipping keys.
"""

from __future__ import annotations

from gpurl.agents.ppo import PPOAgent


class A2CAgent(PPOAgent):
    name = "a2c"

    def clips(self, cfg) -> tuple[None, None]:
        return None, None
