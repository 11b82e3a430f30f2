"""Return targets as pure tensor functions: n-step returns at sample time, GAE and
Q(lambda) returns per rollout.

All run on the device with fixed shapes and no host reads (docs/concepts.md, rules of the hot
path): episode ends and the edge of the written data are masks, never branches, so a
step past an episode end is still read but contributes nothing. An n-step window is read
whole ([samples, n]); the only Python loops are over a rollout's time steps (GAE and
Q(lambda) run backwards through it), never over samples.
"""

from __future__ import annotations

import torch
from torch import Tensor


def nstep_returns(
    reward: Tensor,
    terminated: Tensor,
    done: Tensor,
    row: Tensor,
    stream: Tensor,
    newest: int | Tensor,
    capacity: int,
    n: int,
    gamma: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Discounted n-step reward sums for sampled (row, stream) pairs of a time-major ring.

    reward [capacity, S] float, terminated / done [capacity, S] bool: row t holds the
    transition collected at step t by each of S streams (one stream per env or robot
    slot), so the steps that follow a sample are the next rows of the same stream.
    row, stream [N] int64 pick the samples; newest is the physical row written last
    (a host int, or a 0-d device tensor such as the storage's cursor).

    For each sample, k <= n steps are summed: the window stops after the first step
    whose `done` is set (the episode ended, or the stream was reset) and never reads
    past `newest`, because rows after it are either unwritten or the oldest data of the
    ring, which belongs to another time. Returns

      ret      [N]  sum_{j<k} gamma^j * reward[(row + j) % capacity, stream]
      discount [N]  gamma^k to apply to the bootstrap value, 0 when the last summed step
                    terminated (a truncated step still bootstraps: the episode went on,
                    only the data stopped)
      last     [N]  physical row of the last summed step; the caller bootstraps from the
                    next observation stored at that row.
    """
    if n == 1:  # one step, the common case: no window to walk, the same result
        discount = torch.where(terminated[row, stream], 0.0, gamma)
        return reward[row, stream], discount.to(reward.dtype), row
    # the whole window at once, [N, n]: one gather per entry rather than one per step
    steps = torch.arange(n, device=row.device)
    at = (row.unsqueeze(1) + steps) % capacity  # physical rows of each sample's window
    # flat positions in the [capacity, S] ring: torch.take is a quarter of the time of
    # the two-tensor index reward[at, stream] on one CPU thread
    flat = at * reward.shape[1] + stream.unsqueeze(1)
    ended = torch.take(done, flat)
    # step j is summed when it was written (at or before `newest`; what is written only
    # shrinks along the window) and no earlier step of the window ended an episode
    written = ((newest - row) % capacity).unsqueeze(1) >= steps
    take = written & (ended.cumsum(1) == ended)
    k = take.sum(1, keepdim=True)  # steps summed: at least the sample's own
    g = gamma.unsqueeze(1) if isinstance(gamma, Tensor) else gamma  # one per sample, or all
    # where, not multiply: rows past `newest` may hold garbage (NaN in unwritten storage)
    ret = (torch.where(take, torch.take(reward, flat), 0.0) * g**steps).sum(1)
    last = at.gather(1, k - 1).squeeze(1)
    ends = torch.take(terminated, flat.gather(1, k - 1).squeeze(1))
    discount = torch.where(ends, 0.0, (g**k).squeeze(1))
    return ret, discount.to(reward.dtype), last


def gae(
    reward: Tensor,
    value: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    done: Tensor,
    gamma: float,
    lam: float,
    out: tuple[Tensor, Tensor] | None = None,
    valid: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation over a time-major rollout [T, N, ...].

    next_value[t] is the value of the observation that followed step t (after a
    truncation it is the value of the final observation, not of the reset one), so

      delta_t = r_t + gamma * next_value_t * (1 - terminated_t) - value_t
      A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},   A_T = 0

    terminated cuts the bootstrap (there is no future after a true end); done cuts the
    trace (the next row starts another episode), so a truncated step bootstraps from
    next_value but takes nothing from the step after it. Returns (advantage, returns =
    advantage + value), written into `out` when given (two tensors shaped like value).

    `valid` (bool, shaped like value; a multi-robot rollout [T, N, R]) marks the steps
    that are samples: a robot that was running. A step that is not has no advantage
    (A_t = 0, so its return is its own value) and no trace passes through it, so a
    running robot's advantage never takes anything from the steps after it stopped.
    """
    advantage, returns = (
        out if out is not None else (torch.empty_like(value), torch.empty_like(value))
    )
    # masked_fill, not multiply: a next_value past a true end may be anything, even inf.
    advantage.copy_(next_value).masked_fill_(terminated, 0.0).mul_(gamma).add_(reward).sub_(value)
    trace = (~done).to(value.dtype).mul_(gamma * lam)
    if valid is not None:
        advantage.masked_fill_(~valid, 0.0)
        trace.masked_fill_(~valid, 0.0)
    for t in range(reward.shape[0] - 2, -1, -1):
        advantage[t].addcmul_(trace[t], advantage[t + 1])
    torch.add(advantage, value, out=returns)
    return advantage, returns


def q_lambda(
    reward: Tensor,
    next_value: Tensor,
    terminated: Tensor,
    done: Tensor,
    gamma: float,
    lam: float,
    out: Tensor | None = None,
) -> Tensor:
    """Q(lambda) returns over a time-major rollout [T, N, ...] (PQN's targets).

    next_value[t] is max_a Q(s_{t+1}, a) for the observation that followed step t (after
    a truncation, of the final observation, not of the reset one). Backwards from the
    last step, which bootstraps from next_value alone:

      G_t = r_t + gamma * (1 - terminated_t) * next_value_t
                + gamma * lam * (1 - done_t) * (G_{t+1} - next_value_t)

    Inside an episode this is r_t + gamma * [(1 - lam) * next_value_t + lam * G_{t+1}];
    terminated cuts the bootstrap, done cuts the trace (the next row is another
    episode), so a truncated step bootstraps from next_value and takes nothing from the
    step after it, as gae() does. lam = 0 gives one-step Q-learning targets, lam = 1
    the discounted return bootstrapped at the episode's or the rollout's end. Written
    into `out` (shaped like next_value) when given.
    """
    target = out if out is not None else torch.empty_like(next_value)
    # Rearranged so the backward pass is one fused op a step with no temporary:
    #   G_t = [r_t + (gamma - trace_t) * next_value_t] + trace_t * G_{t+1},
    # trace_t = gamma * lam * (1 - done_t), 0 at the last step (next_value alone).
    trace = (~done).to(next_value.dtype).mul_(gamma * lam)
    trace[-1] = 0.0
    # masked_fill after the product: a next_value past a true end may be anything, even
    # inf, and there trace is 0, so the product is gamma * inf and the fill clears it
    target.copy_(trace).neg_().add_(gamma).mul_(next_value).masked_fill_(terminated, 0.0)
    target.add_(reward)
    for t in range(reward.shape[0] - 2, -1, -1):
        target[t].addcmul_(trace[t], target[t + 1])
    return target
