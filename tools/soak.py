"""Soak test: train one long run in-process and check that memory stays flat after warm-up.

Takes the same Hydra overrides as `python -m gpurl.train`, builds the trainer and runs
its ordinary loop, while a sampler thread reads the process RSS (VmRSS in
/proc/self/status) and, on CUDA, torch.cuda.memory_allocated / max_memory_allocated,
each with the trainer's frame count, every --interval seconds. Nothing is added to the
loop itself.

    python tools/soak.py experiment=dqn_cartpole trainer.total_frames=1000000 \
        --out docs/bench/soak/soak.jsonl --plot docs/img/results/soak.png

Warm-up: memory may rise until the replay is full (its pages are touched as it fills),
the first evaluation has run (the eval env's buffers) and the first checkpoint has been
written (serialisation buffers). So the warm-up ends at the latest of: --warmup (a
fraction of total_frames if <= 1, else frames; 0.1 by default), the frames that fill the
replay (rows x envs; off-policy trainers), the first eval_interval and the first
checkpoint_interval, rounded up to a whole batch. Curriculum stages are not waited for:
their robot and obstacle slots are preallocated, so a stage change should not allocate.

Growth: the post-warm-up frames are cut in thirds; growth is the median of the samples
in the last third minus the median of those in the first third. Medians, because a
checkpoint write or an evaluation lifts RSS for a moment and a max would count that.
Samples taken once total_frames is reached (the last evaluation and checkpoint, the
summary's plot) are left out. Memory grows when growth > max(--tolerance-mib,
--tolerance-percent of the first third's median), for RSS and (on CUDA) for allocated
memory. The tool prints one verdict line and exits 1 on growth, 0 when flat, 2 on a
usage or config mistake. One JSON record per run is appended to --out; --plot draws
memory against frames with the warm-up and the two windows marked.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpurl.errors import ConfigError, RunFault  # noqa: E402
from gpurl.train import build, command_line_problem, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

MIB = 1024 * 1024


def rss_bytes() -> int:
    """Resident set size of this process, from /proc/self/status (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB
    raise RuntimeError("no VmRSS line in /proc/self/status")


class Sampler(threading.Thread):
    """Reads memory and the trainer's frame count every `interval` seconds until stopped.
    Reading `trainer.frames` (a host int) from another thread needs no lock: the loop
    only ever rebinds it."""

    def __init__(self, trainer, interval: float, cuda_device=None):
        super().__init__(daemon=True)
        self.trainer, self.interval, self.cuda = trainer, interval, cuda_device
        self.samples: list[dict] = []
        self.stopped = threading.Event()
        self.started_at = time.perf_counter()

    def sample(self) -> None:
        s = {
            "t": round(time.perf_counter() - self.started_at, 3),
            "frames": int(self.trainer.frames),
            "rss": rss_bytes(),
        }
        if self.cuda is not None:
            s["cuda"] = torch.cuda.memory_allocated(self.cuda)
            s["cuda_max"] = torch.cuda.max_memory_allocated(self.cuda)
        self.samples.append(s)

    def run(self) -> None:
        self.sample()
        while not self.stopped.wait(self.interval):
            self.sample()

    def stop(self) -> list[dict]:
        self.stopped.set()
        self.join()
        self.sample()  # the state after training, summary plot included
        return self.samples


def warmup_frames(trainer, total: int, warmup: float) -> tuple[int, dict]:
    """Frames after which memory should stop rising, and what each rule asked for."""
    t = trainer.cfg
    rules = {"flag": int(warmup * total) if warmup <= 1 else int(warmup)}
    buffer = getattr(trainer, "buffer", None)
    if buffer is not None:  # one replay row is one step of every env
        rules["replay_full"] = buffer.rows * trainer.env.batch_size.numel()
    rules["first_eval"] = int(t.eval_interval)
    rules["first_checkpoint"] = int(t.checkpoint_interval)
    # The loop moves a whole batch at a time, and the evaluation or checkpoint due at
    # frame F runs once frames has passed F: round up so samples taken during it (which
    # read the frame count after the batch) still count as warm-up.
    batch = int(getattr(trainer, "frames_per_batch", 0) or trainer.env.batch_size.numel())
    end = max(rules.values())
    return -(-end // batch) * batch, rules


def growth(frames, values, warmup: int, total: int) -> dict | None:
    """Median of the last third of the post-warm-up frames minus that of the first third.
    Samples at frames <= warmup or >= total are left out. None if a third holds fewer
    than 3 samples (the run is too short for the interval)."""
    span = total - warmup
    lo, hi = warmup + span / 3, total - span / 3
    first = [v for f, v in zip(frames, values, strict=True) if warmup < f <= lo]
    last = [v for f, v in zip(frames, values, strict=True) if hi < f < total]
    if len(first) < 3 or len(last) < 3:
        return None
    a, b = statistics.median(first), statistics.median(last)
    return {"first": a, "last": b, "growth": b - a, "n_first": len(first), "n_last": len(last)}


def judge(g: dict, tolerance_mib: float, tolerance_percent: float) -> tuple[bool, float]:
    """(grew, tolerance in bytes): grew when growth exceeds the larger tolerance."""
    tol = max(tolerance_mib * MIB, tolerance_percent / 100 * g["first"])
    return g["growth"] > tol, tol


def slope_per_million(frames, values, warmup: int, total: int) -> float | None:
    """Least-squares slope of the post-warm-up samples, in value per 1M frames (for the
    record: the verdict uses the windows above)."""
    pts = [(f, v) for f, v in zip(frames, values, strict=True) if warmup < f < total]
    if len(pts) < 2:
        return None
    mf = sum(f for f, _ in pts) / len(pts)
    mv = sum(v for _, v in pts) / len(pts)
    var = sum((f - mf) ** 2 for f, _ in pts)
    if var == 0:
        return None
    return sum((f - mf) * (v - mv) for f, v in pts) / var * 1e6


def plot(path: Path, samples, warmup: int, total: int, windows: dict, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("rss", "RSS (MiB)")]
    if "cuda" in samples[0]:
        series.append(("cuda", "CUDA allocated (MiB)"))
    fig, axes = plt.subplots(len(series), 1, figsize=(8, 3.2 * len(series)), squeeze=False)
    frames = [s["frames"] / 1e6 for s in samples]
    span = total - warmup
    for ax, (key, label) in zip(axes[:, 0], series, strict=True):
        ax.plot(frames, [s[key] / MIB for s in samples], lw=0.8, marker=".", ms=2)
        ax.axvspan(0, warmup / 1e6, color="0.85", label="warm-up")
        w = windows.get(key)
        if w is not None:
            ax.hlines(
                w["first"] / MIB,
                warmup / 1e6,
                (warmup + span / 3) / 1e6,
                "g",
                lw=2,
                label="median, first third",
            )
            ax.hlines(
                w["last"] / MIB,
                (total - span / 3) / 1e6,
                total / 1e6,
                "r",
                lw=2,
                label="median, last third",
            )
        ax.set_ylabel(label)
        ax.legend(loc="lower right", fontsize=8)
    axes[-1, 0].set_xlabel("frames (M)")
    axes[0, 0].set_title(textwrap.fill(title, 110), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def thin(samples, key: str, n: int = 200) -> list[list[float]]:
    """About n (frames, MiB) points of a series, the last sample included, for the record."""
    step = max(1, -(-len(samples) // n))
    kept = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    return [[s["frames"], round(s[key] / MIB, 1)] for s in kept]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m gpurl.train")
    p.add_argument(
        "--warmup",
        type=float,
        default=0.1,
        help="minimum warm-up: a fraction of total_frames if <= 1, else frames "
        "(raised to cover the replay filling and the first eval/checkpoint)",
    )
    p.add_argument(
        "--tolerance-mib",
        type=float,
        default=32.0,
        help="growth allowed after warm-up, MiB (default 32)",
    )
    p.add_argument(
        "--tolerance-percent",
        type=float,
        default=2.0,
        help="growth allowed, percent of the post-warm-up level (default 2); the "
        "larger of the two tolerances applies",
    )
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--out", type=Path, default=None, help="append the JSON record to this file")
    p.add_argument("--plot", type=Path, default=None, help="PNG of memory against frames")
    p.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="the run's directory (kept); default a temporary one, removed after",
    )
    args = p.parse_intermixed_args(argv)

    problem = command_line_problem(args.overrides)
    if problem:
        print(f"soak: error: {problem}", file=sys.stderr)
        return 2
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="gpurl_soak_"))
    try:
        return soak(args, run_dir)
    except ConfigError as err:
        print(f"soak: error: {err}", file=sys.stderr)
        return 2
    except RunFault as err:
        print(f"soak: error: the run stopped: {err}", file=sys.stderr)
        return 2
    finally:
        if args.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)


def soak(args, run_dir: Path) -> int:
    import matplotlib.pyplot  # noqa: F401  imported now, so the summary's plot adds no RSS

    commit = gpurl_commit()
    cfg = load_config(args.overrides)
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = build(cfg, run_dir)
    total = int(cfg.trainer.total_frames)
    warmup, rules = warmup_frames(trainer, total, args.warmup)
    if warmup >= total:
        raise ConfigError(
            f"warm-up ({warmup} frames: {rules}) leaves nothing of total_frames={total} to "
            f"soak: raise trainer.total_frames"
        )
    device = trainer.device
    cuda = device if torch.device(device).type == "cuda" else None
    sampler = Sampler(trainer, args.interval, cuda)
    started = time.perf_counter()
    sampler.start()
    try:
        summary = trainer.train()
    finally:
        samples = sampler.stop()
    wall = time.perf_counter() - started

    frames = [s["frames"] for s in samples]
    keys = ["rss"] + (["cuda"] if cuda is not None else [])
    windows = {k: growth(frames, [s[k] for s in samples], warmup, total) for k in keys}
    if any(w is None for w in windows.values()):
        raise ConfigError(
            f"too few samples after warm-up ({len(samples)} in all, warm-up {warmup} of "
            f"{total} frames): lower --interval or raise trainer.total_frames"
        )
    verdicts = {k: judge(w, args.tolerance_mib, args.tolerance_percent) for k, w in windows.items()}
    grew = [k for k, (g, _) in verdicts.items() if g]
    after = [s for s in samples if s["frames"] > warmup]
    record = {
        "tool": "soak",
        "overrides": list(args.overrides),
        "total_frames": total,
        "frames": int(trainer.frames),
        "wall_s": round(wall, 1),
        "frames_per_s": round(trainer.frames / wall, 1),
        "warmup_frames": warmup,
        "warmup_rules": rules,
        "interval_s": args.interval,
        "samples": len(samples),
        "verdict": "growth" if grew else "flat",
        "eval_return": summary.get("eval_return"),
    }
    for k in keys:
        w, tol = windows[k], verdicts[k][1]
        vals = [s[k] for s in samples]
        record[f"{k}_warmup_end_mib"] = round(after[0][k] / MIB, 1)
        record[f"{k}_final_mib"] = round(vals[-1] / MIB, 1)
        record[f"{k}_peak_mib"] = round(max(vals) / MIB, 1)
        record[f"{k}_first_third_median_mib"] = round(w["first"] / MIB, 1)
        record[f"{k}_last_third_median_mib"] = round(w["last"] / MIB, 1)
        record[f"{k}_growth_mib"] = round(w["growth"] / MIB, 1)
        record[f"{k}_tolerance_mib"] = round(tol / MIB, 1)
        slope = slope_per_million(frames, vals, warmup, total)
        record[f"{k}_slope_mib_per_mframes"] = None if slope is None else round(slope / MIB, 2)
        record[f"{k}_series_mib"] = thin(samples, k)
    if cuda is not None:
        record["cuda_max_allocated_mib"] = round(samples[-1]["cuda_max"] / MIB, 1)
    record.update(commit=commit, **environment_record(device))

    line = ", ".join(
        f"{k} {record[f'{k}_growth_mib']:+.1f} MiB after warm-up "
        f"(tolerance {record[f'{k}_tolerance_mib']:.1f})"
        for k in keys
    )
    title = (
        f"soak {' '.join(args.overrides)}: {record['verdict']} "
        f"({record['frames']:,} frames, {record['wall_s']:.0f} s, {device})"
    )
    if args.plot is not None:
        plot(args.plot, samples, warmup, total, windows, title)
        record["plot"] = str(args.plot)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(json.dumps(record) + "\n")
    emit({k: v for k, v in record.items() if not k.endswith("_series_mib")})
    verdict = "FAIL: memory grows" if grew else "PASS: memory flat"
    print(f"soak: {verdict}: {line}; {record['frames']:,} frames in {record['wall_s']:.0f} s")
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
