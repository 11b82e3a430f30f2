"""tools/bench_hotpath.py: one record per case, the three sides timed, and a bare update
that trains (its loss falls on a fixed batch)."""

import json
from types import SimpleNamespace

import pytest
import torch

from tools import bench_hotpath


@pytest.mark.slow  # builds a trainer and fills its replay: about 10 s
def test_a_case_prints_one_record_with_the_three_sides(capsys):
    args = ["--cases", "dqn_cartpole", "--num-envs", "1", "--updates", "5", "--rounds", "2"]
    assert bench_hotpath.main(args) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    record = json.loads(line)
    assert record["case"] == "dqn_cartpole" and record["num_envs"] == 1
    for side in ("bare", "bare_optim", "learn", "iteration"):
        assert len(record["rounds_ms"][side]) == 2 and min(record["rounds_ms"][side]) > 0
    ratio = record["learn_ms_per_update"] / record["bare_ms_per_update"]
    assert record["learn_over_bare"] == pytest.approx(ratio, rel=1e-2)
    ratio = record["learn_ms_per_update"] / record["bare_optim_ms_per_update"]
    assert record["learn_over_bare_optim"] == pytest.approx(ratio, rel=1e-2)
    assert record["torch_threads"] == 1 and record["commit"] is not None


@pytest.mark.parametrize("kind", ["dqn", "iqn", "pqn", "ppo", "sac", "td3", "ddpg"])
def test_each_bare_update_steps_its_networks(kind):
    """The floor does the work it stands for: each call changes the networks' weights."""
    cfg = SimpleNamespace(
        hidden=[8, 8],
        lr=1e-2,
        actor_lr=1e-2,
        critic_lr=1e-2,
        alpha_lr=1e-2,
        gamma=0.99,
        tau=0.5,
        max_grad_norm=10.0,
        cos_embed=4,
        quantiles=3,
        target_quantiles=3,
        layer_norm=True,
        activation="tanh",
        clip_epsilon=0.2,
        value_clip=0.2,
        value_coef=0.5,
        entropy_coef=0.01,
        policy_delay=1,
        target_noise=0.2,
        target_noise_clip=0.5,
    )
    discrete = kind in ("dqn", "iqn", "pqn")
    torch.manual_seed(0)
    update, networks = bench_hotpath.bare_update(
        kind, cfg, {"obs": 3, "act": 2, "discrete": discrete}, 16, "cpu"
    )
    for net in networks:  # every network it trains moves at each update
        before = [p.detach().clone() for p in net.parameters()]
        update()
        after = list(net.parameters())
        assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True)), kind


@pytest.mark.parametrize("max_norm", [None, 0.1])
def test_the_floors_kernel_step_is_torch_optims_step(max_norm):
    """kernel_step (the floor) and optim_step (torch.optim's calls) make the same update,
    to float rounding: the floor saves Python, not arithmetic."""
    weights = []
    for step in (bench_hotpath.kernel_step, bench_hotpath.optim_step):
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 3)
        opt = bench_hotpath.adam(net.parameters(), 1e-2)
        for _ in range(10):
            step(opt, net(torch.randn(8, 4)).pow(2).mean() * 10, max_norm)
        weights.append([p.detach().clone() for p in net.parameters()])
    for a, b in zip(*weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_env_steps_time_the_three_ways_of_stepping(capsys):
    pytest.importorskip("gymnasium")
    args = ["--env-steps", "--num-envs", "2", "--updates", "3", "--rounds", "1"]
    assert bench_hotpath.main(args) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["env"] for r in records] == ["gym:Acrobot-v1", "gym:Pendulum-v1"]
    for r in records:
        assert min(r["lean_ms_per_step"], r["torchrl_ms_per_step"], r["gymnasium_ms_per_step"]) > 0
        overhead = r["lean_ms_per_step"] - r["gymnasium_ms_per_step"]
        assert r["lean_overhead_ms"] == pytest.approx(overhead, abs=1e-3)


@pytest.mark.slow  # builds two trainers and trains them: about 10 s
def test_denormals_time_the_same_training_kept_and_flushed(capsys):
    args = ["--denormals", "--cases", "dqn_cartpole", "--num-envs", "1"]
    args += ["--warmup-updates", "30", "--updates", "5", "--rounds", "2"]
    try:
        assert bench_hotpath.main(args) == 0
    finally:
        torch.set_flush_denormal(False)
    (line,) = capsys.readouterr().out.strip().splitlines()
    record = json.loads(line)
    assert record["case"] == "denormals_dqn_cartpole" and record["warmup_updates"] == 30
    assert 0 <= record["denormal_fraction_after_warmup"] <= 1
    for side in ("kept", "flushed"):
        assert len(record["rounds_ms"][side]) == 2 and min(record["rounds_ms"][side]) > 0
    ratio = record["iteration_ms_per_update_kept"] / record["iteration_ms_per_update_flushed"]
    assert record["kept_over_flushed"] == pytest.approx(ratio, rel=1e-2)


def test_denormal_fraction_counts_tiny_nonzero_moments():
    """The share the record reports: nonzero moments below float32's smallest normal."""
    tiny = torch.finfo(torch.float32).tiny
    torch.set_flush_denormal(False)
    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.Adam([p])
    opt.state[p] = {
        "exp_avg": torch.tensor([tiny / 4, 0.0, 1.0, -tiny / 8]),
        "exp_avg_sq": torch.tensor([0.0, 1.0, 1.0, 1.0]),
    }
    trainer = SimpleNamespace(agent=SimpleNamespace(optimizers=lambda: {"optimizer": opt}))
    assert bench_hotpath.denormal_fraction(trainer) == 2 / 8
