"""The `compile` config group's settings, and the one wrapper that compiles a step.

    compile.update      torch.compile each gradient step an agent builds with
                        `compile_step` (forward, backward and optimizer in one graph;
                        an off-policy step also draws its replay sample inside it,
                        OffPolicyAgent.fuse_draw)
    compile.policy      torch.compile the policy the collector acts with
                        (trainers/acting.py)
    compile.env         the env's lean step through Inductor (gpurl.envs.compile)
    compile.cudagraphs  CUDA only: capture each agent step, and the acting policy, once
                        as a CUDA graph (tensordict.nn.CudaGraphModule) and replay it;
                        optimizers become capturable
    compile.amp         bf16 autocast of the forward passes; weights, gradients and
                        optimizer state stay fp32 (backward and the optimizer step run
                        outside autocast, agents/base.clip_and_step)

All off by default: eager runs are exactly reproducible (bitwise resume) and start at
once. Compiled steps give the same results as eager ones to float rounding (Inductor
fuses and reorders float math, and draws its own random numbers unless
torch._inductor.config.fallback_random is set); amp runs to bf16 precision
(tests/test_compile.py states the tolerances).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

import torch

from gpurl.core.private import cpu_native_bf16, inductor_compile, inductor_mode_options
from gpurl.errors import ConfigError

BACKENDS = ("inductor", "dynamo")


@dataclass(frozen=True)
class CompileSpec:
    update: bool = False
    policy: bool = False
    env: bool = False
    cudagraphs: bool = False
    amp: bool = False
    mode: str | None = None  # torch.compile mode, e.g. "max-autotune-no-cudagraphs"
    warmup: int = 3  # eager calls before a CUDA graph is captured

    @classmethod
    def from_config(cls, cfg, device) -> CompileSpec:
        cfg = dict(cfg or {})
        names = [f.name for f in fields(cls)]
        unknown = set(cfg) - set(names)
        if unknown:
            raise ConfigError(
                f"unknown compile option(s) {sorted(unknown)}: use "
                f"{', '.join('compile.' + k for k in names)}"
            )
        spec = cls(**cfg)
        if spec.cudagraphs and torch.device(device).type != "cuda":
            raise ConfigError(
                f"compile.cudagraphs needs a CUDA device, this run is on {device}: "
                "set device=cuda or compile.cudagraphs=false"
            )
        if spec.warmup < 1:
            raise ConfigError(f"compile.warmup must be >= 1, got {spec.warmup}")
        return spec

    @property
    def active(self) -> bool:
        return self.update or self.policy or self.env or self.cudagraphs or self.amp

    @property
    def steps(self) -> bool:
        """Whether agent steps are wrapped at all (compile.update, cudagraphs or amp)."""
        return self.update or self.cudagraphs or self.amp


EAGER = CompileSpec()


def bf16_supported(device: torch.device) -> bool:
    """Whether `device` runs bf16 natively: CUDA, or a CPU with AVX-512 BF16 or AMX
    instructions and oneDNN (core.private.cpu_native_bf16)."""
    device = torch.device(device)
    if device.type == "cuda":
        return True
    return device.type == "cpu" and cpu_native_bf16()


def autocast(device: torch.device, enabled: bool = True):
    """bf16 autocast of forward passes on `device` (CPU or CUDA)."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def capturable(optimizers: Iterable[torch.optim.Optimizer]) -> None:
    """Keep the optimizers' step counters on the device, as a captured step needs."""
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["capturable"] = True


def compile_step(fn: Callable, spec: CompileSpec, device) -> Callable:
    """`fn` (TensorDict in, TensorDict out, no Python state touched) as the spec asks:
    autocast inside, torch.compile around it, a CUDA graph around that; `fn` itself
    when the spec compiles no step. An agent calls this once per step it builds and
    keeps the result where it uses it (Agent.compiled)."""
    if not spec.steps:
        return fn
    device = torch.device(device)
    if spec.amp:
        inner = fn

        @functools.wraps(inner)
        def fn(*args, **kwargs):
            with autocast(device):
                return inner(*args, **kwargs)

    if spec.update:
        fn = torch.compile(fn, mode=spec.mode, dynamic=False)
    if spec.cudagraphs:
        from tensordict.nn import CudaGraphModule

        fn = CudaGraphModule(fn, warmup=spec.warmup, device=device)
    return fn


def compile_flat(
    fn: Callable, example_inputs: tuple, backend: str = "inductor", **torch_compile_kwargs
) -> Callable:
    """Compile `fn`, a pure function of tensors returning a tuple of tensors, for inputs
    shaped like `example_inputs`.

    "inductor": traced once at fixed shapes and compiled by Inductor without Dynamo's
    guards (core.private.inductor_compile); none run per call, so the caller
    keeps the shapes, dtypes and devices of `example_inputs`. `torch_compile_kwargs` may
    carry `options` (Inductor config) and `mode` (torch.compile's modes).
    "dynamo": torch.compile(fn, fullgraph=True, dynamic=False, **torch_compile_kwargs).
    """
    if backend == "dynamo":
        return torch.compile(fn, **{"fullgraph": True, "dynamic": False, **torch_compile_kwargs})
    if backend != "inductor":
        raise ConfigError(f"unknown compile backend '{backend}': choose one of {BACKENDS}")
    kwargs = dict(torch_compile_kwargs)
    options = dict(kwargs.pop("options", None) or {})
    mode = kwargs.pop("mode", None)
    if mode not in (None, "default"):
        options = {**inductor_mode_options(mode), **options}
    kwargs.pop("fullgraph", None), kwargs.pop("dynamic", None)
    if kwargs:
        raise ConfigError(
            f"compile options {sorted(kwargs)} need backend='dynamo'"
            " (backend 'inductor' takes options and mode)"
        )
    return inductor_compile(fn, example_inputs, options)
