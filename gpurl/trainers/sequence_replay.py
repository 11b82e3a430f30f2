"""Sequence replay (R2D2, Kapturowski et al. 2019) on top of the time-major ring.

The ring (trainers/replay.DeviceReplay) already keeps every step of every stream in time
order, the recurrent state each step began with included, so a sequence needs no storage
of its own: it is a stream s and a start row r, and its rows are r .. r + W - 1 of
stream s, W = burn_in + sequence_length + n_step - 1 (core/replay.SequenceSpec.window):

    rows r .. r + burn_in - 1              burn-in: only warm the recurrent state up
    the next sequence_length rows          trained: one TD error each
    the last n_step - 1 rows               look-ahead: what the last trained steps'
                                           n-step returns sum and bootstrap from

so every trained step sees its whole n steps (neither a shorter n nor a mask at the end
of the window). Starts are `stride` rows apart (stride = burn_in + sequence_length -
overlap) on the ring's own time line: the ring holds a whole number of strides, so a
row's place in its stride is the same on every lap. A start is drawable while its whole
window lies in written rows that have not been overwritten: rows [end - filled, end) of
the virtual time line, `end` the rows written so far (modulo whole laps). Both bounds
are host ints, so the drawable starts are counted, and drawn uniformly, without a host
read; no window ever mixes the newest rows with the stale ones past the write cursor.

Episode ends inside a window are not cut out: the unroll zeroes the state after each
done step (policies/recurrent.RecurrentCore.unroll), which is the state the collector
acted from at the next episode's first step, so the steps after the end are samples of
the next episode as good as any, and the losses count them. n-step returns are summed
along the stream and stop at the first done (core/returns.nstep_returns, the one the
transition replay uses).

Prioritized: one priority per (start, stream), p = eta max |delta| + (1 - eta) mean
|delta| over the trained steps (core/replay.sequence_priority, from the agent). A start
gets the largest priority so far when its window's last row is written, and 0 when its
first row is overwritten (its window is gone), so only drawable starts carry mass.

A sample is a TensorDict [B] (B = trainer.batch_size sequences):

    observation entries  [B, W, ...]  every row of the window
    done                 [B, W]       where the state resets after a step
    <state key>          [B, S]       the stored state at the start row
    action               [B, L]       the trained steps' (L = sequence_length)
    reward, discount     [B, L]       their n-step return and bootstrap discount
    last                 [B, L]       the window position of the last summed step
    next / observation   [B, L, ...]  the observation after that step (a truncated
                                      episode's final one), the bootstrap's input
    weight               [B]          importance weights (1 when uniform)
    index                [B]          the priority slot, for update_priorities

With N runs (core/runs.py, uniform sampling) each sample holds B / N sequences of each
run's own streams, run-major.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from gpurl.core.private import unchecked_tensordict
from gpurl.core.progress import Progress
from gpurl.core.returns import nstep_returns
from gpurl.trainers.priority import importance_weights
from gpurl.trainers.replay import DeviceReplay, nested, per_run_discount


def aligned(low: int, high: int, stride: int) -> tuple[int, int]:
    """(first multiple of stride >= low, how many multiples lie in [low, high])."""
    first = -(-low // stride) * stride
    return first, max(0, (high - first) // stride + 1)


class SequenceReplay(DeviceReplay):
    """DeviceReplay whose samples are sequences of one stream (module docstring)."""

    def __init__(self, spec, info, obs_keys, capacity, batch_size, device, runs=1, gamma=None):
        self.seq = spec.sequence
        self.window = self.seq.window(spec.n_step)
        super().__init__(spec, info, obs_keys, capacity, batch_size, device, runs, gamma)
        self.offsets = torch.arange(self.window, device=self.device)

    def ring_rows(self, capacity: int) -> int:
        """Whole strides, and room for one window beside the rows being written over."""
        stride = self.seq.stride
        rows = max(-(-capacity // self.streams), self.window + stride)
        return -(-rows // stride) * stride

    def priority_slots(self) -> int:
        return self.rows // self.seq.stride * self.streams

    def end(self) -> int:
        """Rows written so far, modulo whole laps of the ring (>= filled)."""
        return self.cursor if self.filled < self.rows else self.cursor + self.rows

    def starts(self) -> tuple[int, int]:
        """(first drawable start on the virtual time line, number of drawable starts)."""
        end = self.end()
        return aligned(end - self.filled, end - self.window, self.seq.stride)

    def ready(self) -> bool:
        return self.starts()[1] > 0

    # -- priorities -----------------------------------------------------------------------------
    def prioritize_new(self, rows: torch.Tensor, T: int, entries: dict) -> None:
        """Before the cursor moves past the T rows being written: the starts among them
        lose their old windows (priority 0), and the windows these rows complete become
        drawable at the largest priority so far."""
        stride, end = self.seq.stride, self.end()
        self._set_priority(*aligned(end, end + T - 1, stride), None)
        oldest_after = end + T - min(self.filled + T, self.rows)
        first = max(end - self.window + 1, oldest_after)
        self._set_priority(*aligned(first, end + T - self.window, stride), self.max_priority)

    def _set_priority(self, first: int, count: int, value: torch.Tensor | None) -> None:
        """Priority `value` (None: 0) for every stream of `count` starts from `first`."""
        if count == 0:
            return
        stride, S = self.seq.stride, self.streams
        start = torch.arange(count, device=self.device) * stride + first
        slot = (start % self.rows) // stride
        index = (slot.unsqueeze(1) * S + torch.arange(S, device=self.device)).reshape(-1)
        if value is None:
            priority = torch.zeros(index.shape, device=self.device)
        else:
            priority = value.expand(index.shape)
        self.sampler.update(index, priority)

    # -- sampling -------------------------------------------------------------------------------
    @property
    def fusable(self) -> bool:
        """Sequences are drawn by their own sampler, eagerly."""
        return False

    def sample(self, progress: Progress | None = None) -> TensorDict:
        first, count = self.starts()
        if count == 0:
            raise RuntimeError("sample() before the replay holds a whole sequence")
        n, S, stride = self.batch_size, self.streams, self.seq.stride
        if self.sampler is None:  # uniform over the drawable (start, stream) pairs
            R = self.runs  # N runs: n / N of run k's own streams [k S / N, (k + 1) S / N)
            per = S // R
            i = torch.randint(count * per, (R, n // R) if R > 1 else (n,), device=self.device)
            start = ((first + (i // per) * stride) % self.rows).reshape(-1)
            own = torch.arange(R, device=self.device).unsqueeze(1) * per if R > 1 else 0
            stream = (i % per + own).reshape(-1)
            index = (start // stride) * S + stream
            weight = torch.ones(n, device=self.device)
        else:
            index, prob = self.sampler.sample(n)
            start, stream = (index // S) * stride, index % S
            frames = (
                progress.frames if progress is not None else torch.zeros((), device=self.device)
            )
            weight = importance_weights(prob, count * S, self.beta(frames))
        return self.gather(start, stream, index, weight)

    def gather(self, start, stream, index, weight) -> TensorDict:
        """The sample of sequences starting at physical rows `start` [B] of `stream` [B]."""
        d, seq, n, L = self.data, self.seq, start.shape[0], self.seq.length
        rows = (start.unsqueeze(1) + self.offsets) % self.rows  # [B, W]
        column = stream.unsqueeze(1)
        trained = rows[:, seq.burn_in : seq.burn_in + L]  # [B, L]
        ret, discount, last = nstep_returns(
            d["reward"],
            d["terminated"],
            d["done"],
            trained.reshape(-1),
            column.expand(n, L).reshape(-1),
            (self.cursor - 1) % self.rows,
            self.rows,
            self.spec.n_step,
            self.gamma if self.runs == 1 else per_run_discount(self.gamma, n // self.runs * L),
        )
        last = last.view(n, L)
        entries = {k[1:]: self._restore(k[1:], d[k][rows, column]) for k in d if k[0] == "obs"}
        for k in d:
            if k[0] == "next":
                entries[k] = self._restore(k[1:], d[k][last, column])
        entries[("done",)] = d["done"][rows, column]
        entries[(seq.state_key,)] = d[seq.state_key][start, stream]
        entries[("action",)] = d["action"][trained, column]
        entries[("reward",)] = ret.view(n, L)
        entries[("discount",)] = discount.view(n, L)
        entries[("last",)] = (last - start.unsqueeze(1)) % self.rows
        entries[("weight",)] = weight
        entries[("index",)] = index
        return unchecked_tensordict(nested(entries), torch.Size([n]), self.device)
