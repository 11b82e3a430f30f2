import torch

from gpurl.errors import ConfigError


def resolve_device(name: str | None) -> torch.device:
    """'auto' (or None) picks CUDA when present, else the CPU."""
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(f"unknown device '{name}': use auto, cpu or cuda[:N]") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name} but CUDA is not available: use device=cpu or auto")
    return device
