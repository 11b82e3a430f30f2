"""AC-IQN (Lin et al., the MarineNav paper): a deterministic actor with an implicit
quantile critic on (state, action).

    actor   mu(s) = (2 / pi) atan(MLP(encoder(s)))            in (-1, 1)^d
    critic  Z_tau(s, a) = MLP(phi(tau) * f(s) -> width, times g(a)) -> 1 per quantile,
            phi(tau) = ReLU(Linear(cos(pi i tau))), g(a) = ReLU(Linear(a))
    critic loss  quantile Huber of Z_tau(s, a) against r + discount Z'_tau'(s', mu'(s'))
    actor loss   -mean over quantiles of Z_tau(s, mu(s)), tau ~ U(0, alpha): the mean
                 return for alpha = 1, CVaR_alpha (risk-averse) for alpha < 1

Polyak or hard target copies of both networks (hard by default, the spec's). The actor
maximises the critic's mean return, so with a critic that rises in the action it moves
its output up (tests/test_acqin.py checks the direction).

Greedy evaluation can check the actor with the critic (agent.eval_search = G > 0): the
actor's action and the G^d points of a grid over [-1, 1]^d are scored by the critic's
CVaR_eval_cvar (midpoint fractions in (0, eval_cvar)) and the best is taken. The actor
trails the critic it climbs; the grid lets the critic overrule it where it has gone
astray. Collection always acts with the actor alone.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.envs.utils import ExplorationType, exploration_type

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
from gpurl.agents.config import (
    EpsilonGreedyKeys,
    OffPolicyConfig,
    TargetNetworkKeys,
    encoder_key,
    hidden_key,
    lr_key,
    max_grad_norm_key,
)
from gpurl.agents.iqn import (
    QuantileEmbedding,
    QuantileKeys,
    quantile_huber_loss,
    tail_fractions,
)
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.replay import weighted_mean
from gpurl.errors import ConfigError
from gpurl.policies import (
    DeterministicActor,
    PolicyWrapper,
    make_encoder,
    make_exploration,
    mlp,
)
from gpurl.policies.networks import EncoderConfig


class QuantileCritic(nn.Module):
    """Z_tau(s, a) [..., N] for an action a [..., d] and fractions taus [..., N]."""

    def __init__(self, encoder, action_dim: int, width=128, hidden=(128,), cos_embed=64):
        super().__init__()
        self.encoder = encoder
        self.tau_embed = QuantileEmbedding(encoder.out_features, cos_embed)
        self.state = nn.Sequential(nn.Linear(encoder.out_features, width), nn.ReLU())
        self.action = nn.Sequential(nn.Linear(action_dim, width), nn.ReLU())
        self.head = mlp(width, 1, hidden)

    def forward(self, obs: TensorDictBase, action: torch.Tensor, taus: torch.Tensor):
        return self.quantiles(self.encoder(obs), action, taus)

    def quantiles(self, feature, action, taus, shared: bool = False) -> torch.Tensor:
        """From the state feature [..., F]: Z_tau [..., N] at each row's fractions taus
        [..., N], or with `shared` at fractions every row shares, taus [N] (broadcasting,
        so a feature [..., 1, F] against actions [..., C, d] scores C actions [..., C, N])."""
        mix = self.tau_embed.mix_shared if shared else self.tau_embed.mix
        x = self.state(mix(feature, taus))  # [..., N, W]
        return self.head(x * self.action(action).unsqueeze(-2)).squeeze(-1)


class CriticCheckedActor(nn.Module):
    """The policy network of AC-IQN: the actor, and in greedy evaluation with grid > 0
    the best by the critic's CVaR_cvar among the actor's action and a grid of grid^d
    actions over [-1, 1]^d. The actor and critic are the agent's, not copies."""

    kind = "deterministic"

    def __init__(self, actor, critic, grid: int = 0, cvar: float = 1.0, quantiles: int = 32):
        super().__init__()
        # Registered, so that a compiled policy (functional_call over its parameters and
        # buffers) sees them; the agent's checkpoints save them as "actor" and "critic".
        self.actor, self.critic = actor, critic
        self.quantiles = int(quantiles)
        self.set_search(grid, cvar)

    def set_search(self, grid: int, cvar: float) -> None:
        grid, cvar = int(grid), float(cvar)
        if grid < 0 or grid == 1:
            raise ConfigError(f"agent.eval_search must be 0 (off) or >= 2 points, got {grid}")
        if not 0 < cvar <= 1:
            raise ConfigError(f"agent.eval_cvar must lie in (0, 1], got {cvar}")
        device = next(self.actor.parameters()).device
        points = None
        if grid:
            dim = self.critic.action[0].weight.shape[-1]  # the action's width (runs stacked too)
            axis = torch.linspace(-1.0, 1.0, grid, device=device)
            points = torch.cartesian_prod(*[axis] * dim).reshape(-1, dim)
        # Not persistent: settings from the config, not state to checkpoint.
        self.register_buffer("grid", points, persistent=False)
        self.register_buffer("taus", tail_fractions(self.quantiles, cvar, device), persistent=False)

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        action = self.actor(obs)
        if self.grid is None or exploration_type() != ExplorationType.DETERMINISTIC:
            return action
        grid = self.grid.expand(*action.shape[:-1], *self.grid.shape)
        candidates = torch.cat([action.unsqueeze(-2), grid], -2)  # [..., 1 + G^d, d]
        feature = self.critic.encoder(obs).unsqueeze(-2)
        score = self.critic.quantiles(feature, candidates, self.taus, shared=True).mean(-1)
        best = score.argmax(-1)[..., None, None].expand(*action.shape[:-1], 1, action.shape[-1])
        return candidates.gather(-2, best).squeeze(-2)


@declare(name="acqin", target_update="hard", target_update_interval=10000, epsilon_start=0.6)
class ACIQNConfig(QuantileKeys, TargetNetworkKeys, EpsilonGreedyKeys, OffPolicyConfig):
    """AC-IQN (gpurl/agents/acqin.py), with the MarineNav spec's networks and settings as
    defaults."""

    hidden: list[int] = hidden_key(
        [256, 128, 128], "actor: encoder -> these -> action_dim -> (2/pi) atan"
    )
    critic_width: int = key(
        128, "quantile-embedded state and action both projected to this width", ge=1
    )
    critic_hidden: list[int] = key(
        [128], "critic widths after their product, then -> 1 per quantile", ge=1
    )
    actor_cvar: float = key(
        1.0, "the actor maximises CVaR_alpha of the critic's return (1: the mean)", gt=0, le=1
    )
    eval_search: int = key(
        0,
        "greedy evaluation: 0 acts with the actor; G >= 2 lets the critic "
        "pick among it and a G x G grid",
        ge=0,
    )
    eval_cvar: float = key(
        1.0, "... by CVaR_alpha of its return (quantiles in (0, alpha)); 1: the mean", gt=0, le=1
    )
    actor_lr: float = lr_key(1.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-4, "the critic's Adam learning rate")
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    noise: str = key(
        "none", "action noise: gaussian | ou | none", choices=("gaussian", "ou", "none")
    )
    encoder: EncoderConfig = encoder_key()

    @classmethod
    def check_together(cls, node: dict) -> None:
        if node["eval_search"] == 1:
            raise ConfigError(
                "agent.eval_search=1: use 0 (act with the actor) or a grid of G >= 2 points a side"
            )


@register("agent", "acqin", ACIQNConfig)
class ACIQNAgent(OffPolicyAgent):
    name = "acqin"
    fuses_draw = True
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        action_dim = require_continuous(info, "acqin", "iqn or dqn, or a continuous env")
        enc, runs, device = cfg.get("encoder"), self.runs, info.device
        self.actor = runs.build(
            lambda: DeterministicActor(
                make_encoder(info, enc), action_dim, cfg.hidden, squash="atan"
            )
        ).to(device)
        self.critic = runs.build(
            lambda: QuantileCritic(
                make_encoder(info, enc),
                action_dim,
                int(cfg.critic_width),
                cfg.critic_hidden,
                int(cfg.cos_embed),
            )
        ).to(device)
        self.actor_target, self.critic_target = target_copy(self.actor), target_copy(self.critic)
        self.targets = TargetPairs(
            (self.actor_target, self.actor), (self.critic_target, self.critic)
        )

        def optimizer(params, key):
            return make_optimizer(params, runs.value(key, cfg[key], device), runs)

        self.actor_optimizer = optimizer(self.actor.parameters(), "actor_lr")
        self.critic_optimizer = optimizer(self.critic.parameters(), "critic_lr")
        self.search = CriticCheckedActor(
            self.actor,
            self.critic,
            int(cfg.get("eval_search", 0)),
            float(cfg.get("eval_cvar", 1.0)),
        )
        self.policy = PolicyWrapper(
            self.search, info, progress, make_exploration(cfg, info, random_frames, runs)
        ).to(device)
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        # The policy's parameters are the actor's and the critic's: the search adds none,
        # so checkpoints are the same with and without it.
        return {
            "actor": self.actor,
            "critic": self.critic,
            "actor_target": self.actor_target,
            "critic_target": self.critic_target,
            "exploration": self.policy.exploration,
        }

    def optimizers(self):
        return {"actor_optimizer": self.actor_optimizer, "critic_optimizer": self.critic_optimizer}

    def update(self, batch: TensorDict, progress) -> TensorDict:
        metrics = self.learn_step(batch)
        if self.cfg.target_update == "hard" and is_every(progress, self.cfg.target_update_interval):
            self.targets.copy()
        return metrics

    def _taus(self, batch, n: int) -> torch.Tensor:
        return torch.rand((*batch.batch_size, n), device=batch.device)

    def learn(self, batch: TensorDict) -> TensorDict:
        """Critic and actor steps (and the Polyak targets): tensors in and out."""
        cfg = self.cfg
        nxt = batch["next"]
        action = self.policy.unscale(batch["action"])
        with torch.no_grad():
            z_next = self.critic_target(
                nxt, self.actor_target(nxt), self._taus(batch, int(cfg.target_quantiles))
            )
            target = batch["reward"].unsqueeze(-1) + batch["discount"].unsqueeze(-1) * z_next
        taus = self._taus(batch, int(cfg.quantiles))
        z = self.critic(batch, action, taus)
        elementwise = quantile_huber_loss(z, target, taus, float(cfg.kappa))
        critic_loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.critic_optimizer, critic_loss, cfg.max_grad_norm)
        # The actor maximises CVaR_alpha of the return (alpha = agent.actor_cvar): the mean
        # over fractions drawn from (0, alpha), the lower tail; alpha = 1 is the mean.
        actor_taus = self._taus(batch, int(cfg.quantiles)) * float(cfg.get("actor_cvar", 1.0))
        z_actor = self.critic(batch, self.actor(batch), actor_taus)
        actor_loss = -weighted_mean(z_actor.mean(-1), batch, self.uniform_sample)
        clip_and_step(self.actor_optimizer, actor_loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(
            critic_loss=critic_loss.detach(), actor_loss=actor_loss.detach(), q=z.detach().mean()
        )
        if cfg.prioritized:  # the replay's new priorities: the critic's quantile loss
            metrics.set("priority", elementwise.detach())
        return metrics
