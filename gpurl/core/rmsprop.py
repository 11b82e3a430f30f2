"""RMSprop as the DQN papers step it (Mnih et al. 2015; the MinAtar paper's
examples/dqn.py): centred, squared-gradient momentum 0.95 and 0.01 added to the root
(torch's RMSprop with centered=True, alpha=0.95, eps=0.01). `agent.optimizer=rmsprop`.

Over N runs' stacked parameters [N, ...] (trainer.num_seeds) one optimizer steps every
run: its update is elementwise, so each run's slices move as that run's own RMSprop
would move them, given that run's own gradient. The loss is a mean over every run's rows,
so it is scaled by N before the backward (as RunAdam does): each run's gradient is then
its own, which matters here, where eps = 0.01 is not small beside the root. One learning
rate for all the runs and no gradient clip across them (a norm over the stacked
gradients would mix the runs): make_optimizer refuses those with many runs."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from gpurl.core.distributed import average_gradients

ALPHA = 0.95  # squared-gradient (and gradient) momentum
EPS = 0.01  # added to the centred root


class RMSprop(torch.optim.RMSprop):
    def __init__(self, params: Iterable[nn.Parameter], lr, runs: int = 1):
        super().__init__(params, lr=lr, alpha=ALPHA, eps=EPS, centered=True, foreach=True)
        self.runs = int(runs)
        self._params = [p for group in self.param_groups for p in group["params"]]

    def backward_and_step(self, loss: Tensor, max_norm: float | None) -> None:
        """Backward of `loss` into this optimizer's parameters only (each run's own
        gradient), averaged over torchrun's ranks, clipped to `max_norm` (one run; None:
        no clip), one RMSprop step."""
        for p in self._params:
            p.grad = None
        (loss * self.runs if self.runs > 1 else loss).backward(inputs=self._params)
        average_gradients(self._params)
        if max_norm:
            torch.nn.utils.clip_grad_norm_(self._params, max_norm, foreach=True)
        self.step()
