"""Rainbow (Hessel et al. 2018) as the MarineNav spec sets it: a noisy dueling C51
Q-network (sigma0 0.05), Double-Q action selection, 3-step returns and proportional
prioritized replay (omega 0.5, beta 0.4 -> 1), all on the device.

The return distribution lives on a fixed support of `atoms` points in [v_min, v_max],
a config entry sized to the env's returns (agent/rainbow.yaml says how): a support far
below them (MarineNav's are +10 on arrival plus up to ~50 m of progress reward) would
clip every target to its top atom. The n-step returns come from the replay
(core/returns.py), built per (env, robot) stream and cut at episode ends; the
categorical projection of r + gamma^n Z(s', a*) onto the support is
`categorical_projection` below, a scatter with no host reads. Priorities are the
per-sample cross-entropy (Rainbow's KL).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from gpurl.agents.base import clip_and_step, scalars
from gpurl.agents.config import QLearningConfig
from gpurl.agents.dqn import DQNAgent, masked_q
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean
from gpurl.errors import ConfigError


def categorical_projection(
    probs_next: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Project r + discount * z (probabilities probs_next [B, atoms] on `support`) back onto
    the support [B, atoms]. discount is gamma^n (1 - terminated): 0 puts all the mass at
    r. Values outside the support go to its edge atoms; a value between two atoms splits
    its mass between them linearly, one that lands on an atom gives that atom all of it.
    In fp32 whatever probs_next's dtype: under compile.amp the softmax before it may be
    bf16, and the target the loss compares with stays full precision."""
    probs_next = probs_next.float()
    atoms = support.numel()
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (atoms - 1)
    tz = (reward.unsqueeze(-1) + discount.unsqueeze(-1) * support).clamp(v_min, v_max)
    b = (tz - v_min) / delta
    lower = b.floor().clamp(0, atoms - 1)
    upper = b.ceil().clamp(0, atoms - 1)
    w_lower = (upper - b) + (lower == upper).to(b.dtype)  # on an atom: all of it to `lower`
    w_upper = b - lower
    target = torch.zeros_like(probs_next)
    target.scatter_add_(-1, lower.long(), probs_next * w_lower)
    target.scatter_add_(-1, upper.long(), probs_next * w_upper)
    return target


def rainbow_target(q_choose_next, logits_target_next, reward, discount, support, mask=None):
    """The projected target distribution [B, atoms]: a* = argmax of q_choose_next [B, A]
    (Double-Q: the online net's mean Q) among the legal actions of s' (mask [B, A]); the
    target net's distribution at a* (logits_target_next [B, A, atoms]) is shifted by the
    n-step reward and discount and projected. A state with no legal action bootstraps 0."""
    best = masked_q(q_choose_next, mask).argmax(-1)
    probs = logits_target_next.softmax(-1)
    index = best[..., None, None].expand(*best.shape, 1, probs.shape[-1])
    probs_next = probs.gather(-2, index).squeeze(-2)
    if mask is not None:
        discount = torch.where(mask.any(-1), discount, 0.0)
    return categorical_projection(probs_next, reward, discount, support)


@declare(
    name="rainbow",
    hidden=[128, 128],
    lr=1.0e-4,
    max_grad_norm=0.5,
    target_update="hard",
    target_update_interval=10000,
    epsilon_start=0.6,
    n_step=3,
    prioritized=True,
    priority_alpha=0.5,
)
class RainbowConfig(QLearningConfig):
    """Rainbow (gpurl/agents/rainbow.py): noisy dueling C51, Double-Q, n-step, prioritized
    replay, with the MarineNav spec's settings as defaults."""

    dueling: bool = key(True, "dueling heads: a state value plus action advantages")
    double: bool = key(
        True, "Double-Q: the online net picks a*, the target net's distribution at a*"
    )
    noisy_sigma0: float = key(
        0.05, "noisy layers' sigma0 (the spec's; Fortunato et al. use 0.5); 0 = none", ge=0
    )
    atoms: int = key(51, "points of the return distribution's support, v_min to v_max", ge=2)
    v_min: float = key(
        -30.0,
        "the support's lowest return",
        note=(
            "The support, sized to MarineNav's returns (the spec's FIX of the old [-1, 1]): a",
            "robot that arrives collects its start-goal progress (30-72 m, discounted: at most",
            "~60) plus +10; a robot that collides gets -5 and a timeout about -0.1 / (1 - gamma)",
            "= -10, and moving away from the goal costs what it loses in distance. Size it to",
            "your env's returns: targets beyond the support are clipped to its edge atoms.",
        ),
    )
    v_max: float = key(70.0, "the support's highest return (> v_min)")

    @classmethod
    def check_together(cls, node: dict) -> None:
        if not node["v_min"] < node["v_max"]:
            raise ConfigError(
                f"agent.v_min={node['v_min']} must be below agent.v_max={node['v_max']}: the "
                f"return distribution's support runs from v_min to v_max"
            )


@register("agent", "rainbow", RainbowConfig)
class RainbowAgent(DQNAgent):
    """DQN's agent (agents/dqn.py: networks, noise per update, targets, exploration) with
    the C51 head and loss. agent/rainbow.yaml turns on the rest: dueling, noisy layers,
    Double-Q, 3-step returns and prioritized replay."""

    name = "rainbow"
    many_seeds = False  # its noisy layers and C51 head do not stack (core/runs.py)

    def make_support(self, cfg) -> torch.Tensor:
        atoms, v_min, v_max = int(cfg.atoms), float(cfg.v_min), float(cfg.v_max)
        if atoms < 2 or not v_min < v_max:
            raise ConfigError(
                f"agent.atoms must be >= 2 and agent.v_min < agent.v_max, got atoms={atoms}, "
                f"v_min={v_min}, v_max={v_max}"
            )
        return torch.linspace(v_min, v_max, atoms)

    def learn(self, batch: TensorDict) -> TensorDict:
        """One gradient step on the cross-entropy to the projected n-step target."""
        cfg = self.cfg
        support = self.q.support
        nxt = batch["next"]
        with torch.no_grad():
            mask = nxt.get(self.mask_key) if self.mask_key else None
            logits_next = self.q_target.logits(nxt)
            if cfg.double:  # the online net picks, the target net evaluates
                choose = self.q(nxt)
            else:
                choose = (logits_next.softmax(-1) * support).sum(-1)
            target = rainbow_target(
                choose,
                logits_next,
                batch["reward"],
                batch["discount"],
                support,
                mask,
            )
        logits = self.q.logits(batch)
        action = (
            batch["action"].long()[..., None, None].expand(*logits.shape[:-2], 1, logits.shape[-1])
        )
        log_p = logits.gather(-2, action).squeeze(-2).log_softmax(-1)  # [B, atoms]
        elementwise = -(target * log_p).sum(-1)
        loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        q = (log_p.detach().exp() * support).sum(-1)
        metrics = scalars(loss=loss.detach(), q=q.mean())
        if cfg.prioritized:  # the replay's new priorities: the cross-entropy
            metrics.set("priority", elementwise.detach())
        return metrics
