"""Encoders turn an observation into a feature vector; heads (heads.py) sit on top.

An encoder has an `out_features` attribute. Flat observations pass through a
FlatEncoder (the MLP layers live in the heads); image observations [C, H, W], such as
uint8 pixel frames, go through a CNNEncoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import torch
from torch import nn


def mlp(
    in_features: int,
    out_features: int | None,
    hidden: Sequence[int] = (256, 256),
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """Linear+activation for each hidden width, then a final Linear if out_features is set."""
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), activation()]
        width = h
    if out_features is not None:
        layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


class FlatEncoder(nn.Module):
    """Flattens the trailing observation dims; float conversion only."""

    def __init__(self, shape: Sequence[int]):
        super().__init__()
        self.ndim = len(shape)
        self.out_features = prod(shape)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.flatten(-self.ndim).float() if self.ndim != 1 else obs.float()


class CNNEncoder(nn.Module):
    """The Nature-DQN convolution stack for frames [..., C, H, W] (uint8 or float).

    `scale` divides the input first (3 for gpurl's 4-shade pixel frames, 255 for RGB).
    """

    def __init__(self, shape: Sequence[int], scale: float = 255.0, features: int = 512):
        super().__init__()
        c, h, w = shape
        self.scale = scale
        self.convs = nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, c, h, w)).shape[-1]
        self.fc = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.out_features = features

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:]).float() / self.scale
        return self.fc(self.convs(x)).reshape(*batch, -1)


def make_encoder(shape: Sequence[int], pixel_scale: float = 255.0) -> nn.Module:
    """CNN for [C, H, W] observations, flat pass-through for everything else."""
    if len(shape) == 3:
        return CNNEncoder(shape, scale=pixel_scale)
    return FlatEncoder(shape)
