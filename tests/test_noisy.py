"""Noisy layers (policies/noisy.py): noise resampled when asked and only then, none in
greedy evaluation, factorised as f(eps_out) f(eps_in)^T, and DQN resamples per update."""

import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.policies import NoisyLinear
from gpurl.train import build, load_config
from gpurl.utils.host_reads import count_host_reads


def test_noise_changes_only_when_resampled_and_never_in_greedy_mode():
    torch.manual_seed(0)
    layer = NoisyLinear(4, 3, sigma0=0.5)
    x = torch.randn(5, 4)
    a, b = layer(x), layer(x)
    assert torch.equal(a, b)  # same draw until resample()
    layer.resample()
    c = layer(x)
    assert not torch.allclose(a, c)
    mean = x @ layer.weight_mu.T + layer.bias_mu
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(layer(x), mean)
        layer.resample()
        torch.testing.assert_close(layer(x), mean)


def test_factorised_noise_by_hand():
    layer = NoisyLinear(2, 2, sigma0=0.5)
    with torch.no_grad():
        layer.weight_mu.zero_()
        layer.bias_mu.zero_()
        layer.weight_sigma.fill_(1.0)
        layer.bias_sigma.fill_(2.0)
        layer.eps_in.copy_(torch.tensor([1.0, -2.0]))
        layer.eps_out.copy_(torch.tensor([3.0, 0.5]))
    # W = outer(eps_out, eps_in) = [[3, -6], [0.5, -1]], b = 2 * eps_out = [6, 1]
    y = layer(torch.tensor([[1.0, 1.0]]))
    torch.testing.assert_close(y, torch.tensor([[3 - 6 + 6.0, 0.5 - 1 + 1.0]]))
    layer.resample()  # drawn as f(e) = sign(e) sqrt(|e|): |eps|^2 is a |N(0,1)| draw
    assert layer.eps_in.shape == (2,) and torch.isfinite(layer.eps_in).all()


def test_noisy_dqn_resamples_per_update_and_reads_nothing_on_the_host(tmp_path):
    cfg = load_config(
        [
            "agent=dqn",
            "agent.noisy_sigma0=0.5",
            "agent.epsilon_start=0",
            "agent.epsilon_end=0",
            "agent.hidden=[16]",
            "env.num_envs=4",
            "env.eval_envs=2",
            "trainer.init_random_frames=8",
            "trainer.batch_size=8",
            "logger=none",
            "trainer.progress=false",
            "device=cpu",
        ]
    )
    tr = build(cfg, tmp_path)
    layers = [m for m in tr.agent.q.modules() if isinstance(m, NoisyLinear)]
    assert len(layers) == 2  # the hidden layer and the output layer
    for _ in range(3):
        tr.iteration()
    before = layers[0].eps_in.clone()
    with count_host_reads() as reads:
        tr.iteration()
    assert not torch.equal(before, layers[0].eps_in)
    assert reads.count == 0, reads.report()
    # greedy evaluation is noise-free: the same episodes give the same return
    start = tr.eval_env.env_state_dict()
    first = tr.evaluate()
    tr.eval_env.load_env_state_dict(start)
    assert tr.evaluate() == first
