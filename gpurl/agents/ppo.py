"""PPO (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus.

The actor (categorical logits, or a clipped Gaussian with a state-independent log-std
for continuous actions) and the critic V(s) have separate trunks, as in CleanRL's
ppo.py; one Adam optimiser steps both. With `agent.shared_encoder` they share one
encoder (CleanRL's ppo_atari.py shares its CNN): it runs once per acting step and once
per minibatch, and both losses train it.

The on-policy trainer (trainers/on_policy.py) collects a rollout with the policy, which
stores "sample_log_prob" and "state_value" beside each action; `compute_targets` turns
it into GAE advantages (normalised over the rollout with agent.normalize_advantage)
and value targets (advantage + value); the trainer then hands `update` shuffled
minibatches of the observation entries, "action" (env-scaled), the stored log-prob and
value, "advantage" and "value_target".

The losses are pure functions below (ppo_policy_loss, ppo_value_loss), each checked on
hand-computed numbers in tests/test_on_policy.py, as are the targets. A2C (a2c.py) is
this agent without clipping, one pass per rollout.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from gpurl.agents.base import (
    OnPolicyAgent,
    clip_and_step,
    make_optimizer,
    require_single_agent,
)
from gpurl.core.compile import EAGER
from gpurl.core.returns import gae
from gpurl.errors import ConfigError
from gpurl.policies import (
    LOG_PROB,
    VALUE,
    CategoricalActor,
    ClippedGaussianActor,
    PolicyWrapper,
    SharedFeatures,
    ValueNetwork,
    make_encoder,
    with_features,
)

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def ppo_policy_loss(ratio: Tensor, advantage: Tensor, clip: float | None) -> Tensor:
    """mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))); no clipping when clip is None
    (then the gradient at r = 1 is A grad log pi, the plain policy gradient of A2C)."""
    loss = -advantage * ratio
    if clip is not None:
        loss = torch.maximum(loss, -advantage * ratio.clamp(1.0 - clip, 1.0 + clip))
    return loss.mean()


def ppo_value_loss(value: Tensor, old_value: Tensor, target: Tensor, clip: float | None) -> Tensor:
    """0.5 mean((V - R)^2), or with clipping 0.5 mean(max((V - R)^2, (V_clip - R)^2)),
    V_clip = V_old + clip(V - V_old, -eps, eps)."""
    loss = (value - target).square()
    if clip is not None:
        clipped = old_value + (value - old_value).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - target).square())
    return 0.5 * loss.mean()


def normalize_advantage(advantage: Tensor, eps: float = 1e-8, runs: int = 1) -> Tensor:
    """(A - mean) / (std + eps), in place, on the device; over a rollout [T, N x E] of
    N runs, each run's statistics its own."""
    if runs == 1:
        mean, std = advantage.mean(), advantage.std()
        return advantage.sub_(mean).div_(std + eps)
    per_run = advantage.unflatten(1, (runs, -1)).transpose(0, 1).reshape(runs, -1)
    mean, std = per_run.mean(1), per_run.std(1)
    shape = (1, runs, 1, *([1] * (advantage.dim() - 2)))
    view = advantage.unflatten(1, (runs, -1))
    view.sub_(mean.reshape(shape)).div_(std.reshape(shape) + eps)
    return advantage


def _init_layers(net: nn.Sequential, out_gain: float) -> None:
    """Orthogonal weights (gain sqrt 2 inside, out_gain on the output), zero biases."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, out_gain if i == len(linears) - 1 else math.sqrt(2))
        nn.init.zeros_(layer.bias)


def _optional(value) -> float | None:
    return None if value is None or float(value) <= 0 else float(value)


class PPOAgent(OnPolicyAgent):
    name = "ppo"
    many_seeds = True

    def __init__(self, cfg, info, progress, compile=EAGER):
        super().__init__(cfg, info, progress, compile)
        require_single_agent(info, self.name, "an off-policy agent (dqn, ddpg, td3, sac)")
        if cfg.activation not in ACTIVATIONS:
            raise ConfigError(
                f"agent.activation={cfg.activation} is unknown: use {' or '.join(ACTIVATIONS)}"
            )
        act, enc, device = ACTIVATIONS[cfg.activation], cfg.get("encoder"), info.device
        hidden = list(cfg.hidden)
        # one trunk for both heads, or a trunk each
        runs = self.runs
        self.encoder = None
        if cfg.get("shared_encoder"):
            self.encoder = runs.build(lambda: make_encoder(info, enc)).to(device)

        def trunk():
            if self.encoder is None:
                return make_encoder(info, enc)
            return SharedFeatures(self.encoder.out_features)

        def actor():
            if info.discrete:
                net = CategoricalActor(trunk(), info.n_actions, hidden, act)
            else:
                net = ClippedGaussianActor(trunk(), info.action_dim, hidden, act, cfg.init_log_std)
            _init_layers(net.net, 0.01)
            return net

        def critic():
            net = ValueNetwork(trunk(), hidden, act)
            _init_layers(net.net, 1.0)
            return net

        self.actor = runs.build(actor).to(device)
        self.critic = runs.build(critic).to(device)
        shared = [] if self.encoder is None else list(self.encoder.parameters())
        self.params = [*shared, *self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = make_optimizer(self.params, self.lr, runs, eps=1e-5)
        self.policy = PolicyWrapper(
            self.actor,
            info,
            progress,
            value=self.critic,
            write_log_prob=True,
            encoder=self.encoder,
        ).to(device)
        self.gae_lambda = float(cfg.gae_lambda)
        self.clip, self.value_clip = self.clips(cfg)
        self.normalize_advantage = bool(cfg.normalize_advantage)
        # a float, or one per run (trainer.per_seed), spread over each run's rows in learn
        self.entropy_coef = self.runs.value("entropy_coef", cfg.entropy_coef, device)
        self.learn_step = self.compiled(self.learn)

    def clips(self, cfg) -> tuple[float | None, float | None]:
        """(surrogate clip, value clip); None where off (a null or non-positive value)."""
        return _optional(cfg.clip_epsilon), _optional(cfg.value_clip)

    def modules(self):
        shared = {} if self.encoder is None else {"encoder": self.encoder}
        return {**shared, "actor": self.actor, "critic": self.critic}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    # -- targets -------------------------------------------------------------------------------
    def value(self, obs) -> Tensor:
        return self.critic(with_features(self.encoder, obs))

    @torch.no_grad()
    def compute_targets(self, rollout: TensorDict, last_obs) -> TensorDict:
        """GAE advantages and value targets [T, N] (core/returns.gae), the advantages
        normalised over the rollout when agent.normalize_advantage."""
        reward, next_value, terminated, done = self.bootstrap(rollout, last_obs)
        value = rollout.get(VALUE)
        out = self.target_buffers(value, "advantage", "value_target")
        advantage, value_target = out.get("advantage"), out.get("value_target")
        gae(
            reward,
            value,
            next_value,
            terminated,
            done,
            self.runs.per_row(self.gamma, reward[0]),  # a float, or per env with N runs
            self.gae_lambda,
            out=(advantage, value_target),
        )
        if self.normalize_advantage:
            normalize_advantage(advantage, runs=self.runs.n)
        return out

    def learn(self, batch: TensorDict) -> TensorDict:
        """One minibatch gradient step: tensors in, tensors out (compile.update takes it)."""
        cfg = self.cfg
        action = batch.get(self.info.action_key)
        if not self.info.discrete:
            action = self.policy.unscale(action)
        advantage = batch["advantage"]
        obs = with_features(self.encoder, batch)
        log_prob, entropy = self.actor.evaluate(obs, action)
        log_ratio = log_prob - batch[LOG_PROB]
        ratio = log_ratio.exp()
        policy_loss = ppo_policy_loss(ratio, advantage, self.clip)
        value = self.critic(obs)
        value_loss = ppo_value_loss(value, batch[VALUE], batch["value_target"], self.value_clip)
        coef = self.entropy_coef
        if isinstance(coef, float):
            bonus = coef * entropy.mean()
        else:
            bonus = (self.runs.per_row(coef, entropy) * entropy).mean()
        entropy = entropy.mean()
        loss = policy_loss + cfg.value_coef * value_loss - bonus
        clip_and_step(self.optimizer, self.params, loss, _optional(cfg.max_grad_norm))
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clipped = ((ratio - 1).abs() > (self.clip or math.inf)).float().mean()
        return TensorDict(
            policy_loss=policy_loss.detach(),
            value_loss=value_loss.detach(),
            entropy=entropy.detach(),
            approx_kl=approx_kl,
            clip_fraction=clipped,
            lr=self.lr.mean(),
        )
