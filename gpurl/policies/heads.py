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

import torch
from tensordict import TensorDictBase
from torch import nn

from gpurl.policies.networks import mlp


class QNetwork(nn.Module):
    """Q-values [..., n_actions]; `dueling` splits into value and advantage streams."""

    kind = "q"

    def __init__(
        self, encoder: nn.Module, n_actions: int, hidden: Sequence[int] = (256, 256), dueling=False
    ):
        super().__init__()
        self.encoder = encoder
        self.dueling = dueling
        self.trunk = mlp(encoder.out_features, None, hidden)
        width = hidden[-1] if hidden else encoder.out_features
        self.advantage = nn.Linear(width, n_actions)
        self.value = nn.Linear(width, 1) if dueling else None

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        x = self.trunk(self.encoder(obs))
        adv = self.advantage(x)
        if self.value is None:
            return adv
        return self.value(x) + adv - adv.mean(-1, keepdim=True)


class DeterministicActor(nn.Module):
    """mu(s) in [-1, 1]^d through a tanh."""

    kind = "deterministic"

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: Sequence[int] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features, action_dim, hidden)

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return torch.tanh(self.net(self.encoder(obs)))


class TanhGaussianActor(nn.Module):
    """A Gaussian squashed by tanh, as in SAC.

    forward(obs) is the greedy action tanh(mean); sample(obs) draws a reparameterised
    action and its log-probability with the tanh change-of-variables correction
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which is exact and stable.
    """

    kind = "stochastic"

    def __init__(
        self,
        encoder: nn.Module,
        action_dim: int,
        hidden: Sequence[int] = (256, 256),
        log_std_bounds: tuple[float, float] = (-5.0, 2.0),
    ):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features, 2 * action_dim, hidden)
        self.log_std_min, self.log_std_max = log_std_bounds

    def _mean_log_std(self, obs):
        mean, log_std = self.net(self.encoder(obs)).chunk(2, dim=-1)
        # squash log_std smoothly into its bounds (no hard clamp: gradients stay alive)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (
            torch.tanh(log_std) + 1
        )
        return mean, log_std

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        return torch.tanh(self._mean_log_std(obs)[0])

    def sample(self, obs: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self._mean_log_std(obs)
        std = log_std.exp()
        noise = torch.randn_like(mean)
        u = mean + std * noise
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob = log_prob - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), log_prob


class Critic(nn.Module):
    """Q(s, a) for a normalised action a in [-1, 1]^d."""

    def __init__(self, encoder: nn.Module, action_dim: int, hidden: Sequence[int] = (256, 256)):
        super().__init__()
        self.encoder = encoder
        self.net = mlp(encoder.out_features + action_dim, 1, hidden)

    def forward(self, obs: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat((self.encoder(obs), action), dim=-1)).squeeze(-1)
