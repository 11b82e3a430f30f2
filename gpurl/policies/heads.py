"""Networks on top of an encoder: Q-values, deterministic and tanh-Gaussian actors, critics.

Every network reads a TensorDict of observation entries (the encoder picks its
entries) and keeps the TensorDict's batch dims, so the same module acts for [envs],
[envs, robots] and a replay sample [batch]. `kind` tells PolicyWrapper how to act with
it. Actors act in the normalised box [-1, 1]^d; PolicyWrapper maps that to the env's
bounds, and agents map stored env actions back before feeding critics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import torch
from tensordict import TensorDictBase
from torch import nn

from gpurl.core.runs import LearnedVector
from gpurl.errors import ConfigError
from gpurl.policies.networks import mlp
from gpurl.policies.noisy import NoisyLinear


class QNetwork(nn.Module):
    """Q-values [..., n_actions]; `dueling` splits into value and advantage streams;
    `noisy_sigma0` > 0 makes every layer after the encoder a NoisyLinear (noisy.py);
    `layer_norm` puts a LayerNorm after each hidden layer (PQN's network).

    With a `support` (C51, Bellemare et al. 2017) each action gets a categorical return
    distribution over the support's atoms: `logits(obs)` [..., n_actions, atoms], and
    forward gives its mean. Dueling then combines value and advantage logits per atom
    (Rainbow's form)."""

    kind = "q"

    def __init__(
        self,
        encoder: nn.Module,
        n_actions: int,
        hidden: Sequence[int] = (256, 256),
        dueling=False,
        noisy_sigma0: float = 0.0,
        support: torch.Tensor | None = None,
        layer_norm: bool = False,
    ):
        super().__init__()
        self.encoder = encoder
        self.dueling = dueling
        self.n_actions = n_actions
        self.atoms = 1 if support is None else support.numel()
        self.support = None if support is None else nn.Buffer(support.float())
        linear = partial(NoisyLinear, sigma0=noisy_sigma0) if noisy_sigma0 > 0 else nn.Linear
        self.trunk = mlp(encoder.out_features, None, hidden, layer_norm=layer_norm, linear=linear)
        width = hidden[-1] if hidden else encoder.out_features
        self.advantage = linear(width, n_actions * self.atoms)
        self.value = linear(width, self.atoms) if dueling else None

    def logits(self, obs: TensorDictBase) -> torch.Tensor:
        """[..., n_actions, atoms] (atoms = 1 without a support: the Q-values)."""
        x = self.trunk(self.encoder(obs))
        adv = self.advantage(x).unflatten(-1, (self.n_actions, self.atoms))
        if self.value is None:
            return adv
        return self.value(x).unsqueeze(-2) + adv - adv.mean(-2, keepdim=True)

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        if self.support is None and self.value is None:  # the Q-values: no atom axis
            return self.advantage(self.trunk(self.encoder(obs)))
        out = self.logits(obs)
        if self.support is None:
            return out.squeeze(-1)
        return (out.softmax(-1) * self.support).sum(-1)


SQUASHES = {"tanh": torch.tanh, "atan": lambda x: (2 / math.pi) * torch.atan(x)}


class DeterministicActor(nn.Module):
    """mu(s) in (-1, 1)^d through a squash: tanh, or (2 / pi) atan (the MarineNav spec's
    actors, whose gradient fades more slowly away from 0)."""

    kind = "deterministic"

    def __init__(
        self,
        encoder: nn.Module,
        action_dim: int,
        hidden: Sequence[int] = (256, 256),
        squash: str = "tanh",
    ):
        super().__init__()
        if squash not in SQUASHES:
            raise ConfigError(f"unknown actor squash '{squash}': use {' or '.join(SQUASHES)}")
        self.encoder = encoder
        self.net = mlp(encoder.out_features, action_dim, hidden)
        self.squash = SQUASHES[squash]

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return self.squash(self.net(self.encoder(obs)))


class TanhGaussianActor(nn.Module):
    """A Gaussian squashed by tanh, as in SAC.

    forward(obs) is the greedy action tanh(mean); sample(obs) draws a reparameterised
    action and its log-probability with the tanh change-of-variables correction
    log(1 - tanh(u)^2): `correction="exact"` computes it as 2 (log 2 - u - softplus(-2u)),
    exact and stable; `"epsilon"` as log(1 - tanh(u)^2 + 1e-6), Stable-Baselines3's and
    CleanRL's, whose penalty on a saturated action stops growing (and its gradient
    vanishes) once |u| passes about 7.
    """

    kind = "stochastic"

    def __init__(
        self,
        encoder: nn.Module,
        action_dim: int,
        hidden: Sequence[int] = (256, 256),
        log_std: str = "squash",
        correction: str = "exact",
    ):
        super().__init__()
        bounds = {"squash": (-5.0, 2.0), "clamp": (-20.0, 2.0)}
        if log_std not in bounds:
            raise ValueError(f"log_std must be squash or clamp, got {log_std!r}")
        if correction not in ("exact", "epsilon"):
            raise ValueError(f"correction must be exact or epsilon, got {correction!r}")
        self.exact = correction == "exact"
        self.encoder = encoder
        self.net = mlp(encoder.out_features, 2 * action_dim, hidden)
        self.squash = log_std == "squash"
        self.log_std_min, self.log_std_max = bounds[log_std]

    def _mean_log_std(self, obs):
        mean, log_std = self.net(self.encoder(obs)).chunk(2, dim=-1)
        if self.squash:
            # smoothly into the bounds (no hard clamp: gradients stay alive); an output
            # near 0 starts the std at exp(-1.5) = 0.22
            log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (
                torch.tanh(log_std) + 1
            )
        else:  # Stable-Baselines3's: a hard clamp, so an output near 0 starts the std at 1
            log_std = log_std.clamp(self.log_std_min, self.log_std_max)
        return mean, log_std

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return torch.tanh(self._mean_log_std(obs)[0])

    def sample(self, obs: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self._mean_log_std(obs)
        std = log_std.exp()
        noise = torch.randn_like(mean)
        u = mean + std * noise
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        action = torch.tanh(u)
        if self.exact:
            log_det = 2 * (math.log(2) - u - nn.functional.softplus(-2 * u))
        else:
            log_det = torch.log(1 - action.square() + 1e-6)
        return action, log_prob - log_det.sum(-1)


class Critic(nn.Module):
    """Q(s, a) for a normalised action a in [-1, 1]^d."""

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: Sequence[int] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features + action_dim, 1, hidden)

    def forward(self, obs: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat((self.encoder(obs), action), dim=-1)).squeeze(-1)


# -- on-policy actor-critic heads --------------------------------------------------------
# An on-policy agent re-evaluates the actions it stored under the current parameters:
# `evaluate(obs, action) -> (log_prob, entropy)`, both [*batch], in one forward pass.


class CategoricalActor(nn.Module):
    """Logits [..., n_actions] over a discrete action (PolicyWrapper samples them)."""

    kind = "categorical"

    def __init__(
        self,
        encoder: nn.Module,
        n_actions: int,
        hidden: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
    ):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features, n_actions, hidden, activation)

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return self.net(self.encoder(obs))

    def evaluate(self, obs: TensorDictBase, action: torch.Tensor):
        log_probs = self(obs).log_softmax(-1)
        log_prob = log_probs.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return log_prob, entropy

    def log_prob(self, obs: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        return self.evaluate(obs, action)[0]


class ClippedGaussianActor(nn.Module):
    """A Gaussian with a state-independent log-std whose samples are clipped to [-1, 1].

    Clipping makes the action distribution mixed: a density inside the box and a point
    mass at each bound, P(a = 1) = P(u >= 1) = Phi((mean - 1) / std). The log-prob uses
    exactly that, so a stored clipped action gets the same probability at collection
    time and when the update re-evaluates it (the PPO ratio starts at exactly 1), and
    the bound's mass still moves with the mean (no dead gradient at the bounds).
    forward(obs) is the greedy action clip(mean).
    """

    kind = "stochastic"
    # an action within this of a bound counts as the bound: scale/unscale round-trip
    bound_tolerance = 1e-6

    def __init__(
        self,
        encoder: nn.Module,
        action_dim: int,
        hidden: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
        init_log_std: float = 0.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features, action_dim, hidden, activation)
        # a module, so that N runs' log-stds stack (core/runs.py): log_std(x) per row
        self.log_std = LearnedVector(torch.full((action_dim,), float(init_log_std)))

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return self.net(self.encoder(obs)).clamp(-1.0, 1.0)

    def _log_prob(self, mean, action, log_std=None):
        log_std = self.log_std(mean) if log_std is None else log_std
        std = log_std.exp()
        z = (action - mean) / std
        inside = -0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)
        upper = torch.special.log_ndtr((mean - 1.0) / std)
        lower = torch.special.log_ndtr((-1.0 - mean) / std)
        tol = self.bound_tolerance
        log_prob = torch.where(
            action >= 1.0 - tol, upper, torch.where(action <= -1.0 + tol, lower, inside)
        )
        return log_prob.sum(-1)

    def sample(self, obs: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.net(self.encoder(obs))
        action = (mean + self.log_std(mean).exp() * torch.randn_like(mean)).clamp(-1.0, 1.0)
        return action, self._log_prob(mean, action)

    def evaluate(self, obs: TensorDictBase, action: torch.Tensor):
        mean = self.net(self.encoder(obs))
        log_std = self.log_std(mean)
        # the unclipped Gaussian's entropy: a smooth bonus that ignores the clipping
        entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)
        return self._log_prob(mean, action, log_std), entropy

    def log_prob(self, obs: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        return self.evaluate(obs, action)[0]


class ValueNetwork(nn.Module):
    """V(s) [*batch]."""

    def __init__(
        self,
        encoder: nn.Module,
        hidden: Sequence[int] = (64, 64),
        activation: type[nn.Module] = nn.Tanh,
    ):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features, 1, hidden, activation)

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return self.net(self.encoder(obs)).squeeze(-1)
