"""Shared bits of the benchmark tools: the facts every JSON record carries."""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
import sys
from pathlib import Path

import torch


def environment_record(device) -> dict:
    import tensordict
    import torchrl

    return {
        "date": datetime.date.today().isoformat(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if torch.device(device).type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "tensordict": tensordict.__version__,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
    }


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)
    sys.stdout.flush()


def gpurl_commit() -> str | None:
    """The commit of the gpurl checkout imported, with "+dirty" for local changes to
    tracked files; None outside a git checkout."""
    import gpurl

    root = Path(gpurl.__file__).resolve().parents[1]
    try:
        git = lambda *a: subprocess.run(  # noqa: E731
            ["git", *a], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = git("status", "--porcelain", "-uno")
        return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None
