"""Where a result came from: the gpurl commit and the versions of what it ran on.

Run summaries (train.py) and benchmark records (tools/) both carry these, so a figure
quoted in docs/ can be traced to the code and the stack that produced it.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
from pathlib import Path

import torch


def gpurl_commit() -> str | None:
    """The commit of the gpurl checkout imported, with "+dirty" for local changes to
    tracked files; None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        git = lambda *a: subprocess.run(  # noqa: E731
            ["git", *a], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = git("status", "--porcelain", "-uno")
        return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def environment_record(device) -> dict:
    """Date, device, and the versions of torch, torchrl, tensordict and Python."""
    import tensordict
    import torchrl

    device = torch.device(device)
    return {
        "date": datetime.date.today().isoformat(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "tensordict": tensordict.__version__,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
    }
