"""gpurl's native CartPole and Pendulum against Gymnasium's, transition by transition."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.pendulum import PendulumEnv
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads

from .conftest import devices


def _gym_transitions(env_id, states, actions):
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    out = []
    for s, a in zip(states, actions, strict=True):
        env.state = np.array(s, dtype=np.float64)
        env.steps_beyond_terminated = None
        obs, reward, terminated, _, _ = env.step(a)
        out.append((obs, reward, terminated))
    return out


def test_cartpole_matches_gymnasium_from_same_states():
    rng = np.random.default_rng(0)
    n = 512
    states = rng.uniform([-2.5, -2, -0.25, -2], [2.5, 2, 0.25, 2], size=(n, 4))
    actions = rng.integers(0, 2, size=n)
    env = CartPoleEnv(num_envs=n)
    env.state = torch.tensor(states, dtype=torch.float32)
    reward, terminated, truncated = env._advance(torch.tensor(actions))[:3]
    ref = _gym_transitions("CartPole-v1", states, actions)
    ref_obs = np.stack([r[0] for r in ref])
    np.testing.assert_allclose(env.state.numpy(), ref_obs, atol=1e-5)
    assert terminated.squeeze(-1).tolist() == [bool(r[2]) for r in ref]
    assert 0 < terminated.sum() < n  # the sample covers both outcomes
    assert reward.squeeze(-1).tolist() == [r[1] for r in ref]
    assert not truncated.any()


def test_pendulum_matches_gymnasium_from_same_states():
    rng = np.random.default_rng(1)
    n = 512
    states = rng.uniform([-np.pi, -8], [np.pi, 8], size=(n, 2))
    actions = rng.uniform(-2.5, 2.5, size=(n, 1))  # some outside the bounds: both clip
    env = PendulumEnv(num_envs=n)
    env.state = torch.tensor(states, dtype=torch.float32)
    reward, terminated, _ = env._advance(torch.tensor(actions, dtype=torch.float32))[:3]
    obs = env._observation()["observation"]
    ref = [
        _gym_transitions("Pendulum-v1", [s], [a])[0] for s, a in zip(states, actions, strict=True)
    ]
    np.testing.assert_allclose(obs.numpy(), np.stack([r[0] for r in ref]), atol=1e-5)
    np.testing.assert_allclose(
        reward.squeeze(-1).numpy(), np.array([r[1] for r in ref]), rtol=1e-5, atol=1e-5
    )
    assert not terminated.any()


def test_reset_distributions_match_gymnasium():
    cp = CartPoleEnv(num_envs=4096)
    s = cp.reset()["observation"]
    assert s.abs().max() <= 0.05 and s.abs().max() > 0.049
    pe = PendulumEnv(num_envs=4096)
    pe.reset()
    assert pe.state[:, 0].abs().max() <= np.pi and pe.state[:, 0].abs().max() > 3.1
    assert pe.state[:, 1].abs().max() <= 1.0


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("env_cls", [CartPoleEnv, PendulumEnv])
def test_specs_and_truncation(env_cls, device):
    env = env_cls(num_envs=3, device=device)
    check_env_specs(env)
    td = env.rollout(env.max_episode_steps, break_when_any_done=False)
    truncated = td["next", "truncated"]
    if env_cls is PendulumEnv:
        assert truncated[:, -1].all() and truncated[:, :-1].sum() == 0
    else:
        # a random CartPole policy never survives 500 steps, so truncation never fires
        assert td["next", "terminated"].any() and not truncated.any()


def test_cartpole_truncates_at_500_when_balanced():
    env = CartPoleEnv(num_envs=2)
    env.reset()
    for _ in range(499):
        env.state = torch.zeros(2, 4)  # keep the pole upright whatever the action
        _, term, trunc = env._advance(torch.tensor([0, 1]))[:3]
        assert not trunc.any()
    env.state = torch.zeros(2, 4)
    _, term, trunc = env._advance(torch.tensor([0, 1]))[:3]
    assert trunc.all() and not term.any()


def test_partial_reset_leaves_other_envs_untouched():
    env = PendulumEnv(num_envs=4)
    env.reset()
    for _ in range(5):
        env._advance(torch.zeros(4, 1))
    before = env.state.clone()
    steps = env.steps.clone()
    mask = torch.tensor([True, False, True, False])
    env.reset(TensorDict({"_reset": mask.unsqueeze(-1)}, batch_size=[4]))
    assert torch.equal(env.state[~mask], before[~mask])
    assert not torch.equal(env.state[mask], before[mask])
    assert (env.steps[mask] == 0).all() and torch.equal(env.steps[~mask], steps[~mask])


def test_lean_step_autoresets_done_envs_and_returns_pre_reset_observation():
    env = PendulumEnv(num_envs=2)
    env.lean_reset()
    for _ in range(199):
        env.lean_step(torch.zeros(2, 1))
    last_state = env.state.clone()
    nxt, obs = env.lean_step(torch.zeros(2, 1))
    assert nxt["truncated"].all() and nxt["done"].all()
    expected, _ = __import__("gpurl.envs.pendulum", fromlist=["x"]).pendulum_step(
        last_state, torch.zeros(2, 1)
    )
    assert torch.allclose(nxt["observation"][:, 2], expected[:, 1])
    assert (env.steps == 0).all()
    assert not torch.allclose(obs["observation"], nxt["observation"])


@pytest.mark.parametrize("env_cls", [CartPoleEnv, PendulumEnv])
def test_lean_step_reads_nothing_on_the_host(env_cls):
    env = env_cls(num_envs=8)
    obs = env.lean_reset()
    action = env.action_spec.rand()
    with count_host_reads() as reads:
        for _ in range(50):
            nxt, obs = env.lean_step(action)
    assert reads.count == 0, reads.report()


def test_bad_env_input_raises_config_errors():
    with pytest.raises(ConfigError, match="num_envs"):
        CartPoleEnv(num_envs=0)
    with pytest.raises(ConfigError, match="unknown env"):
        make_env({"name": "nope"})
    with pytest.raises(ConfigError, match="Gymnasium env id"):
        make_env({"name": "gym", "id": "NoSuchEnv-v0"})


def test_any_gymnasium_task_through_torchrl():
    env = make_env({"name": "gym", "id": "Acrobot-v1", "num_envs": 3})
    assert env.batch_size == (3,) and env.action_spec.n == 3
    check_env_specs(env)
    td = env.rollout(10)
    assert td.shape == (3, 10)
