import pytest
import torch

# One thread: fastest for the small networks here, and robust when cores are shared.
torch.set_num_threads(1)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def devices():
    """CPU always; CUDA too when present."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def iterate_without_syncs(trainer, warmup: int, steps: int) -> None:
    """`warmup` training iterations, then `steps` more under
    torch.cuda.set_sync_debug_mode("error"): any device sync in them raises."""
    for _ in range(warmup):
        trainer.iteration()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(steps):
            trainer.iteration()
    finally:
        torch.cuda.set_sync_debug_mode("default")
