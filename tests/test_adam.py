"""core/adam.Adam: torch's fused Adam and clip_grad_norm_, in one call."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from gpurl.core.adam import Adam


def make_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))


def train(net, step, steps=40):
    """`steps` updates of a regression loss, the data drawn from a fixed stream."""
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(16, 4, generator=g), torch.randn(16, 3, generator=g) * 5
        step(nn.functional.mse_loss(net(x), y))
    return [p.detach().clone() for p in net.parameters()]


def torch_steps(max_norm, lr=1e-2):
    net = make_net()
    opt = torch.optim.Adam(net.parameters(), lr=lr, fused=True)

    def step(loss):
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if max_norm:
            nn.utils.clip_grad_norm_(list(net.parameters()), max_norm)
        opt.step()

    return train(net, step), opt


def gpurl_steps(max_norm, lr=1e-2):
    net = make_net()
    opt = Adam(net.parameters(), lr)
    return train(net, lambda loss: opt.backward_and_step(loss, max_norm)), opt


def step_both(ours, net, theirs, ref, x):
    """One step of gpurl's Adam on net and of torch's on ref, on the same loss of x."""
    ours.backward_and_step(net(x).pow(2).mean(), None)
    theirs.zero_grad(set_to_none=True)
    ref(x).pow(2).mean().backward()
    theirs.step()


def assert_same_parameters(net, ref):
    for a, b in zip(net.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_without_a_clip_the_step_is_torchs_fused_adam_bitwise():
    ours, _ = gpurl_steps(None)
    theirs, _ = torch_steps(None)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_clip_is_clip_grad_norm_to_float_rounding():
    """max_norm 0.5 clips every step of this loss (its gradient norm is several)."""
    ours, _ = gpurl_steps(0.5)
    theirs, _ = torch_steps(0.5)
    unclipped, _ = torch_steps(None)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert any(not torch.allclose(a, b) for a, b in zip(ours, unclipped, strict=True))


def test_its_state_dict_is_torchs_adams_both_ways():
    """A checkpoint of one continues in the other with the same steps."""
    _, theirs = torch_steps(None)
    _, ours = gpurl_steps(None)
    for a, b in ((theirs, ours), (ours, theirs)):
        fresh = type(b)(
            make_net().parameters(), lr=1e-2, **({"fused": True} if b is theirs else {})
        )
        fresh.load_state_dict(a.state_dict())
        state = fresh.state_dict()["state"]
        assert sorted(state[0]) == ["exp_avg", "exp_avg_sq", "step"]
        assert state[0]["step"].item() == 40.0
        assert state[0]["step"].dtype == torch.float32


def test_a_device_lr_annealed_in_place_is_the_one_it_steps_with():
    lr = torch.tensor(1e-2)
    net = make_net()
    opt = Adam(net.parameters(), lr)
    before = [p.detach().clone() for p in net.parameters()]
    lr.zero_()  # annealed to 0: Adam's step is lr * (...), nothing moves
    opt.backward_and_step(net(torch.randn(2, 4)).sum(), None)
    for a, b in zip(before, net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_parameter_the_loss_does_not_reach_is_left_alone():
    net, spare = make_net(), nn.Linear(2, 2)
    opt = Adam([*net.parameters(), *spare.parameters()], 1e-2)
    weight = spare.weight.detach().clone()
    opt.backward_and_step(net(torch.randn(2, 4)).sum(), 1.0)
    assert torch.equal(spare.weight, weight) and spare.weight.grad is None
    assert spare.weight not in opt.state


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_it_matches_torchs_fused_adam():
    net = make_net().cuda()
    ref = make_net().cuda()
    ours, theirs = (
        Adam(net.parameters(), 1e-2),
        torch.optim.Adam(ref.parameters(), 1e-2, fused=True),
    )
    x = torch.randn(16, 4, device="cuda")
    for _ in range(5):
        step_both(ours, net, theirs, ref, x)
    assert_same_parameters(net, ref)


def test_a_loss_that_reaches_no_parameter_steps_nothing():
    net = make_net()
    opt = Adam(net.parameters(), 1e-2)
    before = [p.detach().clone() for p in net.parameters()]
    opt.backward_and_step(torch.ones(2, requires_grad=True).sum(), 1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert not opt.state


def test_a_state_loaded_mid_run_is_the_one_it_steps_with():
    """The per-group lists of state tensors are made once; loading a state dict (new
    tensors) drops them, so the steps after it continue from the loaded state."""
    net, ref = make_net(), make_net()
    ours, theirs = Adam(net.parameters(), 1e-2), torch.optim.Adam(ref.parameters(), 1e-2)
    x = torch.randn(16, 4)
    ours.backward_and_step(net(x).pow(2).mean(), None)  # the lists are made here
    for _ in range(3):
        theirs.zero_grad(set_to_none=True)
        ref(x).pow(2).mean().backward()
        theirs.step()
    net.load_state_dict(ref.state_dict())
    ours.load_state_dict(copy.deepcopy(theirs.state_dict()))  # its step counters: not shared
    for _ in range(3):
        step_both(ours, net, theirs, ref, x)
    assert_same_parameters(net, ref)
    assert ours.state_dict()["state"][0]["step"].item() == 6.0
