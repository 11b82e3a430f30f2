"""tools/bench_recurrent_floor.py: one record with every side's frames/s and the ratios;
the bare loop's fused LSTM replay is its stepped one where no episode ends, and the
stepped one restarts the state where one does."""

import json

import pytest
import torch

from tools import bench_recurrent_floor as floor


def test_one_record_with_every_side_and_their_ratios(capsys):
    argv = ["--num-envs", "2", "--rounds", "1", "--iterations", "1", "--warmup", "1"]
    argv += ["--set", "trainer.rollout_steps=4", "agent.epochs=2"]
    assert floor.main(argv) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["preset"] == floor.PRESET and record["num_envs"] == 2
    assert record["frames_per_iteration"] == 8 and record["epochs"] == 2
    fps = record["frames_per_sec"]
    assert set(fps) == set(floor.SIDES) and all(v > 0 for v in fps.values())
    ratios = record["ratios"]
    assert ratios["bare_lstm_over_ff"] == pytest.approx(fps["bare_lstm"] / fps["bare_ff"], 1e-2)
    assert ratios["gpurl_lstm_over_ff"] == pytest.approx(fps["gpurl_lstm"] / fps["gpurl_ff"], 1e-2)


def _grads(net):
    return [p.grad.clone() for p in net.parameters()]


def test_the_fused_replay_is_the_stepped_one_where_no_episode_ends():
    torch.manual_seed(0)
    net = floor.BareNet(obs=3, out=2, hidden=[8], recurrent=5)
    obs, state = torch.randn(6, 4, 3), (torch.randn(1, 4, 5), torch.randn(1, 4, 5))
    keep = torch.ones(6, 4)
    fused = net.sequence(obs, state, keep, stepped=False)
    fused.square().sum().backward()
    g_fused = _grads(net)
    net.zero_grad()
    stepped = net.sequence(obs, state, keep, stepped=True)
    stepped.square().sum().backward()
    torch.testing.assert_close(stepped, fused)
    for a, b in zip(_grads(net), g_fused, strict=True):
        torch.testing.assert_close(a, b)


def test_the_stepped_replay_starts_afresh_after_an_episode_end():
    torch.manual_seed(0)
    net = floor.BareNet(obs=3, out=2, hidden=[8], recurrent=5)
    obs, state = torch.randn(6, 1, 3), (torch.randn(1, 1, 5), torch.randn(1, 1, 5))
    keep = torch.ones(6, 1)
    keep[2] = 0  # the episode ends at step 2: step 3 starts from a zero state
    out = net.sequence(obs, state, keep, stepped=True)
    zeros = (torch.zeros(1, 1, 5), torch.zeros(1, 1, 5))
    fresh = net.sequence(obs[3:], zeros, torch.ones(3, 1), stepped=False)
    torch.testing.assert_close(out[3:], fresh)
    ignored = net.sequence(obs, state, keep, stepped=False)  # the lower bound ignores it
    assert not torch.allclose(ignored[3:], fresh)
