import pytest
import torch

# One thread: fastest for the small networks here, and robust when cores are shared.
torch.set_num_threads(1)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def devices():
    """CPU always; CUDA too when present."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
