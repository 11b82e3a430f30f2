"""What a run leaves behind: scalar logs (TorchRL loggers), a learning-curve PNG,
summary.json, and progress.json while it runs."""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path


def plot_learning_curve(path: Path, title: str, eval_history, train_history) -> Path:
    """Evaluation returns (markers) and training episode returns (line) against frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if train_history:
        f, r = [h[0] for h in train_history], [h[1] for h in train_history]
        ax.plot(f, r, color="tab:blue", alpha=0.6, lw=1.2, label="training episodes (mean)")
    if eval_history:
        f, r = zip(*eval_history, strict=True)
        ax.plot(f, r, "o-", color="tab:red", ms=4, lw=1.5, label="greedy evaluation")
    ax.set_xlabel("frames")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if train_history or eval_history:  # a run stopped early may have neither yet
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_json(path: Path, value, indent: int | None = None) -> Path:
    """`value` as JSON at `path`, through a temporary file renamed over it: a reader
    (gpurl.status, a sweep summary) never sees half a file, nor does a crash leave one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=indent) + "\n")
    tmp.replace(path)
    return path


def write_summary(path: Path, summary: dict) -> Path:
    return write_json(path, summary, indent=2)


class ProgressFile:
    """RUN_DIR/progress.json, rewritten at every log interval and evaluation: frames done
    of the total, the recent frames/s (since the previous write of this process), the
    latest evaluation, the mean return of the last 100 or more training episodes (as
    summaries' final_train_return), the process id and host, and when it was written.
    `python -m gpurl.status` reads it; nothing in the run reads it back."""

    def __init__(self, run_dir: Path, total_frames: int):
        self.path = Path(run_dir) / "progress.json"
        self.record: dict = {
            "total_frames": total_frames,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        self.last: tuple[int, float] | None = None  # (frames, seconds) at the last write

    def write(self, frames: int, seconds: float, train_return: dict | None = None) -> None:
        """At a log: `seconds` is the run's wall time so far (resumed runs included);
        `train_return`: final_train_return of the training history so far (None: fewer
        than 100 episodes yet)."""
        now = time.monotonic()
        if self.last is None or frames > self.last[0]:  # the pace since the last write
            if self.last is not None:
                rate = (frames - self.last[0]) / max(now - self.last[1], 1e-9)
                self.record["frames_per_s"] = round(rate, 1)
            self.last = (frames, now)
        self.record.update(frames=frames, wall_time_s=round(seconds, 1))
        if train_return is not None:
            self.record["train_return"] = _finite(train_return["return"])
            self.record["train_return_episodes"] = train_return["episodes"]
        self._dump()

    def evaluated(self, frames: int, ret: float, per_run: list[float] | None) -> None:
        self.record.update(eval_frames=frames, eval_return=_finite(ret))
        if per_run is not None:
            self.record["run_eval_returns"] = [_finite(r) for r in per_run]
        self._dump()

    def _dump(self) -> None:
        self.record["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.record["updated_unix"] = round(time.time(), 1)
        write_json(self.path, self.record)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
