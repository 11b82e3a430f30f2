"""Noisy linear layers (Fortunato et al. 2018, factorised Gaussian noise): exploration
learned by the network itself, as Rainbow uses it.

    y = (mu_W + sigma_W * eps_W) x + mu_b + sigma_b * eps_b,
    eps_W = f(eps_out) f(eps_in)^T, eps_b = f(eps_out), f(x) = sign(x) sqrt(|x|)

The noise lives in buffers and changes only when `resample()` is called (the agent
calls it once per update, for its online and target networks), so a batch and the
acting steps between two updates share one draw. Greedy evaluation, inside
`set_exploration_type(DETERMINISTIC)`, uses the means alone; training and exploring
use the noise. Everything stays on the device.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torchrl.envs.utils import ExplorationType, exploration_type


def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))
        bound = 1 / math.sqrt(in_features)  # the paper's initialisation
        nn.init.uniform_(self.weight_mu, -bound, bound)
        nn.init.uniform_(self.bias_mu, -bound, bound)
        nn.init.constant_(self.weight_sigma, sigma0 * bound)
        nn.init.constant_(self.bias_sigma, sigma0 * bound)
        self.resample()

    @torch.no_grad()
    def resample(self) -> None:
        self.eps_in.copy_(_scaled(torch.randn_like(self.eps_in)))
        self.eps_out.copy_(_scaled(torch.randn_like(self.eps_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if exploration_type() == ExplorationType.DETERMINISTIC:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
        bias = self.bias_mu + self.bias_sigma * self.eps_out
        return nn.functional.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


def resample_noise(module: nn.Module) -> None:
    """Draw new noise for every NoisyLinear inside `module` (no-op without any)."""
    for m in module.modules():
        if isinstance(m, NoisyLinear):
            m.resample()
