"""A new agent in one module, as docs/extending.md's checklist has it: the agent, its
keys, and the decorator that registers both. Nothing else in gpurl changes.

REINFORCE (Williams 1992): the policy gradient of each action's discounted return, an
OnPolicyAgent whose targets are those returns. Greedy from scratch the policy picks
action 0 (its logits start equal, and ties pick the first).
"""

import torch
from tensordict import TensorDict

from gpurl.agents.base import OnPolicyAgent, clip_and_step
from gpurl.agents.config import OnPolicyConfig, hidden_key
from gpurl.core.compile import EAGER
from gpurl.core.config import declare
from gpurl.core.registry import register
from gpurl.policies import CategoricalActor, PolicyWrapper, make_encoder


@declare(name="reinforce", lr=0.1, anneal_lr=False, gamma=0.9, bootstrap_truncated=False)
class ReinforceConfig(OnPolicyConfig):
    """REINFORCE (tests/extending/reinforce.py): the policy gradient of each action's
    discounted return within the rollout."""

    hidden: list[int] = hidden_key([16])


@register("agent", "reinforce", ReinforceConfig)
class ReinforceAgent(OnPolicyAgent):
    name = "reinforce"

    def __init__(self, cfg, info, progress, compile=EAGER):
        super().__init__(cfg, info, progress, compile)
        self.actor = CategoricalActor(make_encoder(info), info.n_actions, list(cfg.hidden))
        torch.nn.init.zeros_(self.actor.net[-1].weight)  # equal logits: greedy picks 0
        torch.nn.init.zeros_(self.actor.net[-1].bias)
        self.actor.to(info.device)
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=self.lr)
        self.policy = PolicyWrapper(self.actor, info, progress, write_log_prob=True)
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        return {"actor": self.actor}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    @torch.no_grad()
    def compute_targets(self, rollout: TensorDict, last_obs) -> TensorDict:
        """Each step's discounted return to its episode's end inside the rollout."""
        nxt = rollout.get("next")
        reward, done = nxt.get("reward").squeeze(-1), nxt.get("done").squeeze(-1)
        out = self.target_buffers(reward, "return")
        ret = out.get("return").copy_(reward)
        keep = (~done).float() * self.gamma
        for t in range(ret.shape[0] - 2, -1, -1):
            ret[t].addcmul_(keep[t], ret[t + 1])
        return out

    def learn(self, batch: TensorDict) -> TensorDict:
        log_prob, _ = self.actor.evaluate(batch, batch.get("action"))
        loss = -(log_prob * batch.get("return")).mean()
        clip_and_step(self.optimizer, loss, None)
        return TensorDict(loss=loss.detach())
