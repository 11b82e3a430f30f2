"""Encoders built from the env's specs: a TensorDict of observation entries in, one
feature vector [*batch, out_features] out. Heads (heads.py) sit on top.

Each observation entry gets the encoder its spec calls for, and their features are
concatenated:
- a vector [d] (or a scalar): used as is, or through Linear(d, embed)+ReLU when
  `embed` is set (MarineNav's self state: 7 -> 56);
- an object list [M, D] with a slot mask entry ("objects" + "objects_mask"): each slot
  through Linear(D, object_embed)+ReLU, masked slots zeroed, slots concatenated
  (MarineNav's 5 objects: 5 x 40);
- an image: [C, H, W], or [H, W] of integers, through the Nature-DQN convolutions
  (`cnn: nature`, the default) or the tile-grid convolutions (`cnn: tile`: an 8 x 8
  stride-8 convolution that sees each 8 x 8 tile of a Game-Boy-like frame once, 72 x 80
  -> 9 x 10 tiles, then a 3 x 3 convolution over the tile grid), MinAtar's one layer
  (`cnn: minatar`: 16 3 x 3 filters, stride 1, for 10 x 10 grids) or none (`cnn: flat`:
  the frame flattened into the Linear layer, an MLP), scaled to [0, 1] by
  the spec's bounds (gpurl's 4-shade pixels are 0..3: divided by 3, never by a guessed
  255; an unbounded uint8 image is divided by 255);
- anything else is flattened.

An encoder of one's own comes by `agent.encoder._target_=my_package.make_encoder`: a
factory handed the EnvInfo (`info=`) and the encoder config's other keys that its
signature names, returning an nn.Module that maps the observation TensorDict to
features [*batch, out_features] and has an int `out_features`. A registered encoder
(a plug-in's, gpurl/core/registry.py) is chosen by name, `agent.encoder.name=<its
name>`, and built from its EnvInfo and the keys its config declares; gpurl's own is
`spec`, the SpecEncoder below.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from math import prod

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.data import Bounded

from gpurl.core import registry
from gpurl.core.config import Schema, key, plain_keys
from gpurl.core.targets import TARGET, resolve_target
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError


def mlp(
    in_features: int,
    out_features: int | None,
    hidden: Sequence[int] = (256, 256),
    activation: type[nn.Module] = nn.ReLU,
    layer_norm: bool = False,
    linear=nn.Linear,
) -> nn.Sequential:
    """Linear(+LayerNorm)+activation per hidden width, then a final Linear if
    out_features is set. `linear` builds each layer (noisy.NoisyLinear, say)."""
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers.append(linear(width, h))
        if layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(activation())
        width = h
    if out_features is not None:
        layers.append(linear(width, out_features))
    return nn.Sequential(*layers)


def pixel_range(spec) -> tuple[float, float]:
    """(low, high) of an image spec's values: its bounds, or 0..255 for unbounded uint8."""
    if isinstance(spec, Bounded):
        return float(spec.space.low.min()), float(spec.space.high.max())
    if spec.dtype == torch.uint8:
        return 0.0, 255.0
    return 0.0, 1.0


def is_image(shape: torch.Size, dtype: torch.dtype) -> bool:
    return len(shape) == 3 or (
        len(shape) == 2 and not dtype.is_floating_point and dtype != torch.bool
    )


CNN_KINDS = ("nature", "tile", "minatar", "flat")
INITS = ("default", "orthogonal")
TILE_PIXELS = 8  # gpurl's pixel worlds (and the Game Boy) draw 8 x 8-pixel tiles


def _convolutions(kind: str, c: int) -> nn.Sequential:
    if kind == "flat":  # no convolution: the frame's values into the Linear layer
        return nn.Sequential(nn.Flatten())
    if kind == "nature":  # Mnih et al. 2015: 8x8/4, 4x4/2, 3x3/1
        layers = [nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2)]
        layers += [nn.ReLU(), nn.Conv2d(64, 64, 3, stride=1)]
    elif kind == "minatar":  # Young & Tian 2019: one layer of 16 3 x 3 filters, stride 1
        layers = [nn.Conv2d(c, 16, 3, stride=1)]
    else:  # one feature vector per tile, then a 3 x 3 neighbourhood over the tile grid
        layers = [nn.Conv2d(c, 32, TILE_PIXELS, stride=TILE_PIXELS), nn.ReLU()]
        layers += [nn.Conv2d(32, 32, 3, padding=1)]
    return nn.Sequential(*layers, nn.ReLU(), nn.Flatten())


def orthogonal_relu_init(module: nn.Module) -> None:
    """Orthogonal weights with gain sqrt(2) and zero biases in every convolution and linear
    layer (the layer init of CleanRL's PPO). PyTorch's default init shrinks activations
    through each ReLU layer: out of the Nature CNN on [0, 1] frames their spread is about
    50x smaller than with this init, and a policy head on such features (gain 0.01)
    barely moves from uniform."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, math.sqrt(2))
            nn.init.zeros_(m.bias)


class CNNEncoder(nn.Module):
    """Convolutions for frames [..., C, H, W] (or [..., H, W]), scaled to [0, 1] from the
    value range (low, high), then Linear+ReLU to `features`. `kind`: "nature" (the
    Nature-DQN convolutions), "tile" (72 x 80 frames -> a 9 x 10 grid of 8 x 8 tiles, 32
    channels each, then a 3 x 3 convolution: a quarter of the Nature stack's
    multiply-adds on these frames), "minatar" (the MinAtar paper's one layer of 16
    3 x 3 filters, stride 1: 10 x 10 grids -> 16 x 8 x 8) or "flat" (no convolution:
    the scaled frame flattened into the Linear layer, an MLP's first layer, as
    gymnax-blines' MinAtar PPO reads its grids)."""

    def __init__(
        self,
        shape: Sequence[int],
        value_range=(0.0, 255.0),
        features: int = 512,
        kind: str = "nature",
        init: str = "default",
    ):
        super().__init__()
        if kind not in CNN_KINDS:
            raise ConfigError(
                f"agent.encoder.cnn={kind} is unknown: use one of {', '.join(CNN_KINDS)}"
            )
        if init not in INITS:
            raise ConfigError(f"agent.encoder.init={init} is unknown: use default or orthogonal")
        self.image_ndim = len(shape)
        c, h, w = shape if len(shape) == 3 else (1, *shape)
        low, high = value_range
        self.low, self.inv_range = float(low), 1.0 / max(float(high) - float(low), 1e-12)
        self.convs = _convolutions(kind, c)
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, c, h, w)).shape[-1]
        self.fc = nn.Sequential(nn.Linear(flat, features), nn.ReLU())
        self.in_shape = (c, h, w)
        self.out_features = features
        if init == "orthogonal":
            orthogonal_relu_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch = obs.shape[: obs.dim() - self.image_ndim]
        x = (obs.reshape(-1, *self.in_shape).float() - self.low) * self.inv_range
        return self.fc(self.convs(x)).reshape(*batch, -1)


def feature_scale(scale) -> nn.Buffer | None:
    """The per-feature divisor of an entry (EnvInfo.obs_scales), a buffer that follows
    the module to its device and stays out of checkpoints (it comes from the env)."""
    if scale is None:
        return None
    return nn.Buffer(torch.tensor(scale, dtype=torch.float32), persistent=False)


class RunningNorm(nn.Module):
    """Features [..., d] standardised by a running mean and variance of the observations
    collected (SB3's VecNormalize), clipped to +-`clip`. The statistics are persistent
    buffers (checkpoints, exports and a trained run's policy carry them) and move only
    by `update`, once per collected batch (Agent.observe): acting and evaluation read
    them frozen."""

    def __init__(self, d: int, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.clip, self.eps = float(clip), float(eps)
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("var", torch.ones(d))
        # a near-zero prior count: the first batch sets the statistics almost alone
        self.register_buffer("count", torch.tensor(1e-4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) * torch.rsqrt(self.var + self.eps)).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the rows of x [..., d] into the statistics (Chan et al.'s parallel
        update), in place on the device: no host read."""
        x = x.reshape(-1, x.shape[-1]).float()
        n = x.shape[0]
        var, mean = torch.var_mean(x, dim=0, correction=0)
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta.square() * (self.count * n / total)
        self.mean.add_(delta * (n / total))
        self.var.copy_(m2 / total)
        self.count.copy_(total)


class RewardScale(nn.Module):
    """Rewards divided by a running standard deviation of the discounted return and
    clipped to +-`clip` (SB3's VecNormalize with norm_reward): each env's return since
    its episode began, `ret` (acting state, carried from one rollout to the next), feeds
    a RunningNorm whose variance scales the rewards; the mean is not subtracted. For
    learning only: evaluation reports the env's own rewards."""

    def __init__(self, shape: Sequence[int], gamma: float, clip: float = 10.0, device=None):
        super().__init__()
        self.gamma, self.clip = float(gamma), float(clip)
        self.stats = RunningNorm(1, clip=clip).to(device)
        # not a weight: a loaded policy may act at any batch size
        self.register_buffer("ret", torch.zeros(tuple(shape), device=device), persistent=False)

    @torch.no_grad()
    def forward(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The scaled rewards of a rollout [T, *shape], after its returns moved the
        statistics; `done` [T, *shape] ends a return after its step."""
        returns = torch.empty_like(reward)
        ret = self.ret
        for t in range(reward.shape[0]):
            ret = ret * self.gamma + reward[t]
            returns[t] = ret
            ret = torch.where(done[t], 0.0, ret)
        self.ret.copy_(ret)
        self.stats.update(returns.reshape(-1, 1))
        scale = torch.rsqrt(self.stats.var + self.stats.eps)
        return (reward * scale).clamp(-self.clip, self.clip)


class VectorEncoder(nn.Module):
    """A vector entry [d] (a scalar counts as [1]), optionally standardised by running
    statistics (`normalize`), optionally embedded."""

    def __init__(self, shape: Sequence[int], embed: int = 0, scale=None, normalize=False):
        super().__init__()
        self.ndim = len(shape)
        d = prod(shape) if shape else 1
        self.embed = nn.Sequential(nn.Linear(d, embed), nn.ReLU()) if embed else None
        self.out_features = embed or d
        self.scale = feature_scale(scale)
        self.norm = RunningNorm(d) if normalize else None

    def is_identity(self, dtype: torch.dtype) -> bool:
        """Whether it hands an entry of `dtype` on unchanged: a float32 vector, with no
        scale, statistics or embedding."""
        plain = self.scale is None and self.norm is None and self.embed is None
        return plain and self.ndim == 1 and dtype == torch.float32

    def flat(self, obs: torch.Tensor) -> torch.Tensor:
        """The entry as float features [..., d], divided by its scale."""
        x = obs.unsqueeze(-1) if self.ndim == 0 else obs.flatten(obs.dim() - self.ndim)
        x = x.float()
        return x if self.scale is None else x / self.scale

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.flat(obs)
        if self.norm is not None:
            x = self.norm(x)
        return self.embed(x) if self.embed is not None else x


class ObjectListEncoder(nn.Module):
    """Object slots [M, D] with a slot mask [M]: each slot embedded, empty slots zeroed,
    slots concatenated in order."""

    def __init__(self, shape: Sequence[int], embed: int = 40, scale=None):
        super().__init__()
        slots, dim = shape
        self.embed = nn.Sequential(nn.Linear(dim, embed), nn.ReLU())
        self.out_features = slots * embed
        self.scale = feature_scale(scale)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = obs.float() if self.scale is None else obs.float() / self.scale
        x = self.embed(x) * mask.unsqueeze(-1).to(x.dtype)
        return x.flatten(-2)


@dataclasses.dataclass
class EncoderConfig(Schema):
    """Spec encoders (gpurl/policies/networks.py): how observations become features."""

    registry_group = "encoder"  # agent.encoder.name picks the encoder and its keys

    name: str = key(
        "spec",
        "the encoder: spec (gpurl's, from the observation spec) or a registered one",
        choices=lambda: registry.names("encoder"),
    )
    embed: int = key(0, "vector entries through Linear(d, embed)+ReLU; 0 = as they are", ge=0)
    object_embed: int = key(
        40, "each object slot of an object list through Linear(D, object_embed)+ReLU", ge=1
    )
    cnn: str = key(
        "nature",
        "images: nature (the Nature-DQN convolutions) | tile (8 x 8 tiles, then 3 x 3) | "
        "minatar (16 3 x 3 filters, for 10 x 10 grids) | flat (no convolution: an MLP)",
        choices=CNN_KINDS,
    )
    cnn_features: int = key(512, "images: features out of the CNN", ge=1)
    normalize: bool = key(
        False,
        "vector entries: standardised by a running mean and variance of the observations "
        "collected (as SB3's VecNormalize), updated once per collected batch; clipped to +-10",
    )
    init: str = key(
        "default",
        "images: the CNN's init: default (PyTorch's) | orthogonal (gain sqrt 2, CleanRL's PPO)",
        choices=INITS,
    )


@registry.register("encoder", "spec", EncoderConfig)
class SpecEncoder(nn.Module):
    """Every observation entry of an EnvInfo through its own encoder, concatenated."""

    def __init__(
        self,
        info: EnvInfo,
        embed: int = 0,
        object_embed: int = 40,
        cnn_features=512,
        cnn: str = "nature",
        init: str = "default",
        normalize: bool = False,
    ):
        super().__init__()
        self.keys = list(info.obs_keys)
        self.mask_keys = [info.slot_masks.get(k) for k in self.keys]
        parts = []
        for entry, mask_key in zip(self.keys, self.mask_keys, strict=True):
            shape, spec = info.obs_shapes[entry], info.obs_specs[entry]
            scale = info.obs_scales.get(entry)
            if mask_key is not None and len(shape) == 2:
                parts.append(ObjectListEncoder(shape, object_embed, scale))
            elif is_image(shape, spec.dtype):
                parts.append(CNNEncoder(shape, pixel_range(spec), cnn_features, cnn, init))
            else:
                parts.append(VectorEncoder(shape, embed, scale, normalize))
        self.parts = nn.ModuleList(parts)
        self.out_features = sum(p.out_features for p in parts)
        # the one entry, where it is all the features unchanged: read as is (no part
        # loop and no part call: a small network's update pays for those three times)
        self.plain = None
        if len(parts) == 1 and isinstance(parts[0], VectorEncoder) and self.mask_keys[0] is None:
            dtype = info.obs_specs[self.keys[0]].dtype
            self.plain = self.keys[0] if parts[0].is_identity(dtype) else None
        # (entry, its normaliser) of every standardised vector entry
        self.norms = [
            (entry, part)
            for entry, part in zip(self.keys, parts, strict=True)
            if isinstance(part, VectorEncoder) and part.norm is not None
        ]

    @torch.no_grad()
    def observe(self, td: TensorDictBase) -> None:
        """Move the running statistics of the standardised entries on by the
        observations of a collected batch `td` (any batch shape)."""
        for entry, part in self.norms:
            part.norm.update(part.flat(td.get(entry)))

    def forward(self, td: TensorDictBase) -> torch.Tensor:
        if self.plain is not None:
            return td.get(self.plain)
        feats = []
        for entry, mask_key, part in zip(self.keys, self.mask_keys, self.parts, strict=True):
            if mask_key is not None and isinstance(part, ObjectListEncoder):
                feats.append(part(td.get(entry), td.get(mask_key)))
            else:
                feats.append(part(td.get(entry)))
        return feats[0] if len(feats) == 1 else torch.cat(feats, dim=-1)


# A shared trunk's output, set on a shallow copy of the observation (with_features) so
# heads built on SharedFeatures read it instead of running the trunk again.
FEATURES = "features"


class SharedFeatures(nn.Module):
    """A head's encoder when heads share one trunk: reads the features that trunk wrote,
    or with `offset` its own part of them, [offset, offset + out_features) (a recurrent
    core of one layer per head)."""

    def __init__(self, out_features: int, offset: int | None = None):
        super().__init__()
        self.out_features, self.offset = out_features, offset

    def forward(self, td: TensorDictBase) -> torch.Tensor:
        x = td.get(FEATURES)
        if self.offset is None:
            return x
        return x[..., self.offset : self.offset + self.out_features]


def with_features(encoder: nn.Module | None, td: TensorDictBase) -> TensorDictBase:
    """td with the shared trunk's features beside its entries (td itself when no trunk is
    shared); a shallow copy, so the caller's td (a rollout's storage) never holds them."""
    if encoder is None:
        return td
    return td.clone(recurse=False).set(FEATURES, encoder(td))


def make_encoder(info: EnvInfo, cfg=None) -> nn.Module:
    """The encoder an agent config asks for: the registered one `agent.encoder.name`
    names (gpurl's SpecEncoder, `spec`, by default) built from the keys its config
    declares, or one's own by `agent.encoder._target_`."""
    opts = dict(plain_keys(cfg or {}))
    if opts.get(TARGET) is not None:
        return target_encoder(info, opts.pop(TARGET), opts)
    chosen = registry.get("encoder", opts.get("name") or "spec", "agent.encoder.name")
    declared = {f.name: f for f in dataclasses.fields(chosen.config) if f.name != "name"}
    defaults = dataclasses.asdict(chosen.config())
    kwargs = {k: opts[k] if k in opts else defaults[k] for k in declared}
    try:
        encoder = chosen.target(info, **kwargs)
    except TypeError as err:
        raise ConfigError(f"bad option for agent.encoder.name={chosen.name}: {err}") from None
    return _checked(encoder, f"agent.encoder.name={chosen.name}").to(info.device)


def target_encoder(info: EnvInfo, target, options: dict) -> nn.Module:
    """An encoder from a `_target_` factory, handed `info` and the options its signature
    names (an agent's config carries gpurl's own encoder keys, which it may not take)."""
    import inspect

    factory = resolve_target(target, "agent.encoder")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in options.items() if takes_any or k in params}
    try:
        encoder = factory(info=info, **kwargs)
    except TypeError as err:
        raise ConfigError(f"bad option for agent.encoder._target_={target}: {err}") from None
    return _checked(encoder, f"agent.encoder._target_={target}").to(info.device)


def _checked(encoder, what: str) -> nn.Module:
    """`encoder`, if it is a module with an int out_features (the heads' input width)."""
    if not isinstance(encoder, nn.Module):
        raise ConfigError(
            f"{what} returned {type(encoder).__name__}, not an nn.Module: return a module "
            f"mapping the observation TensorDict to features"
        )
    try:
        width = encoder.out_features
    except AttributeError:
        width = None
    if not isinstance(width, int) or width < 1:
        raise ConfigError(
            f"{what} built {type(encoder).__name__} without an int out_features >= 1: set it "
            f"to the width of the features it returns"
        )
    return encoder
