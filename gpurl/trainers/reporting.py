"""What a run leaves behind: scalar logs (TorchRL loggers), a learning-curve PNG and
summary.json."""

from __future__ import annotations

import json
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


def write_summary(path: Path, summary: dict) -> Path:
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path
