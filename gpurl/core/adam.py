"""One run's optimizer: torch's fused Adam, stepped in one call that backpropagates,
clips and updates (`backward_and_step`).

`torch.optim.Adam(fused=True)` runs one fused kernel per step, but the call around it
and around `clip_grad_norm_` is Python that a small network pays for at every update:
step and zero_grad hooks and profiler ranges, the state walk of `_init_group`, the
device grouping of the functional `adam`, the norm's bookkeeping. On a 256 x 256 MLP on
one CPU thread that is about 0.3 ms of a 1.3 ms update. `backward_and_step` does the
same arithmetic with none of it:

    grads   loss.backward(inputs=params): only the stepped parameters' gradients
    clip    one foreach norm; the clip is the fused kernel's `grad_scale` (it divides
            each gradient by it), so clipping costs no pass over the gradients
    step    the step counters +1, then the fused Adam kernel over every tensor

The state (`exp_avg`, `exp_avg_sq` and a float32 `step` per parameter, on its device)
and `state_dict()` are torch's Adam's: checkpoints load either way, and `step()` still
works for code that calls it. Clipping divides by (norm + 1e-6) / max_norm where
clip_grad_norm_ multiplies by its inverse: the same rule, to float rounding.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from gpurl.core.distributed import average_gradients
from gpurl.core.private import fused_adam_, total_norm


def torch_step(optimizer: torch.optim.Optimizer, loss: Tensor, max_norm: float | None) -> None:
    """The same step through torch.optim's own calls (zero_grad, clip_grad_norm_, step):
    any torch optimizer's, and Adam's inside torch.compile, which traces torch.optim's
    step itself and fuses the Python away."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    optimizer.zero_grad(set_to_none=True)
    # only the stepped parameters' gradients: an actor's loss runs through the
    # critics, whose weight gradients it would otherwise compute and throw away
    loss.backward(inputs=params)
    average_gradients(params)
    if max_norm:
        torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    optimizer.step()


class Adam(torch.optim.Adam):
    def __init__(self, params: Iterable[nn.Parameter], lr, eps: float = 1e-8):
        self._lists = None  # see _group_lists
        # fused Adam keeps its step counters as device tensors: no .item() per step (the
        # default foreach Adam reads them on the host) and about 3x faster on small CPU nets
        super().__init__(params, lr=lr, eps=eps, fused=True)

    def add_param_group(self, param_group: dict) -> None:
        self._lists = None
        super().add_param_group(param_group)
        self._params = [p for group in self.param_groups for p in group["params"]]

    def load_state_dict(self, state_dict: dict) -> None:
        self._lists = None  # the loaded state is new tensors
        super().load_state_dict(state_dict)

    def backward_and_step(self, loss: Tensor, max_norm: float | None) -> None:
        """Backward of `loss` into this optimizer's parameters only, averaged over
        torchrun's ranks, clipped to `max_norm` (None: no clip), one Adam step."""
        if torch.compiler.is_compiling():
            torch_step(self, loss, max_norm)
            return
        params = self._params
        for p in params:
            p.grad = None
        loss.backward(inputs=params)  # as torch_step: the stepped parameters' only
        average_gradients(params)
        grads = [p.grad for p in params]
        every = all(g is not None for g in grads)
        if not every:
            grads = [g for g in grads if g is not None]
            if not grads:  # the loss reaches none of them: nothing to step
                return
        with torch.no_grad():
            scale = None
            if max_norm:
                total = total_norm(grads)
                scale = ((total + 1e-6) / float(max_norm)).clamp(min=1.0)
            if every:
                for group, ps, exp_avgs, exp_avg_sqs, steps in self._group_lists():
                    grads = [p.grad for p in ps]
                    self._fused(group, ps, grads, exp_avgs, exp_avg_sqs, steps, scale)
                return
            for group in self.param_groups:  # some parameters the loss does not reach
                ps = [p for p in group["params"] if p.grad is not None]
                self._fused(group, ps, [p.grad for p in ps], *self._state_lists(ps), scale)

    def _group_lists(self) -> list[tuple]:
        """Per group: (group, params, exp_avgs, exp_avg_sqs, steps), made at the first
        step where every parameter has a gradient. Walking the state dict for every
        tensor at every step cost a small network's update a few percent; the lists stay
        valid because the state tensors are updated in place (by the kernel, and by
        trainer.pbt's copies) until load_state_dict or add_param_group drop them."""
        if self._lists is None:
            self._lists = []
            for group in self.param_groups:
                ps = list(group["params"])
                self._lists.append((group, ps, *self._state_lists(ps)))
        return self._lists

    def _state_lists(self, params: list[Tensor]) -> tuple[list, list, list]:
        """The exp_avg, exp_avg_sq and step tensors of `params`, as three lists."""
        states = [self._state(p) for p in params]
        return tuple([s[k] for s in states] for k in ("exp_avg", "exp_avg_sq", "step"))

    @staticmethod
    def _fused(group, params, grads, exp_avgs, exp_avg_sqs, steps, grad_scale) -> None:
        if not params:
            return
        beta1, beta2 = group["betas"]
        fused_adam_(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            steps,
            grad_scale,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
        )

    def _state(self, p: Tensor) -> dict:
        """p's Adam state, made as torch's fused Adam makes it on its first step."""
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state
