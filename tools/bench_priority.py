"""Prioritized sampling: time of one update and one sample, sum tree against cumsum.

For each capacity, both samplers of gpurl.trainers.priority are filled with random
priorities, then timed on the same pre-drawn work: `update` (a batch of new priorities
at random indices, as after a learner step) and `sample` (one stratified batch). Each
round times --iters calls of each phase per kind, the kinds alternating within a round
(on a shared machine load drifts; interleaving keeps the comparison fair); the best
round is kept (wall clock and process CPU time, each the best of the rounds) and the
wall time of every round is recorded. One JSON record per (kind, capacity).

    python tools/bench_priority.py --sizes 1e5 1e6 --batch-size 256 --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.trainers.priority import make_priority_sampler  # noqa: E402
from gpurl.utils.host_reads import count_host_reads  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

KINDS = ("sumtree", "cumsum")


def filled_sampler(kind: str, capacity: int, device: torch.device, gen: torch.Generator):
    sampler = make_priority_sampler(kind, capacity, device)
    chunk = 1 << 16
    for start in range(0, capacity, chunk):
        index = torch.arange(start, min(start + chunk, capacity), device=device)
        sampler.update(index, torch.rand(len(index), device=device, generator=gen) + 0.01)
    return sampler


def time_calls(calls, sync) -> tuple[float, float]:
    """Microseconds per call over the zero-argument calls: wall clock, and the process's
    CPU time (which other jobs on a shared machine disturb much less)."""
    sync()
    wall, cpu = time.perf_counter(), time.process_time()
    for call in calls:
        call()
    sync()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / len(calls) * 1e6, cpu / len(calls) * 1e6


def bench(capacity: int, batch: int, iters: int, warmup: int, repeats: int, device) -> list:
    load = round(os.getloadavg()[0], 2)  # other jobs on a shared machine slow the wall clock
    gen = torch.Generator(device=device).manual_seed(0)
    samplers = {kind: filled_sampler(kind, capacity, device, gen) for kind in KINDS}
    # The same indices and priorities for both kinds, drawn before timing.
    index = torch.randint(capacity, (warmup + iters, batch), device=device, generator=gen)
    priority = torch.rand(warmup + iters, batch, device=device, generator=gen) + 0.01
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = {(kind, phase): [] for kind in KINDS for phase in ("update", "sample")}
    reads = {}
    for kind, sampler in samplers.items():
        for i in range(warmup):
            sampler.update(index[i], priority[i])
            sampler.sample(batch, generator=gen)
        with count_host_reads() as counted:
            sampler.update(index[0], priority[0])
            sampler.sample(batch, generator=gen)
        reads[kind] = counted.count
    steps = range(warmup, warmup + iters)
    for _ in range(repeats):
        for kind, s in samplers.items():
            updates = [lambda s=s, i=i: s.update(index[i], priority[i]) for i in steps]
            times[kind, "update"].append(time_calls(updates, sync))
            samples = [lambda s=s: s.sample(batch, generator=gen)] * iters
            times[kind, "sample"].append(time_calls(samples, sync))

    def figures(kind, phase):
        rounds = times[kind, phase]
        return {
            f"{phase}_us": round(min(w for w, _ in rounds), 1),
            f"{phase}_cpu_us": round(min(c for _, c in rounds), 1),
            f"{phase}_us_rounds": [round(w, 1) for w, _ in rounds],
        }

    return [
        {
            "tool": "bench_priority",
            "kind": kind,
            "capacity": capacity,
            "batch_size": batch,
            **figures(kind, "update"),
            **figures(kind, "sample"),
            "iters": iters,
            "repeats": repeats,
            "host_reads_per_update_and_sample": reads[kind],
            "threads": torch.get_num_threads(),
            "load_average_1min": load,
            "commit": gpurl_commit(),
            **environment_record(device),
        }
        for kind in KINDS
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = lambda s: int(float(s))  # noqa: E731  (accepts 1e5)
    p.add_argument("--sizes", type=size, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: leave as is)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    for capacity in args.sizes:
        for record in bench(
            capacity, args.batch_size, args.iters, args.warmup, args.repeats, device
        ):
            emit(record)


if __name__ == "__main__":
    main()
