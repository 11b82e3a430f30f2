"""Prioritized sampling on the device, with no host reads: a sum tree and a cumsum scan.

Two implementations of one interface, so tools/bench_priority.py can measure which wins:

- SumTreeSampler: the classic binary sum tree in one tensor. An update re-sums the
  ancestors of the written leaves, one level per step (log2(capacity) small kernels);
  a sample descends from the root, one level per step, vectorized over the batch.
- CumsumSampler: a flat priority tensor. An update is one scatter; a sample runs a
  cumulative sum over all entries and `torch.searchsorted` (two large kernels).

Priorities passed in are already p^alpha (the replay buffer applies alpha). Entries
never written hold priority 0 and are never drawn. Sampling is stratified: draw i of a
batch of B falls in the i-th of B equal slices of the total mass, which lowers the
variance of a batch against independent draws while each draw's marginal stays
p / sum(p). The batch therefore comes out in storage order. Priorities must be finite
and >= 0, and sampling needs a positive total (some entry written with mass).

Sums are kept in float64. In float32 the spacing of representable numbers near a total
is up to 1.2e-7 of it, while an entry of a million-entry buffer may hold 1e-6 of it:
float32 prefix sums over 1e6 priorities in [0.5, 1.5) give intervals up to 12% off the
entries' priorities (1.5% on average); the same measurement in float64 shows none.

Duplicate indices in one `update` call: the last occurrence wins, on every device. The
value of the last occurrence is written to every duplicate position, so whichever
write the scatter performs last, the stored value is the same.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gpurl.errors import ConfigError

SUM_DTYPE = torch.float64


class _PrioritySampler:
    def __init__(self, capacity: int, device: torch.device | str) -> None:
        if capacity < 1:
            raise ConfigError(f"priority sampler capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        # Per index, the position of its last occurrence in the current update batch.
        self._last_position = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self._aranges: dict[tuple[int, torch.dtype], Tensor] = {}

    def _arange(self, n: int, dtype: torch.dtype = torch.long) -> Tensor:
        """0..n-1, made once per (n, dtype): no allocation per call in the loop."""
        key = (n, dtype)
        if key not in self._aranges:
            self._aranges[key] = torch.arange(n, dtype=dtype, device=self.device)
        return self._aranges[key]

    def _last_write(self, index: Tensor, priority: Tensor) -> Tensor:
        """The priority each position must store so that the last duplicate wins."""
        position = self._arange(index.shape[0])
        # include_self=False: the slots touched hold exactly the max position scattered
        # there; slots not touched keep stale values that are never read.
        self._last_position.scatter_reduce_(0, index, position, "amax", include_self=False)
        return priority[self._last_position[index]].to(SUM_DTYPE)

    def _targets(self, batch_size: int, total: Tensor, generator) -> Tensor:
        """Stratified points in [0, total): (i + U_i) / B * total, kept strictly below total."""
        strata = self._arange(batch_size, SUM_DTYPE)
        u = torch.rand(batch_size, dtype=SUM_DTYPE, device=self.device, generator=generator)
        point = (strata + u).mul_(total / batch_size)
        # (B-1 + U) / B * total can round up to total itself; the largest float below it
        # still lands in the last entry with non-zero priority.
        return torch.minimum(point, torch.nextafter(total, torch.zeros_like(total)))


class SumTreeSampler(_PrioritySampler):
    """A binary sum tree in one tensor: node 1 is the root, node k has children 2k and
    2k+1, and the leaves (capacity padded to a power of two) are nodes [L, 2L).

    On small batches each level costs a few kernel launches, and the launches, not the
    arithmetic, are the time: `pairs` views the tree as rows (2k, 2k+1) so that one
    index_select fetches both children of a batch of nodes when re-summing.
    """

    def __init__(self, capacity: int, device: torch.device | str) -> None:
        super().__init__(capacity, device)
        self.depth = max(self.capacity - 1, 1).bit_length()
        self.leaves = 1 << self.depth
        self.tree = torch.zeros(2 * self.leaves, dtype=SUM_DTYPE, device=self.device)
        self.pairs = self.tree.view(self.leaves, 2)
        self._levels = torch.arange(1, self.depth + 1, device=self.device).unsqueeze(1)

    def update(self, index: Tensor, priority: Tensor) -> None:
        leaf = index + self.leaves
        self.tree.index_copy_(0, leaf, self._last_write(index, priority))
        # Re-sum (not add deltas) so rounding never accumulates. Duplicate parents get
        # the same sum of the same children, so the order of their writes does not matter.
        for node in leaf >> self._levels:  # ancestors, one level per row, root last
            self.tree.index_copy_(0, node, self.pairs.index_select(0, node).sum(1))

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """(index [B] long, probability [B] float32) by stratified descent."""
        total = self.tree[1]
        point = self._targets(batch_size, total, generator)
        node = torch.ones(batch_size, dtype=torch.long, device=self.device)
        for _ in range(self.depth):
            left = node * 2
            left_sum = self.tree.index_select(0, left)
            # Each stored sum is the rounded sum of its children, so with round-to-nearest
            # a point below a node's sum stays below the chosen child's sum: the descent
            # never enters an empty subtree (tests/test_priority.py probes the edges).
            right = point >= left_sum
            point = point - left_sum * right
            node = left + right
        probability = (self.tree.index_select(0, node) / total).float()
        return (node - self.leaves).clamp_(max=self.capacity - 1), probability

    def total(self) -> Tensor:
        return self.tree[1].clone()

    def state_dict(self) -> dict[str, Tensor]:
        return {"tree": self.tree}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.tree.copy_(state["tree"])


class CumsumSampler(_PrioritySampler):
    """Priorities in a flat tensor; each sample scans them with a cumulative sum.

    A sequential scan (CPU) repeats a prefix sum exactly across a zero entry, so such an
    entry is never drawn. A parallel scan (CUDA) may round the two differently, leaving
    a zero entry an interval of about one ulp of the total (~2e-16 of the mass) and a
    returned probability of 0 (reasoned, not measured: no GPU was at hand).
    """

    def __init__(self, capacity: int, device: torch.device | str) -> None:
        super().__init__(capacity, device)
        self.priority = torch.zeros(self.capacity, dtype=SUM_DTYPE, device=self.device)

    def update(self, index: Tensor, priority: Tensor) -> None:
        self.priority[index] = self._last_write(index, priority)

    def sample(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """(index [B] long, probability [B] float32) by searchsorted over the prefix sums."""
        prefix = torch.cumsum(self.priority, 0)
        total = prefix[-1]
        point = self._targets(batch_size, total, generator)
        # right=True: the first entry whose prefix sum exceeds the point. An entry of
        # priority 0 repeats its neighbour's prefix sum exactly, so it is never first.
        index = torch.searchsorted(prefix, point, right=True).clamp_(max=self.capacity - 1)
        return index, (self.priority[index] / total).float()

    def total(self) -> Tensor:
        # The scan's last element, not .sum(): a different summation order could round
        # differently from the total that sample() divides by and clamps to.
        return torch.cumsum(self.priority, 0)[-1]

    def state_dict(self) -> dict[str, Tensor]:
        return {"priority": self.priority}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.priority.copy_(state["priority"])


def importance_weights(probability: Tensor, size: int | Tensor, beta: float | Tensor) -> Tensor:
    """(size * p)^-beta, divided by its batch maximum so the largest weight is 1.

    The weights undo the bias of prioritized sampling against uniform sampling over the
    `size` filled entries (probability 1 / size). Dividing by the maximum only scales
    the loss down, for stability; `size` cancels in that ratio but keeps the unscaled
    values near 1. beta may be a device scalar fed by a schedule (no host read).
    """
    weight = torch.pow(probability * size, -beta)
    return weight / weight.max()


# Below this many entries cumsum + searchsorted beats the sum tree on a CPU (measured
# 3.3x faster at 1e5, 1.36x slower at 1e6; docs/benchmarks.md#updates).
CPU_SUMTREE_FROM = 700_000


def auto_sampler_kind(capacity: int, device: torch.device | str) -> str:
    """The faster kind as measured: cumsum on CUDA at every size (7-10x on an H100 at
    1e5-1e6: one scan kernel against ~180 small launches), and on a CPU below
    CPU_SUMTREE_FROM entries; the sum tree on a CPU above."""
    if torch.device(device).type == "cuda" or capacity < CPU_SUMTREE_FROM:
        return "cumsum"
    return "sumtree"


def make_priority_sampler(
    kind: str, capacity: int, device: torch.device | str
) -> SumTreeSampler | CumsumSampler:
    samplers = {"sumtree": SumTreeSampler, "cumsum": CumsumSampler}
    if kind == "auto":
        kind = auto_sampler_kind(capacity, device)
    if kind not in samplers:
        raise ConfigError(
            f"unknown priority sampler {kind!r}; use one of auto, {', '.join(sorted(samplers))}"
        )
    return samplers[kind](capacity, device)
