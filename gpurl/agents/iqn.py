"""IQN (Dabney et al. 2018): implicit quantile networks, a distributional DQN.

The network maps a state and quantile fractions tau in (0, 1) to the return's quantiles
Z_tau(s, a): tau is embedded as cos(pi i tau), i = 0..63, through Linear(64, F)+ReLU,
multiplied into the state feature (F wide), then through the MLP head to one value per
action. It acts on the mean of K sampled quantiles (one draw per call, shared by the
batch; evenly spaced midpoints in greedy evaluation, so evaluation is deterministic),
and learns from N online x N' target quantile samples with the quantile Huber loss.
The target is the standard one: the next action greedy by the target network's mean
over its quantiles (under the action mask), not a per-quantile max. Hard target copies
by default (the MarineNav spec's). Greedy evaluation can be risk-averse: with
agent.eval_cvar = alpha < 1 it acts on CVaR_alpha, the mean of the quantiles at fractions
in (0, alpha) (Dabney et al.'s risk-sensitive policies; the MarineNav source's `cvar`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    require_discrete,
    scalars,
    target_copy,
)
from gpurl.agents.config import (
    QLearningConfig,
    SequenceReplayKeys,
    hidden_key,
    recurrent_key,
)
from gpurl.agents.dqn import masked_q
from gpurl.agents.sequence_q import RecurrentQ
from gpurl.core.compile import EAGER
from gpurl.core.config import Schema, declare, key
from gpurl.core.registry import register
from gpurl.core.replay import sequence_priority, weighted_mean
from gpurl.core.runs import RunLinear, register_stackable
from gpurl.policies import PolicyWrapper, SharedFeatures, make_encoder, make_exploration, mlp
from gpurl.policies.recurrent import RECURRENT_STATE


def quantile_huber_loss(pred, target, taus, kappa: float = 1.0) -> torch.Tensor:
    """Per-sample quantile Huber loss [B]: pred [B, N] at fractions taus [B, N], target
    [B, N'] (no gradient). rho_ij = |tau_i - 1{u_ij < 0}| huber_kappa(u_ij) / kappa with
    u_ij = target_j - pred_i, summed over i and averaged over j."""
    u = target.unsqueeze(-2) - pred.unsqueeze(-1)  # [B, N, N']
    abs_u = u.abs()
    huber = torch.where(abs_u <= kappa, 0.5 * u.square(), kappa * (abs_u - 0.5 * kappa))
    weight = (taus.unsqueeze(-1) - (u.detach() < 0).float()).abs()
    return (weight * huber / kappa).mean(-1).sum(-1)


def iqn_target(z_next, reward, discount, mask=None) -> torch.Tensor:
    """Target quantiles [B, N']: reward + discount * Z'(s', a*), with a* greedy by the
    mean of z_next [B, N', A] over its quantiles, among the legal actions of s' (mask
    [B, A]); a state with no legal action bootstraps 0."""
    best = masked_q(z_next.mean(-2), mask).argmax(-1)
    index = best[..., None, None].expand(*z_next.shape[:-1], 1)
    z_best = z_next.gather(-1, index).squeeze(-1)
    if mask is not None:
        z_best = torch.where(mask.any(-1, keepdim=True), z_best, 0.0)
    return reward.unsqueeze(-1) + discount.unsqueeze(-1) * z_best


def tail_fractions(k: int, alpha: float, device) -> torch.Tensor:
    """K evenly spaced midpoint fractions over (0, alpha) [K]: averaging quantiles at them
    gives CVaR_alpha of the return (alpha = 1: its mean), deterministically."""
    return (torch.arange(k, device=device) + 0.5) / k * alpha


class QuantileEmbedding(nn.Module):
    """phi(tau) = ReLU(Linear(cos(pi i tau), i = 0..n-1)) [..., N, width] for taus [..., N]:
    IQN's quantile embedding, multiplied into a state feature of the same width (`mix`,
    `mix_shared`). `linear`: the Linear(n, width) to use (a run's, when unstacked)."""

    runs = 1  # the runs whose weights it holds (RunQuantileEmbedding: trainer.num_seeds)

    def __init__(self, width: int, n: int = 64, linear: nn.Module | None = None):
        super().__init__()
        self.register_buffer("freqs", math.pi * torch.arange(n, dtype=torch.float32))
        self.linear = nn.Sequential(linear or nn.Linear(n, width), nn.ReLU())

    def forward(self, taus: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cos(taus.unsqueeze(-1) * self.freqs))

    def mix(self, feature: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """feature [..., F] times phi of each row's own fractions taus [..., N]: [..., N, F]."""
        return feature.unsqueeze(-2) * self(taus)

    def mix_shared(self, feature: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """feature [..., F] times phi of fractions shared by every row of a run, taus
        [runs, N] (a set per run) or [N] (one for all): [..., N, F]. The embedding then
        costs N rows a run, not N per row."""
        return feature.unsqueeze(-2) * self(taus if taus.dim() == 1 else taus[0])


class RunQuantileEmbedding(QuantileEmbedding):
    """N runs' embeddings as one (trainer.num_seeds, core/runs.py): the Linear's weights
    stacked. Shared fractions come one set per run, [N, K], and run k's rows (run-major,
    as every stacked layer reads them) meet run k's set through run k's weights."""

    def __init__(self, copies) -> None:
        first = copies[0]
        width, n = first.linear[0].out_features, len(first.freqs)
        super().__init__(width, n, linear=RunLinear([c.linear[0] for c in copies]))
        self.runs, self.width = len(copies), width

    def mix_shared(self, feature: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        phi = self(taus.expand(self.runs, -1))  # [N, K, F]
        x = feature.reshape(self.runs, -1, 1, feature.shape[-1]) * phi.unsqueeze(1)
        return x.reshape(*feature.shape[:-1], *phi.shape[-2:])

    def run(self, k: int) -> QuantileEmbedding:
        return QuantileEmbedding(self.width, len(self.freqs), linear=self.linear[0].run(k))


register_stackable(QuantileEmbedding, RunQuantileEmbedding)


class QuantileNetwork(nn.Module):
    """Z_tau(s, a) [..., N, n_actions] for taus [..., N]; forward(td) -> Q [..., A], the
    mean of `act_quantiles` quantiles (kind "q", so PolicyWrapper acts with it)."""

    kind = "q"

    def __init__(
        self,
        encoder,
        n_actions: int,
        hidden=(128, 128),
        cos_embed=64,
        act_quantiles=32,
        eval_cvar=1.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.tau_embed = QuantileEmbedding(encoder.out_features, cos_embed)
        self.head = mlp(encoder.out_features, n_actions, hidden)
        self.act_quantiles = int(act_quantiles)
        self.eval_cvar = float(eval_cvar)

    def quantiles(self, feature: torch.Tensor, taus: torch.Tensor, shared: bool = False):
        """Z [..., N, A] of features [..., F] at each row's fractions taus [..., N], or
        with `shared` at fractions every row of a run shares (QuantileEmbedding.mix_shared)."""
        mix = self.tau_embed.mix_shared if shared else self.tau_embed.mix
        return self.head(mix(feature, taus))

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        feature = self.encoder(obs)
        k, runs = self.act_quantiles, self.tau_embed.runs
        # One set of K fractions per call (and run), shared by every row: the embedding
        # then costs K rows instead of rows x K.
        if exploration_type() == ExplorationType.DETERMINISTIC:
            # Greedy evaluation: evenly spaced midpoints (deterministic) over (0, eval_cvar),
            # so the action maximises CVaR_eval_cvar of the return, the mean of its lowest
            # eval_cvar fraction (1: the mean, risk-neutral; less: risk-averse).
            taus = tail_fractions(k, self.eval_cvar, feature.device).expand(runs, k)
        else:
            taus = torch.rand((runs, k), device=feature.device)
        return self.quantiles(feature, taus, shared=True).mean(-2)


@dataclass
class QuantileKeys(Schema):
    """Sampled quantile fractions and their embedding (IQN and AC-IQN)."""

    cos_embed: int = key(64, "cos(pi i tau), i = 0..cos_embed-1", ge=1)
    quantiles: int = key(8, "N online quantile samples per update", ge=1)
    target_quantiles: int = key(8, "N' target quantile samples", ge=1)
    kappa: float = key(1.0, "quantile Huber threshold", gt=0)


@declare(
    name="iqn",
    lr=1.0e-4,
    max_grad_norm=0.5,
    target_update="hard",
    target_update_interval=10000,
    epsilon_start=0.6,
)
class IQNConfig(QuantileKeys, SequenceReplayKeys, QLearningConfig):
    """IQN (gpurl/agents/iqn.py), with the MarineNav spec's networks and settings as
    defaults."""

    recurrent: str | None = recurrent_key(
        "between the encoder and the quantile head, trained from replayed sequences (R2D2)",
        note=("recurrent IQN (R2D2): sequence replay, read with agent.recurrent only",),
    )

    hidden: list[int] = hidden_key(
        [128, 128], "widths after the quantile embedding x state feature product"
    )
    act_quantiles: int = key(32, "K: act on the mean of K quantiles", ge=1)
    eval_cvar: float = key(
        1.0,
        "greedy evaluation acts on CVaR_alpha (quantiles in (0, alpha)); 1: the mean",
        gt=0,
        le=1,
    )


@register("agent", "iqn", IQNConfig)
class IQNAgent(RecurrentQ, OffPolicyAgent):
    name = "iqn"
    many_seeds = True

    def __init__(self, cfg, info, progress, random_frames: int = 0, compile=EAGER):
        super().__init__(cfg, info, progress, random_frames, compile)
        n_actions = require_discrete(info, "iqn", "sac, td3 or ddpg, or a discrete env")
        head = (
            n_actions,
            cfg.hidden,
            int(cfg.cos_embed),
            int(cfg.act_quantiles),
            float(cfg.get("eval_cvar", 1.0)),
        )
        recurrent, pairs = cfg.get("recurrent"), []
        if recurrent:  # encoder -> core -> the quantile head on the core's output (R2D2)
            pairs = self.build_recurrent(recurrent)
            features = self.core.out_features
            self.z = self.runs.build(lambda: QuantileNetwork(SharedFeatures(features), *head))
        else:
            self.z = self.runs.build(
                lambda: QuantileNetwork(make_encoder(info, cfg.get("encoder")), *head)
            )
        self.z = self.z.to(info.device)
        self.z_target = target_copy(self.z)
        self.targets = TargetPairs(*pairs, (self.z_target, self.z))
        lr = self.runs.value("lr", cfg.lr, info.device)
        params = [*self.recurrent_params(), *self.z.parameters()]
        self.optimizer = make_optimizer(params, lr, self.runs)
        self.policy = PolicyWrapper(
            self.z,
            info,
            progress,
            make_exploration(cfg, info, random_frames, self.runs),
            encoder=self.encoder,
            core=self.core,
        ).to(info.device)
        self.mask_key = info.action_mask_key
        self.learn_step = self.compiled(self.learn if self.core is None else self.learn_sequences)

    def modules(self):
        nets = {"z": self.z, "z_target": self.z_target, **self.recurrent_modules()}
        return {**nets, "exploration": self.policy.exploration}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    def update(self, batch: TensorDict, progress) -> TensorDict:
        metrics = self.learn_step(batch)
        if self.cfg.target_update == "hard" and is_every(progress, self.cfg.target_update_interval):
            self.targets.copy()
        return metrics

    def learn(self, batch: TensorDict) -> TensorDict:
        """One gradient step on N online x N' target quantiles (tensors in and out)."""
        cfg = self.cfg
        nxt = batch["next"]
        n, n_next = int(cfg.quantiles), int(cfg.target_quantiles)
        with torch.no_grad():
            feature_next = self.z_target.encoder(nxt)
            taus_next = torch.rand((*feature_next.shape[:-1], n_next), device=feature_next.device)
            z_next = self.z_target.quantiles(feature_next, taus_next)  # [B, N', A]
            mask = nxt.get(self.mask_key) if self.mask_key else None
            target = iqn_target(z_next, batch["reward"], batch["discount"], mask)
        feature = self.z.encoder(batch)
        taus = torch.rand((*feature.shape[:-1], n), device=feature.device)
        z = self.z.quantiles(feature, taus)  # [B, N, A]
        action = batch["action"].long()[..., None, None].expand(*z.shape[:-1], 1)
        z_taken = z.gather(-1, action).squeeze(-1)  # [B, N]
        elementwise = quantile_huber_loss(z_taken, target, taus, float(cfg.kappa))
        loss = weighted_mean(elementwise, batch, self.uniform_sample)
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(loss=loss.detach(), q=z_taken.detach().mean())
        if cfg.prioritized:  # the replay's new priorities: the quantile loss
            metrics.set("priority", elementwise.detach())
        return metrics

    def learn_sequences(self, batch: TensorDict) -> TensorDict:
        """One gradient step on a batch of B sequences (trainers/sequence_replay.py): the
        online and target cores unrolled from each sequence's stored state (the burn-in
        without gradient), then N online x N' target quantiles at each of the L trained
        steps, their n-step targets bootstrapped from the target core's state."""
        cfg, L = self.cfg, self.sequence_length
        n, n_next = int(cfg.quantiles), int(cfg.target_quantiles)
        done = batch["done"].transpose(0, 1)  # [W, B]
        start = batch[RECURRENT_STATE]
        last = batch["last"].transpose(0, 1) - self.burn_in  # [L, B]
        nxt = batch["next"]
        out, _ = self.unroll_window(self.encoder, self.core, batch, start, done)
        with torch.no_grad():
            target_core = (self.encoder_target, self.core_target)
            _, target_after = self.unroll_window(*target_core, batch, start, done)
            feature_next = self.bootstrap_features(*target_core, nxt, target_after, last)
            taus_next = torch.rand((*feature_next.shape[:-1], n_next), device=out.device)
            z_next = self.time_major(self.z_target.quantiles, feature_next, taus_next)
            mask = nxt.get(self.mask_key).transpose(0, 1) if self.mask_key else None
            reward, discount = batch["reward"].transpose(0, 1), batch["discount"].transpose(0, 1)
            target = iqn_target(z_next, reward, discount, mask)  # [L, B, N']
        feature = out[:L]
        taus = torch.rand((*feature.shape[:-1], n), device=out.device)
        z = self.time_major(self.z.quantiles, feature, taus)  # [L, B, N, A]
        action = batch["action"].transpose(0, 1).long()[..., None, None]
        z_taken = z.gather(-1, action.expand(*z.shape[:-1], 1)).squeeze(-1)  # [L, B, N]
        elementwise = quantile_huber_loss(z_taken, target, taus, float(cfg.kappa))  # [L, B]
        # every trained step counts, each sequence weighted by its importance weight
        loss = (batch["weight"] * elementwise.mean(0)).mean()
        clip_and_step(self.optimizer, loss, cfg.max_grad_norm)
        if cfg.target_update != "hard":
            self.targets.polyak(cfg.tau)
        metrics = scalars(loss=loss.detach(), q=z_taken.detach().mean())
        if cfg.prioritized:  # R2D2's mix of the steps' max and mean (of the quantile loss)
            metrics.set("priority", sequence_priority(elementwise.detach(), self.eta))
        return metrics
