"""Shared bits of the benchmark tools: the facts every JSON record carries."""

from __future__ import annotations

import datetime
import json
import platform
import sys

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
