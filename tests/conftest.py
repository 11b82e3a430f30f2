import pytest
import torch

torch.set_num_threads(min(torch.get_num_threads(), 2))

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def devices():
    """CPU always; CUDA too when present."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
