"""agent.encoder.init: the CNN's init, checked by the spread of its features."""

import pytest
import torch
from torch import nn

from gpurl.errors import ConfigError
from gpurl.policies.networks import CNNEncoder


def test_orthogonal_init_keeps_the_features_spread():
    torch.manual_seed(0)
    frames = torch.randint(0, 256, (32, 4, 84, 84), dtype=torch.uint8)
    default = CNNEncoder((4, 84, 84), (0.0, 255.0), 512, "nature", "default")(frames).std()
    orthogonal = CNNEncoder((4, 84, 84), (0.0, 255.0), 512, "nature", "orthogonal")(frames).std()
    # PyTorch's default init shrinks the spread at every ReLU layer; gain sqrt(2) keeps it
    assert orthogonal > 0.3 and default < 0.05 and orthogonal > 10 * default


def test_orthogonal_init_is_orthogonal_with_zero_biases():
    enc = CNNEncoder((4, 84, 84), (0.0, 255.0), 64, "nature", "orthogonal")
    w = enc.fc[0].weight  # [64, 3136]: rows orthogonal with norm sqrt(2)
    assert torch.allclose(w @ w.T, 2.0 * torch.eye(64), atol=1e-4)
    layers = [m for m in enc.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert len(layers) == 4 and all(float(m.bias.detach().abs().max()) == 0.0 for m in layers)


def test_an_unknown_init_is_one_line():
    with pytest.raises(ConfigError, match="agent.encoder.init=xavier is unknown"):
        CNNEncoder((4, 84, 84), init="xavier")
