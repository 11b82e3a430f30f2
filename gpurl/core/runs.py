"""Many independent runs in one process (`trainer.num_seeds=N`): the run layout and the
pieces that keep N runs apart while they share every kernel.

The layout. Run k owns a contiguous slice of every batch, run-major: envs
[k E, (k+1) E) of an env of N x E, rows [k B, (k+1) B) of a replay sample of N x B,
rows [k M, (k+1) M) of an on-policy minibatch. Nothing else in a batch says which run a
row belongs to: the layers below find it by reshaping the leading dims to [N, -1].

The networks. `Runs.build(factory)` calls the factory once per run, each under run k's
own generator (seeded seed + k, so run k's initial weights depend on its seed alone),
and stacks the N copies into one module whose Linear, LayerNorm and Conv2d layers hold
all N runs' weights (RunLinear, RunLayerNorm, RunConv2d). Such a module runs N networks
in one batched matmul per layer (a convolution: one grouped call on a GPU, a call per
run on a CPU), and the module's own code (forward, sample, logits...) runs unchanged.

The update. Each run's loss is a mean over its rows, and the agents' losses are means
over all N x B rows; RunAdam's `backward_and_step` scales the loss by N, so the
gradient of each run's weights is exactly its own loss's gradient (no run's weights
touch another run's rows). Gradient clipping is per run, and Adam is elementwise, with
a learning rate that may differ per run. Changing one run's hyperparameter leaves every
other run's numbers unchanged.

The hyperparameters. A per-run hyperparameter (trainer.per_seed) is one device tensor
[N] that every part reading it shares (`Runs.value`): population-based training
(trainers/pbt.py) and schedule replay change a run's value with `Runs.set`, in place,
and every schedule, loss and optimizer sees it at its next step.

With N = 1 (the default) every helper here is the identity: `build` returns the
factory's module and agents keep torch's fused Adam.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpurl.core.private import per_run_adam_
from gpurl.errors import ConfigError

per_run_adam_eager = torch.compiler.disable(per_run_adam_)  # RunAdam.step says why


class _RunMatmul(torch.autograd.Function):
    """h [N, B, in] @ weight[N, out, in]^T (+ bias [N, out]), with a backward that forms
    the weight's gradient in the weight's own layout, bmm(grad^T, h). Autograd's backward
    of bmm(h, weight^T) forms it as h^T grad [N, in, out] and then copies it, transposed,
    into [N, out, in]: a strided copy of the whole weight at every update. On a CPU, for
    a 1024 x 128 layer of five runs on batches of 32 (MinAtar DQN's), the layer's
    forward and backward took 2.1x as long with the copy, and the whole iteration of
    `minatar_breakout_dqn trainer.num_seeds=5` 1.17x; the gradients are the same."""

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(h, weight)
        ctx.has_bias = bias is not None
        wt = weight.transpose(1, 2)
        return torch.bmm(h, wt) if bias is None else torch.baddbmm(bias.unsqueeze(1), h, wt)

    @staticmethod
    def backward(ctx, grad: Tensor):
        h, weight = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad
        grad_h = torch.bmm(grad, weight) if need_h else None
        grad_w = torch.bmm(grad.transpose(1, 2), h) if need_w else None
        grad_b = grad.sum(1) if ctx.has_bias and need_b else None
        return grad_h, grad_w, grad_b


class RunLinear(nn.Module):
    """N Linear layers as one: weight [N, out, in], bias [N, out]. Input [N x X..., in],
    run-major over its leading dims; output [N x X..., out]."""

    def __init__(self, layers: Sequence[nn.Linear]):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in layers]))
        bias = [m.bias for m in layers]
        self.bias = (
            None if bias[0] is None else nn.Parameter(torch.stack([b.detach() for b in bias]))
        )

    def forward(self, x: Tensor) -> Tensor:
        n = self.weight.shape[0]
        h = x.reshape(n, -1, x.shape[-1])
        out = _RunMatmul.apply(h, self.weight, self.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def run(self, k: int) -> nn.Linear:
        out, inp = self.weight.shape[1:]
        layer = nn.Linear(inp, out, bias=self.bias is not None, device=self.weight.device)
        with torch.no_grad():
            layer.weight.copy_(self.weight[k])
            if self.bias is not None:
                layer.bias.copy_(self.bias[k])
        return layer


class RunLayerNorm(nn.Module):
    """N LayerNorms over the last dim as one: weight and bias [N, D]."""

    def __init__(self, layers: Sequence[nn.LayerNorm]):
        super().__init__()
        first = layers[0]
        if len(first.normalized_shape) != 1 or not first.elementwise_affine:
            raise ConfigError(
                "trainer.num_seeds > 1 stacks LayerNorms over one dim with affine weights"
            )
        self.eps = first.eps
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in layers]))
        self.bias = nn.Parameter(torch.stack([m.bias.detach() for m in layers]))

    def forward(self, x: Tensor) -> Tensor:
        n, d = self.weight.shape
        h = F.layer_norm(x, (d,), eps=self.eps).reshape(n, -1, d)
        return torch.addcmul(self.bias.unsqueeze(1), h, self.weight.unsqueeze(1)).reshape(x.shape)

    def run(self, k: int) -> nn.LayerNorm:
        d = self.weight.shape[1]
        layer = nn.LayerNorm(d, eps=self.eps, device=self.weight.device)
        with torch.no_grad():
            layer.weight.copy_(self.weight[k])
            layer.bias.copy_(self.bias[k])
        return layer


class RunConv2d(nn.Module):
    """N Conv2d layers: weight [N, out, in, kh, kw] and bias [N, out]. Input
    [N x X, in, H, W], run-major; run k's images meet run k's filters alone. Output
    [N x X, out, H', W'].

    On a GPU, one grouped convolution (the weight read as [N x out, ...] with groups N;
    group k holds channels [k in, (k+1) in) of the regrouped input): one kernel for N
    runs. On a CPU, one convolution per run on its slice of the batch: oneDNN's grouped
    convolution ran 1.5-9x slower there than the N convolutions it stands for (MinAtar's
    16 filters on 10 x 10 grids of 4 and 10 channels, five runs, batches of 32 to 256,
    the forward pass alone further behind than forward and backward), and needs the
    batch regrouped besides. `forward_grouped` and `forward_per_run` are the
    two, the same numbers either way (to rounding)."""

    def __init__(self, layers: Sequence[nn.Conv2d]):
        super().__init__()
        first = layers[0]
        if first.groups != 1 or first.padding_mode != "zeros":
            raise ConfigError(
                "trainer.num_seeds > 1 stacks convolutions with groups=1 and zero padding"
            )
        self.options = dict(stride=first.stride, padding=first.padding, dilation=first.dilation)
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in layers]))
        bias = [m.bias for m in layers]
        self.bias = (
            None if bias[0] is None else nn.Parameter(torch.stack([b.detach() for b in bias]))
        )

    def forward(self, x: Tensor) -> Tensor:
        if x.device.type == "cpu":
            return self.forward_per_run(x)
        return self.forward_grouped(x)

    def forward_per_run(self, x: Tensor) -> Tensor:
        n = self.weight.shape[0]
        runs = x.reshape(n, -1, *x.shape[-3:])
        bias = [None] * n if self.bias is None else self.bias
        out = torch.stack(
            [F.conv2d(runs[k], self.weight[k], bias[k], **self.options) for k in range(n)]
        )
        return out.reshape(*x.shape[:-3], *out.shape[-3:])

    def forward_grouped(self, x: Tensor) -> Tensor:
        n, out_c = self.weight.shape[:2]
        c, h, w = x.shape[-3:]
        grouped = x.reshape(n, -1, c, h, w).transpose(0, 1).reshape(-1, n * c, h, w)
        weight = self.weight.reshape(n * out_c, *self.weight.shape[2:])
        bias = None if self.bias is None else self.bias.reshape(-1)
        out = F.conv2d(grouped, weight, bias, groups=n, **self.options)  # [X, N x out, ...]
        out = out.reshape(-1, n, out_c, *out.shape[-2:]).transpose(0, 1)
        return out.reshape(*x.shape[:-3], out_c, *out.shape[-2:])

    def run(self, k: int) -> nn.Conv2d:
        out_c, in_c, *kernel = self.weight.shape[1:]
        layer = nn.Conv2d(
            in_c, out_c, tuple(kernel), **self.options, bias=self.bias is not None,
            device=self.weight.device,
        )  # fmt: skip
        with torch.no_grad():
            layer.weight.copy_(self.weight[k])
            if self.bias is not None:
                layer.bias.copy_(self.bias[k])
        return layer


class LearnedVector(nn.Module):
    """A learned vector [d] read per row: forward(x [..., d]) is it broadcast to x's shape
    (a state-independent log-std). Stacks into RunLearnedVector."""

    def __init__(self, value: Tensor):
        super().__init__()
        self.value = nn.Parameter(value.detach().clone())

    def forward(self, like: Tensor) -> Tensor:
        return self.value.expand_as(like)


class RunLearnedVector(nn.Module):
    """N LearnedVectors as one: value [N, d], read per row of a run-major [N x X..., d]."""

    def __init__(self, layers: Sequence[LearnedVector]):
        super().__init__()
        self.value = nn.Parameter(torch.stack([m.value.detach() for m in layers]))

    def forward(self, like: Tensor) -> Tensor:
        n, d = self.value.shape
        rows = like.reshape(n, -1, d).shape[1]
        return self.value.unsqueeze(1).expand(n, rows, d).reshape(like.shape)

    def run(self, k: int) -> LearnedVector:
        return LearnedVector(self.value[k])


STACKABLE = {
    nn.Linear: RunLinear,
    nn.LayerNorm: RunLayerNorm,
    nn.Conv2d: RunConv2d,
    LearnedVector: RunLearnedVector,
}


def register_stackable(single: type[nn.Module], stacked: type[nn.Module]) -> None:
    """Let `stack_modules` stack a layer type of a higher package (the recurrent core):
    `stacked(copies)` builds the N runs' layer, and its `run(k)` gives run k's back."""
    STACKABLE[single] = stacked


def is_run_layer(module: nn.Module) -> bool:
    """Whether `module` holds N runs' weights (a stacked layer of STACKABLE)."""
    return isinstance(module, tuple(STACKABLE.values()))


def _replace(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    parent.add_module(child, new)


def stack_modules(copies: Sequence[nn.Module]) -> nn.Module:
    """One module computing the N `copies` (same architecture, own weights) at once: a
    deep copy of the first whose Linear, LayerNorm and Conv2d layers hold all N runs'
    weights (and any registered layer: `register_stackable`). Any other layer with
    parameters (a noisy layer) is refused."""
    cls = STACKABLE.get(type(copies[0]))
    if cls is not None:  # a single layer
        return cls(copies)
    stacked = copy.deepcopy(copies[0])
    replaced: list[str] = []  # a stacked layer's own children are its business
    for name, module in list(stacked.named_modules()):
        if any(name.startswith(f"{r}.") for r in replaced):
            continue
        cls = STACKABLE.get(type(module))
        if cls is not None:
            _replace(stacked, name, cls([c.get_submodule(name) for c in copies]))
            replaced.append(name)
        elif any(True for _ in module.parameters(recurse=False)):
            where = name or "the network itself"
            raise ConfigError(
                f"trainer.num_seeds > 1 stacks networks of Linear, LayerNorm and Conv2d "
                f"layers; this one has a {type(module).__name__} ({where}): train the seeds "
                f"as separate processes (-m seed=0,1,2) instead"
            )
    return stacked


def unstack_module(module: nn.Module, k: int) -> nn.Module:
    """Run k of a stacked module, as the plain module one run would have built (its own
    copy: evaluation and tests read it; training never does)."""
    if is_run_layer(module):
        return module.run(k)
    single = copy.deepcopy(module)
    for name, sub in list(single.named_modules()):
        if is_run_layer(sub):
            _replace(single, name, sub.run(k))
    return single


def balance_runs(weight: Tensor, n: int) -> Tensor:
    """A 0/1 weight [N x M, ...] of N runs' rows (robots that act, run-major) rescaled so
    that a weighted mean over all rows, sum(w x) / sum(w), is the mean of the runs' own
    weighted means: no run's loss depends on how many valid rows the others have."""
    own = weight.reshape(n, -1).sum(1).clamp_min(1.0)  # [N]
    scale = weight.sum().clamp_min(1.0) / (n * own)
    rows = scale.repeat_interleave(weight.shape[0] // n)
    return weight * rows.reshape(-1, *([1] * (weight.dim() - 1)))


class Runs:
    """The N runs of this process: their seeds, their per-run hyperparameters and their
    generators for building networks. Every part reads it off the progress record
    (`progress.runs`). `per_seed` maps an agent key (lr, actor_lr...) to N values."""

    def __init__(self, n: int = 1, seed: int = 0, per_seed: Mapping[str, Sequence] | None = None):
        if int(n) < 1:
            raise ConfigError(f"trainer.num_seeds must be >= 1, got {n}")
        self.n = int(n)
        self.seeds = [int(seed) + k for k in range(self.n)]
        # the host copy of every per-run value: read without touching the device
        self.per_seed = {k: [float(x) for x in v] for k, v in (per_seed or {}).items()}
        for key, values in self.per_seed.items():
            if len(values) != self.n:
                raise ConfigError(
                    f"trainer.per_seed.{key} has {len(values)} values for trainer.num_seeds="
                    f"{self.n}: give one per seed"
                )
        self._rng = [torch.Generator().manual_seed(s).get_state() for s in self.seeds]
        # (key, device) -> the one tensor of that key's values every reader shares
        self._live: dict[tuple[str, str], Tensor] = {}

    @property
    def many(self) -> bool:
        return self.n > 1

    def build(self, factory: Callable[[], nn.Module]) -> nn.Module:
        """factory() for one run; for N runs, the factory's module built once per run from
        run k's own generator and stacked (stack_modules)."""
        if not self.many:
            return factory()
        copies = []
        for k in range(self.n):
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(self._rng[k])
                copies.append(factory())
                self._rng[k] = torch.get_rng_state()
        return stack_modules(copies)

    def value(self, key: str, default, device=None) -> float | Tensor:
        """The hyperparameter `key`: the config's float, or its per-run values from
        per_seed as the one tensor every caller shares ([N]; [] with one run, where a
        replayed schedule changes it), which `set` changes in place."""
        if key not in self.per_seed:
            return float(default)
        where = (key, str(torch.device(device or "cpu")))
        if where not in self._live:
            values = torch.tensor(self.per_seed[key], device=device)
            self._live[where] = values if self.many else values.reshape(())
        return self._live[where]

    def set(self, key: str, k: int, value: float) -> None:
        """Run k's value of the per-run hyperparameter `key`, in place: every schedule,
        loss and optimizer reading it sees the new value at its next step."""
        self.per_seed[key][k] = float(value)
        for (name, _), tensor in self._live.items():
            if name == key:
                tensor.view(-1)[k] = float(value)

    def hyper(self, k: int) -> dict[str, float]:
        """Run k's per-run hyperparameters (host values)."""
        return {key: values[k] for key, values in self.per_seed.items()}

    def state_dict(self) -> dict:
        return {"per_seed": {k: list(v) for k, v in self.per_seed.items()}}

    def load_state_dict(self, state: dict) -> None:
        for key, values in state.get("per_seed", {}).items():
            if key in self.per_seed:
                for k, value in enumerate(values):
                    self.set(key, k, value)

    def full(self, value: float, device=None) -> Tensor:
        """A per-run scalar: shape [] for one run, [N] for N runs."""
        shape = (self.n,) if self.many else ()
        return torch.full(shape, float(value), device=device)

    def per_row(self, value, like: Tensor):
        """`value` (a float, or [N] per run) broadcast over the rows of `like` [N x B, ...]."""
        if not isinstance(value, Tensor) or value.dim() == 0:
            return value
        rows = value.repeat_interleave(like.shape[0] // self.n)
        return rows.reshape(-1, *([1] * (like.dim() - 1)))


ONE_RUN = Runs()


class RunAdam(torch.optim.Optimizer):
    """Adam over N runs' stacked parameters [N, ...], with a learning rate per run and
    gradient clipping per run: torch's Adam and clip_grad_norm_, run by run.

    The step is torch's fused Adam (torch.optim.adam.adam, fused=True) over the whole
    stacked tensors when every run has the same learning rate; with a rate per run, the
    same update in foreach calls with each run's rate and step count broadcast over its
    slices (`core/private.per_run_adam_`). Both are elementwise: no run's step reads another's."""

    def __init__(self, params, runs: int, lr, betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        self.runs = int(runs)
        if isinstance(lr, Tensor):
            for group in self.param_groups:
                group["lr"] = group["lr"].to(group["params"][0].device)
        # a per-run rate steps each run apart, with a step count per run
        self.per_run = isinstance(lr, Tensor) and lr.dim() > 0

    def backward_and_step(self, loss: Tensor, max_norm: float | None) -> None:
        """Backward of the mean-over-all-rows `loss` as the sum of the runs' own means
        (each run's gradient its own), clip each run's gradient, step."""
        self.zero_grad(set_to_none=True)
        # only the stepped parameters' gradients (agents/base.clip_and_step says why)
        params = [p for group in self.param_groups for p in group["params"]]
        (loss * self.runs).backward(inputs=params)
        self.step(max_norm)

    @torch.no_grad()
    def step(self, max_norm: float | None = None) -> None:
        from torch.optim.adam import adam

        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            if max_norm:
                norms = [torch.linalg.vector_norm(g.reshape(self.runs, -1), dim=1) for g in grads]
                total = torch.linalg.vector_norm(torch.stack(norms, 1), dim=1)  # [N]
                coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
                for g in grads:
                    g.mul_(coef.reshape(self.runs, *([1] * (g.dim() - 1))))
            for p in params:
                state = self.state[p]
                if not state:
                    shape = (self.runs,) if self.per_run else ()
                    state["step"] = torch.zeros(shape, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
            m = [self.state[p]["exp_avg"] for p in params]
            v = [self.state[p]["exp_avg_sq"] for p in params]
            steps = [self.state[p]["step"] for p in params]
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            if self.per_run:  # a rate and a step count per run (private.per_run_adam_)
                # under compile.update on the CPU it runs eagerly (a graph break):
                # Inductor's C++ code generator fails on it inside the compiled step
                # (torch 2.13: KeyError in its outer-loop fusion), not on its own
                per_run = per_run_adam_eager if params[0].device.type == "cpu" else per_run_adam_
                per_run(params, grads, m, v, steps, lr, beta1, beta2, eps)
                continue
            adam(
                params,
                grads,
                m,
                v,
                [],
                steps,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                eps=eps,
                weight_decay=0.0,
                amsgrad=False,
                maximize=False,
                fused=True,
            )
