"""Shared bits of the benchmark tools: the facts every JSON record carries."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gpurl.utils.provenance import environment_record, gpurl_commit  # noqa: F401


def pythonpath(*first) -> str:
    """PYTHONPATH for a child process: `first` ahead of the caller's own entries, which
    stay (a machine whose packages live on PYTHONPATH, as carried wheels do, keeps them)."""
    return os.pathsep.join([*map(str, first), *filter(None, [os.environ.get("PYTHONPATH")])])


def emit(record: dict, out: Path | None = None) -> None:
    """Print the record as one JSON line; with `out`, append it to that JSONL file too."""
    print(json.dumps(record), flush=True)
    sys.stdout.flush()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")


def trained_policy(path, device="cpu"):
    """gpurl's TrainedPolicy (gpurl/trained.py, what `python -m gpurl.eval` loads) of a run
    directory (its last checkpoint) or of a checkpoint file in one (RUN/checkpoints/last.pt
    or best.pt), as the evaluation tools' command lines take either."""
    # imported here: the tools that only write records need no agents or envs
    from gpurl.trained import TrainedPolicy

    path = Path(path)
    if path.is_file():
        return TrainedPolicy(path.parent.parent, path.stem, device)
    return TrainedPolicy(path, "last", device)


def train_command(preset: str, seed: int, run_dir, *overrides: str) -> list[str]:
    """`python -m gpurl.train experiment=PRESET seed=SEED` into run_dir, without a progress
    bar, as the record and comparison tools launch a run."""
    return [
        sys.executable,
        "-m",
        "gpurl.train",
        f"experiment={preset}",
        f"seed={seed}",
        f"hydra.run.dir={run_dir}",
        "trainer.progress=false",
        *overrides,
    ]


def training_batch(trainer):
    """A batch an agent can update on, without running an update: replay samples after
    a few collecting iterations (build the trainer with a large init_random_frames), or
    for an on-policy agent one acting step of every env with made-up advantages and
    value targets (what the on-policy trainer hands `update`)."""
    import torch

    from gpurl.agents import OnPolicyAgent
    from gpurl.policies import LOG_PROB, VALUE

    if not isinstance(trainer.agent, OnPolicyAgent):
        for _ in range(8):
            trainer.iteration()
        return trainer.buffer.sample(trainer.progress)
    td = trainer.agent.policy(trainer.env.lean_reset())
    g = torch.Generator(device=td.device).manual_seed(0)
    td["advantage"] = torch.randn(td.batch_size, generator=g, device=td.device)
    td["value_target"] = td[VALUE] + torch.randn(td.batch_size, generator=g, device=td.device)
    if LOG_PROB in td.keys():  # PQN acts with a Q-network: no log-prob
        td[LOG_PROB] = td[LOG_PROB] - 0.05  # the policy has moved a little since acting
    return td


# host-side calls that each put work on the GPU (a CUDA graph's replay is one launch)
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
GRAPH_LAUNCHES = ("cudaGraphLaunch",)


def device_self_us(event) -> float:
    """An aggregated event's self time on the device, in us (the attribute's name moved
    between torch versions)."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


def profile_summary(prof, iterations: int, cuda: bool, top: int) -> dict:
    """A torch.profiler run of `iterations` repetitions in numbers: the host's self time,
    the top operators by host (and, on CUDA, device) self time, the device's kernel time
    and the kernel and CUDA-graph launches per repetition."""
    events = prof.key_averages()
    rows = [
        {
            "name": e.key,
            "calls": int(e.count),
            "self_host_ms": round(e.self_cpu_time_total / 1e3, 3),
            "self_device_ms": round(device_self_us(e) / 1e3, 3) if cuda else None,
        }
        for e in events
    ]
    host_s = sum(e.self_cpu_time_total for e in events) / 1e6
    out = {
        "host_self_s": round(host_s, 4),
        "top_host": sorted(rows, key=lambda r: -r["self_host_ms"])[:top],
        "device_kernel_s": None,
        "launches_per_iteration": None,
        "graph_launches_per_iteration": None,
        "top_device": None,
    }
    if cuda:
        out["device_kernel_s"] = round(sum(device_self_us(e) for e in events) / 1e6, 4)
        calls = {e.key: int(e.count) for e in events}
        out["launches_per_iteration"] = sum(calls.get(k, 0) for k in LAUNCHES) / iterations
        out["graph_launches_per_iteration"] = (
            sum(calls.get(k, 0) for k in GRAPH_LAUNCHES) / iterations
        )
        out["top_device"] = sorted(rows, key=lambda r: -(r["self_device_ms"] or 0))[:top]
    return out
