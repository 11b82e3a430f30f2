"""The packing agent's two networks (Huang et al., RA-L 2023; docs/envs/packing.md).

ManagerNet scores candidate items: a ResNet-style trunk over each candidate's 7 maps
(box heightmap; the item's tops from front, rear, left, right and at identity; its bottom
at identity), a scalar branch over the candidate's 8 scalars, and an MLP head to one Q
per candidate. The spec's network is ResNet-18 (channels 64-128-256-512, two basic blocks
a stage) with an 8 -> 64 scalar branch and a 576 -> 128 -> 128 -> 1 head, 11.3M params.

WorkerUNet scores placements: a U-Net over one orientation's 3 maps (normalised box
heightmap, centred item top, centred item bottom) and its placement maps (resting height,
top and legality of each corner, over the corner's cells) to one score per cell. The spec's
network has channels 32-64-128-256 (two 3x3 convs a level, three poolings, three
transposed convs with skip connections, a 1x1 conv to one channel), 1.9M params. Q of
corner (x, y) is the score at exactly that cell, plus (with `corner_features`) a small
MLP over the exact resting height of that placement and its top: the same value is
trained and acted on (the spec's FIX).

Both sizes are config: the spec's full networks for the GPU preset and small ones for
CPU training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gpurl.core.config import Schema, key
from gpurl.envs.packing.features import MANAGER_CHANNELS, MANAGER_SCALARS, WORKER_CHANNELS
from gpurl.errors import ConfigError

# the worker's input: the spec's 3 maps, plus resting height, top and legality per corner
WORKER_INPUTS = WORKER_CHANNELS + 3
# Both networks keep their conv weights and inputs channels-last (NHWC), the layout
# tensor cores want on CUDA; on this CPU's oneDNN it was the faster one for both at
# R = 200, with the same outputs to 1e-7 (inline timings, 2026-11-24: U-Net 1.5x,
# manager 1.2x; the end-to-end figures are bench_seed_packing's,
# docs/benchmarks.md#packing-seed-benchmark).
CONV_LAYOUT = torch.channels_last
PLACEMENT_FEATURES = 3  # the placement term's inputs: z, top and the void under the item


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch-free (GroupNorm(1)) normalisation.

    GroupNorm instead of BatchNorm: the manager scores one env's candidates at act time and
    a replay batch at train time, and a Q-network's output should not depend on which."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(1, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(1, c_out)
        self.skip = None
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.GroupNorm(1, c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        return F.relu(y + (x if self.skip is None else self.skip(x)))


@dataclass
class ManagerConfig(Schema):
    """The manager: a ResNet trunk over 7 maps, a scalar branch and an MLP head."""

    channels: list[int] = key([64, 128, 256, 512], "ResNet stage widths", ge=1, nonempty=True)
    blocks: list[int] = key(
        [2, 2, 2, 2], "residual blocks per stage (one per channels entry)", ge=1, nonempty=True
    )
    stem: int = key(64, "width of the stem convolution", ge=1)
    scalar_features: int = key(64, "the 8 candidate scalars through Linear(8, this)", ge=1)
    hidden: list[int] = key([128, 128], "head widths before the score", ge=1)


class ManagerNet(nn.Module):
    def __init__(
        self,
        channels: Sequence[int] = (64, 128, 256, 512),
        blocks: Sequence[int] = (2, 2, 2, 2),
        stem: int = 64,
        scalar_features: int = 64,
        hidden: Sequence[int] = (128, 128),
    ):
        super().__init__()
        # ResNet's stem: a strided 7x7 conv and a max-pool quarter the map
        layers: list[nn.Module] = [
            nn.Conv2d(MANAGER_CHANNELS, stem, 7, 2, 3, bias=False),
            nn.GroupNorm(1, stem),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]
        c_in = stem
        for i, (c, n) in enumerate(zip(channels, blocks, strict=True)):
            for j in range(n):
                layers.append(BasicBlock(c_in, c, 2 if (j == 0 and i > 0) else 1))
                c_in = c
        self.trunk = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.scalars = nn.Sequential(nn.Linear(MANAGER_SCALARS, scalar_features), nn.ReLU())
        head: list[nn.Module] = []
        width = c_in + scalar_features
        for h in hidden:
            head += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.head = nn.Sequential(*head, nn.Linear(width, 1))
        self.to(memory_format=CONV_LAYOUT)

    def forward(self, maps: torch.Tensor, scalars: torch.Tensor) -> torch.Tensor:
        """maps [..., 7, R, R], scalars [..., 8] -> Q [...]."""
        lead = maps.shape[:-3]
        x = maps.reshape(-1, *maps.shape[-3:]).contiguous(memory_format=CONV_LAYOUT)
        x = self.trunk(x)
        s = self.scalars(scalars.reshape(-1, scalars.shape[-1]))
        return self.head(torch.cat((x, s), -1)).reshape(lead)


def _double_conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(c_out, c_out, 3, padding=1),
        nn.ReLU(),
    )


@dataclass
class WorkerConfig(Schema):
    """The worker: a U-Net over the maps, scoring each placement."""

    channels: list[int] = key([32, 64, 128, 256], "U-Net widths; [] = no U-Net", ge=1)
    corner_features: bool = key(
        True, "+ MLP over the placement's z and top relative to the pile's peak"
    )


class WorkerUNet(nn.Module):
    def __init__(self, channels: Sequence[int] = (32, 64, 128, 256), corner_features: bool = True):
        super().__init__()
        channels = list(channels)
        self.down = nn.ModuleList()
        c_in = WORKER_INPUTS
        for c in channels:
            self.down.append(_double_conv(c_in, c))
            c_in = c
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for c in reversed(channels[:-1]):
            self.up.append(nn.ConvTranspose2d(c_in, c, 2, 2))
            self.merge.append(_double_conv(2 * c, c))
            c_in = c
        self.levels = len(channels)
        # no channels: no U-Net, Q is the placement term alone (an ablation, and the CPU
        # preset's worker: tests/test_hrl_dqn.py, docs/results.md#packing)
        self.out = nn.Conv2d(c_in, 1, 1) if channels else None
        if self.out is not None:
            # scores start at 0 everywhere: a cell's score moves only as training reaches
            # it, so the argmax over thousands of placements starts from the placement term
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)
        if not channels and not corner_features:
            raise ConfigError("agent.worker needs channels (a U-Net) or corner_features")
        # Q's per-placement term over that exact placement's resting height z and top
        # z + max ht (relative to the pile's peak) and the void left under it, all / H
        self.corner = (
            nn.Sequential(nn.Linear(PLACEMENT_FEATURES, 16), nn.ReLU(), nn.Linear(16, 1))
            if corner_features
            else None
        )
        # a state-value term over the state's 8 scalars (the chosen item's size, the
        # heightmap's mean / max / fill): the same for every placement of a state, it
        # carries the value that differs between states, so the placement terms learn
        # what differs between placements (without it, a placement term that cannot see
        # the state learned "higher is better": late, full boxes are worth more)
        self.state = nn.Sequential(nn.Linear(MANAGER_SCALARS, 32), nn.ReLU(), nn.Linear(32, 1))
        # Both terms start at 0, as the U-Net's scores do. A random initial slope of the
        # state term over the heightmap's fill (up or down, by seed) is fed back through
        # the bootstrap into the placement term: a seed whose first state term rose with
        # fill learned "higher is better" (docs/results.md#packing). From 0, the
        # first slopes are the rewards' own.
        for head in (self.corner, self.state):
            if head is not None:
                nn.init.zeros_(head[-1].weight)
                nn.init.zeros_(head[-1].bias)
        self.to(memory_format=CONV_LAYOUT)

    @property
    def spatial(self) -> bool:
        """Whether there is a U-Net (else every cell scores 0 and Q is the placement term)."""
        return self.out is not None

    def scores(self, maps: torch.Tensor) -> torch.Tensor:
        """maps [..., 6, R, R] -> a score per cell [..., R, R]."""
        lead, r = maps.shape[:-3], maps.shape[-1]
        if not self.spatial:
            return maps.new_zeros(*lead, r, r)
        x = maps.reshape(-1, *maps.shape[-3:]).contiguous(memory_format=CONV_LAYOUT)
        # pad to a multiple of 2^(levels - 1) so every pooling halves exactly; crop after
        unit = 2 ** (self.levels - 1)
        pad = -r % unit
        if pad:
            x = F.pad(x, (0, pad, 0, pad))
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1]), strict=True):
            x = merge(torch.cat((up(x), skip), 1))
        return self.out(x)[:, 0, :r, :r].reshape(*lead, r, r)

    def state_term(self, scalars: torch.Tensor) -> torch.Tensor:
        """scalars [B, 8] -> [B]."""
        return self.state(scalars).squeeze(-1)

    def corner_term(self, z: torch.Tensor, top: torch.Tensor, void: torch.Tensor) -> torch.Tensor:
        """The per-placement term for resting heights z, tops z + max ht and void depths
        under the item (all / H, same shapes)."""
        if self.corner is None:
            return torch.zeros_like(z)
        return self.corner(torch.stack((z, top, void), -1)).squeeze(-1)
