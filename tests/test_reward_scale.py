"""agent.normalize_reward (PPO, A2C): rewards divided by a running std of the discounted
return (SB3's VecNormalize norm_reward), hand-computed; the return carried from one
rollout to the next and checkpointed as acting state; evaluation on the env's own
rewards; the one-line refusal. Exact resume holds a case of its own (tests/test_resume.py)."""

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.policies.networks import RewardScale
from gpurl.train import build, load_config


def small(tmp_path, *overrides):
    cfg = load_config(
        [
            "env=cartpole",
            "agent=ppo",
            "agent.normalize_reward=true",
            "env.num_envs=4",
            "env.eval_envs=2",
            "agent.hidden=[16]",
            "trainer.rollout_steps=8",
            "logger=none",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def test_rewards_scale_by_the_std_of_the_discounted_return():
    scale = RewardScale((2,), gamma=0.5)
    reward = torch.tensor([[1.0, 2.0], [1.0, 2.0], [4.0, 2.0]])
    done = torch.tensor([[False, False], [True, False], [False, False]])
    out = scale(reward, done)
    # env 0: 1, 1.5, then a new episode: 4; env 1: 2, 3, 3.5
    returns = torch.tensor([1.0, 1.5, 4.0, 2.0, 3.0, 3.5])
    var = returns.var(correction=0) * 6 / (6 + 1e-4)  # the near-zero prior count
    torch.testing.assert_close(out, reward / torch.sqrt(var + 1e-8), rtol=1e-4, atol=0)
    torch.testing.assert_close(scale.ret, torch.tensor([4.0, 3.5]))  # carried over
    scale.stats.var.fill_(0.01), scale.stats.count.fill_(1e12)  # settled statistics
    big = scale(torch.tensor([[5.0, -0.5]]), torch.zeros(1, 2, dtype=torch.bool))
    torch.testing.assert_close(big, torch.tensor([[10.0, -5.0]]))  # 50 clipped to 10


def test_targets_learn_from_scaled_rewards_and_the_return_carries_over(tmp_path):
    trainer = small(tmp_path)
    agent = trainer.agent
    rollout = trainer.collector.rollout()
    ret_before = agent.reward_scale.ret.clone()
    targets = agent.compute_targets(rollout, trainer.collector.obs)
    raw = rollout.get(("next", "reward")).reshape(8, 4)
    assert (raw == 1).all()  # CartPole pays 1 a step
    # GAE read the scaled rewards: with a std of the returns above 1, the targets sit
    # below what rewards of 1 would give
    assert agent.reward_scale.stats.var.item() > 1
    assert targets.get("value_target").max() < 8
    assert ret_before.abs().max() == 0 and agent.reward_scale.ret.abs().max() > 0
    assert "reward_return" in agent.acting_state()
    assert "reward_scale" in agent.state()["modules"]


def test_evaluation_reports_the_envs_own_rewards(tmp_path):
    trainer = small(tmp_path, "trainer.total_frames=64", "trainer.eval_interval=32")
    trainer.train()
    assert trainer.agent.reward_scale.stats.var.item() > 1  # learning saw rewards below 1
    # CartPole pays 1 a step: the mean return of 2 greedy episodes is a whole number of
    # half steps, at least 8 (no CartPole episode is shorter); scaled, it would not be
    ret = trainer.evaluate()
    assert ret >= 8 and (2 * ret).is_integer()


def test_off_by_default_and_refused_with_many_seeds(tmp_path):
    assert small(tmp_path / "off", "agent.normalize_reward=false").agent.reward_scale is None
    with pytest.raises(ConfigError, match="one set of return statistics") as err:
        small(tmp_path / "many", "trainer.num_seeds=2")
    assert "\n" not in str(err.value)


def test_every_statistic_follows_the_device_it_is_given():
    # the running statistics once stayed on the CPU while the carried return went to
    # the GPU: on CUDA the first rollout failed (meta stands in for the device here)
    scale = RewardScale((4,), gamma=0.99, device="meta")
    assert {b.device.type for b in scale.buffers()} == {"meta"}
