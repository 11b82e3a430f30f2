import math

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Bounded, Categorical
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.errors import ConfigError
from gpurl.policies import (
    CNNEncoder,
    DeterministicActor,
    FlatEncoder,
    LinearSchedule,
    PolicyWrapper,
    QNetwork,
    TanhGaussianActor,
)
from gpurl.policies.exploration import uniform_legal_action


class FixedQ(torch.nn.Module):
    """Q-values that prefer the highest action index; one parameter so devices resolve."""

    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(n, dtype=torch.float32))

    def forward(self, obs):
        return self.w.expand(*obs.shape[:-1], -1)


def discrete_policy(n=4, eps=1.0, random_frames=0, mask_key=None):
    return PolicyWrapper(
        FixedQ(n),
        Categorical(n, shape=(1,)),
        mask_key=mask_key,
        epsilon=LinearSchedule(eps, eps, 0) if eps is not None else None,
        random_frames=random_frames,
    )


def obs_td(b, mask=None):
    td = TensorDict({"observation": torch.zeros(b, 3)}, batch_size=[b])
    if mask is not None:
        td["action_mask"] = mask
    return td


def test_linear_schedule_is_closed_form_on_device_counter():
    s = LinearSchedule(1.0, 0.1, 100)
    steps = torch.tensor([0, 50, 100, 1000])
    assert torch.allclose(s(steps), torch.tensor([1.0, 0.55, 0.1, 0.1]))
    assert torch.allclose(LinearSchedule(1.0, 0.2, 0)(steps), torch.full((4,), 0.2))


def test_greedy_when_not_exploring_and_counter_untouched():
    policy = discrete_policy(eps=1.0)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        a = policy(obs_td(64))["action"]
    assert (a == 3).all() and policy.step == 0


def test_epsilon_greedy_flips_a_coin_per_env():
    torch.manual_seed(0)
    policy = discrete_policy(eps=0.3)
    a = policy(obs_td(20000))["action"]
    non_greedy = (a != 3).float().mean()
    # random actions hit the greedy one 1/4 of the time: P(non-greedy) = 0.3 * 3/4
    assert abs(non_greedy - 0.225) < 0.015
    assert policy.step == 20000


def test_random_actions_are_uniform_over_legal_actions_only():
    torch.manual_seed(0)
    mask = torch.tensor([[True, False, True, False]]).expand(30000, 4)
    policy = discrete_policy(eps=1.0, mask_key="action_mask")
    a = policy(obs_td(30000, mask))["action"]
    counts = torch.bincount(a, minlength=4).float() / 30000
    assert counts[1] == 0 and counts[3] == 0
    assert abs(counts[0] - 0.5) < 0.02 and abs(counts[2] - 0.5) < 0.02
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert (policy(obs_td(8, mask[:8]))["action"] == 2).all()  # masked greedy


def test_uniform_legal_action_per_row_masks():
    mask = torch.eye(5, dtype=torch.bool)
    assert torch.equal(uniform_legal_action(mask), torch.arange(5))


def test_random_frames_force_exploration_then_schedule_takes_over():
    policy = discrete_policy(eps=0.0, random_frames=1000)
    first = policy(obs_td(1000))["action"]
    assert (first != 3).any()
    later = policy(obs_td(1000))["action"]
    assert (later == 3).all()


def continuous_policy(actor, **kw):
    spec = Bounded(torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0]), shape=(2,))
    return PolicyWrapper(actor, spec, **kw)


def test_continuous_bounds_scale_and_unscale():
    policy = continuous_policy(DeterministicActor(FlatEncoder((3,)), 2, (8,)))
    a = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
    scaled = policy.scale(a)
    assert torch.allclose(scaled, torch.tensor([[-2.0, 0.0], [2.0, 1.0], [0.0, 0.5]]))
    assert torch.allclose(policy.unscale(scaled), a)
    assert policy.low.device == policy.step.device  # bounds live as buffers


@pytest.mark.parametrize("noise", ["gaussian", "ou"])
def test_deterministic_actor_noise_only_while_exploring(noise):
    torch.manual_seed(0)
    actor = DeterministicActor(FlatEncoder((3,)), 2, (8,))
    policy = continuous_policy(actor, noise=noise, noise_scale=LinearSchedule(0.5, 0.5, 0))
    td = obs_td(256)
    greedy = policy.scale(actor(td["observation"]))
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert torch.allclose(policy(td.clone())["action"], greedy)
    for _ in range(3):
        noisy = policy(td.clone())["action"]
    assert not torch.allclose(noisy, greedy)
    assert (noisy >= policy.low).all() and (noisy <= policy.high).all()


def test_unknown_noise_is_a_config_error():
    with pytest.raises(ConfigError, match="noise"):
        continuous_policy(DeterministicActor(FlatEncoder((3,)), 2, (8,)), noise="pink")


def test_tanh_gaussian_log_prob_matches_torch_distributions():
    torch.manual_seed(0)
    actor = TanhGaussianActor(FlatEncoder((3,)), 2, (16,))
    obs = torch.randn(512, 3)
    torch.manual_seed(1)
    action, logp = actor.sample(obs)
    mean, log_std = actor._mean_log_std(obs)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(cache_size=1)],
    )
    ref = dist.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    ok = action.abs().max(-1).values < 0.999  # atanh is ill-conditioned at the edges
    assert torch.allclose(logp[ok], ref[ok], atol=1e-3)
    assert torch.allclose(actor(obs), torch.tanh(mean))


def test_dueling_q_network_mean_advantage_is_value():
    torch.manual_seed(0)
    q = QNetwork(FlatEncoder((4,)), 3, (16,), dueling=True)
    obs = torch.randn(10, 4)
    values = q(obs)
    x = q.trunk(q.encoder(obs))
    assert values.shape == (10, 3)
    assert torch.allclose(values.mean(-1), q.value(x).squeeze(-1), atol=1e-6)


def test_cnn_encoder_takes_uint8_frames_with_extra_batch_dims():
    enc = CNNEncoder((4, 72, 80), scale=3.0)
    frames = torch.randint(0, 4, (2, 5, 4, 72, 80), dtype=torch.uint8)
    assert enc(frames).shape == (2, 5, 512)
    assert math.isfinite(enc(frames).sum().item())
