"""The device-resident replay buffer: TorchRL's TensorDictReplayBuffer on a LazyTensorStorage
placed on the env's device.

`compilable=True` matters: without it the storage reads the write cursor back with
`.item()` at every extend (a device sync on CUDA); with it the cursor stays a tensor.
"""

from __future__ import annotations

import torch
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers import RandomSampler


def make_replay_buffer(size: int, batch_size: int, device: torch.device) -> TensorDictReplayBuffer:
    return TensorDictReplayBuffer(
        storage=LazyTensorStorage(int(size), device=device, compilable=True),
        sampler=RandomSampler(),
        batch_size=int(batch_size),
        compilable=True,
    )
