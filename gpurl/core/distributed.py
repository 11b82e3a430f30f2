"""Data-parallel training under torchrun: PyTorch's process group, not a home-made one.

    python -m torch.distributed.run --nproc-per-node 2 -m gpurl.train experiment=sac_pendulum

Each rank is one process with its own envs (env seed offset by RANK_SEED_STRIDE x rank),
its own replay or rollout, and its own exploration noise; all ranks hold the same
networks. The one place every agent steps an optimizer (agents/base.clip_and_step)
averages the gradients over the ranks first, in one all-reduce of a flat buffer, so
every rank takes the same step and the parameters never drift apart.

What a setting means under torchrun (W ranks):
    env.num_envs             envs per rank (W x num_envs in all)
    trainer.total_frames     frames over all ranks; the progress record counts them too,
                             so epsilon, beta and the curriculum follow the whole run
    trainer.batch_size       off-policy: the global minibatch, batch_size / W per rank
                             (W must divide it): an update sees as many samples as with
                             one process
    trainer.utd              updates per frame over all ranks: the same number of
                             gradient steps per frame as with one process
    on-policy                each rank's rollout and minibatches are its own; a gradient
                             step averages W minibatches (W x the data per step)

Rank 0 alone evaluates, logs, draws the progress bar and writes files (checkpoints,
summary); update metrics are averaged over the ranks at each log, episode statistics
are rank 0's envs. NCCL on CUDA (rank r on cuda:LOCAL_RANK), gloo on the CPU.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from gpurl.core.private import flatten_dense, foreach_copy_, unflatten_dense
from gpurl.errors import ConfigError

RANK_SEED_STRIDE = 100_000  # rank r's envs and noise: seed + r x stride (eval uses +10_000)


def launched() -> bool:
    """True in a process started by torchrun with more than one rank."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def setup(device: torch.device) -> torch.device:
    """Join torchrun's process group (once) and return this rank's device: the configured
    one, or cuda:LOCAL_RANK when it is CUDA."""
    if not launched():
        return device
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if local >= torch.cuda.device_count():
            raise ConfigError(
                f"rank with LOCAL_RANK={local} but only {torch.cuda.device_count()} CUDA "
                f"device(s): use --nproc-per-node <= {torch.cuda.device_count()}"
            )
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@torch.no_grad()
def broadcast_modules(modules) -> None:
    """Copy rank 0's parameters and buffers to every rank (one broadcast per tensor, once
    at start), so all ranks begin from the same networks whatever their seeds did."""
    if not active():
        return
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src=0)


@torch.no_grad()
def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """Average the gradients of `params` over the ranks, in place: one all-reduce of a
    flat copy (one collective per step, not one per tensor). A missing gradient counts
    as zeros, so every rank reduces the same buffer."""
    if not active():
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    grads = [p.grad for p in params]
    flat = flatten_dense(grads)
    dist.all_reduce(flat)
    flat.div_(dist.get_world_size())
    foreach_copy_(grads, unflatten_dense(flat, grads))


def mean_over_ranks(values: dict[str, float], device: torch.device) -> dict[str, float]:
    """Host floats averaged over the ranks (the update metrics, once per log)."""
    if not active() or not values:
        return values
    t = torch.tensor(list(values.values()), dtype=torch.float64, device=device)
    dist.all_reduce(t)
    t /= dist.get_world_size()
    return dict(zip(values, t.tolist(), strict=True))


def max_over_ranks(value: int, device: torch.device) -> int:
    """The largest of every rank's `value` (a stop request's signal number, 0 for none)."""
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def broadcast_object(value):
    """Rank 0's `value` on every rank (a choice rank 0 makes for all: resume=auto's file)."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]
