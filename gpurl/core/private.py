"""The private APIs of torch and tensordict that gpurl calls, wrapped here and only here.

Each one is used for a measured reason (below) and each has a fallback through public
API, taken when a future release renames or removes the private one: slower, never
wrong. Nothing else in gpurl/ touches a leading-underscore name of torch or tensordict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDict


def foreach_lerp_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], weight):
    """targets[i] <- targets[i] + weight (sources[i] - targets[i]), in place.

    torch._foreach_lerp_ is one fused kernel launch for every tensor of a network (what
    torch.optim uses inside); a Python loop of lerp_ is one launch per tensor, which a
    Polyak update of a small network pays for at every gradient step. `weight` may be a
    Python float or a device scalar (a gated hard copy: 0 or 1, no host read)."""
    targets, sources = list(targets), list(sources)
    try:
        torch._foreach_lerp_(targets, sources, weight)
    except (AttributeError, TypeError, RuntimeError):
        for t, s in zip(targets, sources, strict=True):
            t.lerp_(s, weight)


def _foreach_pairs(fused: Callable, each: Callable, targets, sources) -> None:
    """fused(targets, sources), a torch._foreach_* call; pair by pair through `each` when
    the private call is gone or refuses the tensors."""
    targets, sources = list(targets), list(sources)
    try:
        fused(targets, sources)
    except (AttributeError, TypeError, RuntimeError):
        for t, s in zip(targets, sources, strict=True):
            each(t, s)


def foreach_copy_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """targets[i].copy_(sources[i]) for all i in one launch (torch._foreach_copy_): the
    collector writes every stored entry of a step this way."""
    _foreach_pairs(lambda t, s: torch._foreach_copy_(t, s), torch.Tensor.copy_, targets, sources)


def foreach_add_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """targets[i] += sources[i] for all i in one call (torch._foreach_add_): the trainer
    sums an update's half-dozen metrics this way, at every update."""
    _foreach_pairs(lambda t, s: torch._foreach_add_(t, s), torch.Tensor.add_, targets, sources)


def flatten_dense(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """One flat buffer holding `tensors` (torch._utils._flatten_dense_tensors, what DDP
    uses), so a gradient all-reduce is one collective per step, not one per tensor."""
    try:
        from torch._utils import _flatten_dense_tensors

        return _flatten_dense_tensors(list(tensors))
    except ImportError:
        return torch.cat([t.reshape(-1) for t in tensors])


def unflatten_dense(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Views of `flat` shaped as the tensors `like` (the inverse of flatten_dense)."""
    try:
        from torch._utils import _unflatten_dense_tensors

        return list(_unflatten_dense_tensors(flat, list(like)))
    except ImportError:
        sizes = [t.numel() for t in like]
        return [p.view_as(t) for p, t in zip(flat.split(sizes), like, strict=True)]


def total_norm(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all `tensors` together, a device scalar: one torch._foreach_norm
    launch, as clip_grad_norm_ computes it without that function's Python around it."""
    tensors = list(tensors)
    try:
        norms = torch._foreach_norm(tensors)
    except (AttributeError, TypeError, RuntimeError):
        norms = [torch.linalg.vector_norm(t) for t in tensors]
    return torch.linalg.vector_norm(torch.stack(list(norms)))


def fused_adam_(params, grads, exp_avgs, exp_avg_sqs, steps, grad_scale=None, **options):
    """One Adam step over every tensor in one kernel, each gradient divided by
    `grad_scale` (a device scalar, or None): step counters +1, then torch._fused_adam_,
    the kernel torch.optim.Adam(fused=True) runs, without the optimizer's Python around
    it (core/adam.py measures it). `options`: lr, beta1, beta2, weight_decay, eps."""
    try:
        kernel = torch._fused_adam_
    except AttributeError:
        from torch.optim.adam import adam

        for g in grads if grad_scale is not None else ():
            g.div_(grad_scale)
        adam(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            fused=True,
            amsgrad=False,
            maximize=False,
            **options,
        )
        return
    torch._foreach_add_(steps, 1)
    kernel(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        [],
        steps,
        amsgrad=False,
        maximize=False,
        grad_scale=grad_scale,
        found_inf=None,
        **options,
    )


def per_run_adam_(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, eps):
    """Adam over N runs' stacked tensors [N, ...], run k with its own rate lr[k] and step
    count steps[i][k] (each [N]): torch's Adam update (its fused kernel's order of
    operations), each per-run scalar broadcast over its run's slice. torch._foreach_*
    makes it nine calls for all the tensors of all the runs, where torch's fused Adam
    takes one rate and one count per call (one call per run: ~25% of a 16-run PQN
    iteration here); the fallback is the same arithmetic tensor by tensor."""
    step = steps[0] + 1  # every tensor of the group steps together, run by run
    bias1, bias2 = 1 - beta1**step, 1 - beta2**step
    step_size, bias2_sqrt = lr / bias1, bias2.sqrt()

    def per_tensor(x: torch.Tensor) -> list[torch.Tensor]:  # [N] as [N, 1, ...] each
        return [x.view(-1, *([1] * (p.dim() - 1))) for p in params]

    try:  # every op looked up before any tensor moves: all of them or the fallback
        ops = (torch._foreach_add_, torch._foreach_lerp_, torch._foreach_mul_)
        ops += (torch._foreach_addcmul_, torch._foreach_sqrt, torch._foreach_div_)
        ops += (torch._foreach_div, torch._foreach_sub_)
    except AttributeError:  # a release without them: the same arithmetic tensor by tensor
        ops = None
    if ops is not None:
        add_, lerp_, mul_, addcmul_, sqrt, div_, div, sub_ = ops
        add_(steps, 1)
        lerp_(exp_avgs, grads, 1 - beta1)
        mul_(exp_avg_sqs, beta2)
        addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        denom = sqrt(exp_avg_sqs)
        div_(denom, per_tensor(bias2_sqrt))
        add_(denom, eps)
        update = div(exp_avgs, denom)
        mul_(update, per_tensor(step_size))
        sub_(params, update)
        return
    for p, g, m, v, n, size, b2 in zip(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        steps,
        per_tensor(step_size),
        per_tensor(bias2_sqrt),
        strict=True,
    ):
        n.add_(1)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        p.sub_(m / (v.sqrt() / b2 + eps) * size)


def unchecked_tensordict(source: dict, batch_size: torch.Size, device) -> TensorDict:
    """A TensorDict over tensors known to have the right batch size and device.

    TensorDict._new_unsafe skips the public constructor's per-entry checks (about 5x
    cheaper, and a native env's lean step builds two a step). Entries must be
    well-formed; the fallback is the checked constructor."""
    try:
        return TensorDict._new_unsafe(source, batch_size=batch_size, device=device)
    except AttributeError:
        return TensorDict(source, batch_size=batch_size, device=device)


def inductor_compile(fn: Callable, example_inputs: tuple, options: dict | None = None):
    """Trace `fn` (a pure function of tensors) once at fixed shapes and compile it with
    Inductor, with no Dynamo guards to evaluate per call.

    torch._inductor.compile on a make_fx graph costs about one eager op per call; the
    public torch.compile evaluates guards at every call, tens of microseconds on a small
    CPU, which is most of a small policy's or env step's time. The fallback is the
    public torch.compile (fullgraph, static shapes), the same graph with its guards."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        graph = make_fx(fn, tracing_mode="fake")(*example_inputs)
        try:
            from torch._inductor import compile as compile_graph
        except ImportError:
            compiled = torch.compile(graph, fullgraph=True, dynamic=False, options=options)
            compiled(*example_inputs)
            return compiled
        return compile_graph(graph, list(example_inputs), options=options or None)


def missing_cpp_compiler() -> str | None:
    """Why Inductor cannot build code for the CPU on this machine (it compiles C++ with
    g++ or clang, or $CXX), or None when it can."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        from torch._inductor.exc import InvalidCxxCompiler
    except ImportError:  # an Inductor without these: let compiling say what it lacks
        return None
    try:
        get_cpp_compiler()
    except InvalidCxxCompiler:
        return "Inductor needs a C++ compiler for the CPU (g++ or clang on PATH, or $CXX)"
    return None


def inductor_mode_options(mode: str) -> dict:
    """The Inductor options behind one of torch.compile's modes (e.g. "max-autotune"),
    for inductor_compile, which takes options rather than a mode; {} if unknown."""
    try:
        from torch._inductor import list_mode_options

        return dict(list_mode_options(mode))
    except (ImportError, RuntimeError):
        return {}


def cpu_native_bf16() -> bool:
    """Whether this CPU runs bf16 natively: oneDNN present, and AVX-512 BF16 or AMX
    instructions. oneDNN's own flag (torch.ops.mkldnn._is_mkldnn_bf16_supported) is also
    true on AVX-512 CPUs that only emulate bf16, slower than fp32; torch.cpu's
    _is_avx512_bf16_supported / _is_amx_tile_supported tell the two apart. False where
    any of them is missing."""
    try:
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):
        return False
