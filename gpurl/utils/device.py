import torch

from gpurl.errors import ConfigError

# The accelerators gpurl may run on, each torch's module with is_available():
# cuda, mps (Apple), xpu (Intel).
ACCELERATORS = {"cuda": torch.cuda, "mps": torch.backends.mps, "xpu": torch.xpu}


def resolve_device(name: str | None) -> torch.device:
    """'auto' (or None) picks CUDA when present, else the CPU. Any other name must be a
    device this machine has: a missing one is refused here, in one line, before anything
    is built on it (torch would fail deep inside the first generator or tensor)."""
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(f"unknown device '{name}': use auto, cpu or cuda[:N]") from err
    if device.type == "cpu":
        return device
    if device.type not in ACCELERATORS:
        raise ConfigError(f"device={name} is not supported: use auto, cpu, cuda[:N], mps or xpu")
    if not ACCELERATORS[device.type].is_available():
        raise ConfigError(
            f"device={name} but this machine has no {device.type.upper()} device: use "
            f"device=cpu or auto"
        )
    count = _count(device.type)
    if device.index is not None and device.index >= count:
        raise ConfigError(
            f"device={name}: this machine has {count} {device.type.upper()} device(s): use "
            f"device={device.type} or {device.type}:0..{device.type}:{count - 1}"
        )
    return device


def _count(kind: str) -> int:
    """How many devices of an available kind this machine has."""
    if kind == "mps":  # one Apple GPU at most
        return 1
    return ACCELERATORS[kind].device_count()
