"""Count reads of tensor data by the host while a block of code runs.

docs/concepts.md rule 1 bans host reads on the hot path. On CUDA each of these calls is a
device sync; on CPU they cost little, but the code that makes them would sync on a GPU.
Patching the Tensor methods makes the rule checkable on any device:

    with count_host_reads() as reads:
        trainer.iteration()
    assert reads.count == 0, reads.report()
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

HOST_READ_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")


@dataclass
class HostReads:
    count: int = 0
    by_method: Counter = field(default_factory=Counter)
    sites: Counter = field(default_factory=Counter)

    def record(self, method: str) -> None:
        self.count += 1
        self.by_method[method] += 1
        # The innermost frame outside this file and outside torch itself is the culprit.
        for frame in reversed(traceback.extract_stack()[:-2]):
            if "/torch/" not in frame.filename:
                self.sites[f"{method} at {frame.filename}:{frame.lineno}"] += 1
                break

    def report(self) -> str:
        lines = [f"{self.count} host reads"] + [f"  {n}x {s}" for s, n in self.sites.most_common()]
        return "\n".join(lines)


@contextmanager
def count_host_reads() -> Iterator[HostReads]:
    reads = HostReads()
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READ_METHODS}

    def counted(name, original):
        def method(self, *args, **kwargs):
            reads.record(name)
            return original(self, *args, **kwargs)

        return method

    for name, original in originals.items():
        setattr(torch.Tensor, name, counted(name, original))
    try:
        yield reads
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
