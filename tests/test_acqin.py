"""AC-IQN (agents/acqin.py): the actor climbs the critic's mean over quantiles (a toy
critic by hand), the atan squash keeps actions inside (-1, 1), and the hot path makes no
host reads on Pendulum and on the continuous MarineNav."""

import math

import pytest
import torch
from tensordict import TensorDict

from gpurl.policies import DeterministicActor
from gpurl.train import build, load_config

from .conftest import assert_iterations_read_nothing


class Const(torch.nn.Module):
    out_features = 1

    def forward(self, obs):
        return torch.ones(*obs.batch_size, 1)


def test_actor_gradient_climbs_a_toy_critic():
    """Critic Z_tau(s, a) = tau * (a0 - a1): its mean over quantiles rises with a0 and
    falls with a1, so the actor loss -mean Z pushes mu_0 up and mu_1 down."""
    actor = DeterministicActor(Const(), 2, hidden=(), squash="atan")
    with torch.no_grad():
        actor.net[0].weight.zero_()
        actor.net[0].bias.zero_()
    obs = TensorDict({}, batch_size=[4])
    taus = torch.rand(4, 8)
    mu = actor(obs)
    z = taus * (mu[:, :1] - mu[:, 1:])
    (-z.mean(-1).mean()).backward()
    grad = actor.net[0].bias.grad
    # d(-mean Z)/d bias = -mean(tau) * (2/pi) / (1 + 0) * [1, -1]
    expected = -taus.mean() * (2 / math.pi) * torch.tensor([1.0, -1.0])
    torch.testing.assert_close(grad, expected)
    assert grad[0] < 0 < grad[1]  # descent raises mu_0 and lowers mu_1


def test_atan_squash_stays_inside_the_box():
    actor = DeterministicActor(Const(), 2, hidden=(), squash="atan")
    with torch.no_grad():
        actor.net[0].bias.fill_(1e6)
    a = actor(TensorDict({}, batch_size=[1]))
    assert (a.abs() < 1).all() and (a > 0.99).all()


@pytest.mark.parametrize(
    "overrides",
    [
        ["env=pendulum", "env.eval_envs=2"],
        ["env=marinenav_continuous", "env.max_episode_steps=20"],
    ],
    ids=["pendulum", "marinenav"],
)
def test_acqin_training_iterations_read_nothing_on_the_host(tmp_path, overrides):
    cfg = load_config(
        [
            "agent=acqin",
            *overrides,
            "device=cpu",
            "env.num_envs=4",
            "agent.hidden=[32]",
            "agent.critic_width=32",
            "agent.critic_hidden=[32]",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=16",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    assert_iterations_read_nothing(build(cfg, tmp_path))


class SpreadCritic(torch.nn.Module):
    """Z_tau(s, a) = (tau - 0.5) a_0: pushing a_0 up widens the return's spread around 0,
    so the mean is indifferent to a_0 and any lower tail (alpha <= 0.5) falls with it."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.taus = []

    def forward(self, obs, action, taus):
        self.taus.append(taus)
        return (taus - 0.5) * action[..., :1] + self.w * taus


def test_actor_cvar_moves_the_actor_to_the_lower_tail(tmp_path):
    """With agent.actor_cvar = 0.25 the actor's fractions lie in (0, 0.25) (the critic's
    own still span (0, 1)), and its step lowers a_0, the action that widens the spread."""
    cfg = load_config(
        [
            "agent=acqin",
            "env=pendulum",
            "env.eval_envs=2",
            "device=cpu",
            "env.num_envs=4",
            "agent.hidden=[32]",
            "agent.critic_width=32",
            "agent.critic_hidden=[32]",
            "agent.actor_cvar=0.25",
            "agent.quantiles=64",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=16",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    for _ in range(3):
        trainer.iteration()
    agent = trainer.agent
    agent.critic = SpreadCritic()
    batch = trainer.buffer.sample(trainer.progress)
    before = agent.actor(batch)[..., 0].detach()
    agent.learn(batch)
    critic_taus, actor_taus = agent.critic.taus
    assert critic_taus.max() > 0.25 and actor_taus.max() < 0.25 and actor_taus.min() > 0
    assert (agent.actor(batch)[..., 0] < before).float().mean() > 0.9


class FixedActor(torch.nn.Module):
    """mu(s) = a fixed action, for every row."""

    def __init__(self, action):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(action))

    def forward(self, obs):
        return self.a.expand(*obs.batch_size, -1)


class ToyCritic(torch.nn.Module):
    """Z_tau(s, a) = a0 + a1 + spread (tau - 0.5) a0: the mean picks the largest a0 + a1;
    with spread > 0 the lower tail (small tau) punishes a large a0."""

    def __init__(self, spread):
        super().__init__()
        self.encoder = Const()
        self.action = torch.nn.Sequential(torch.nn.Linear(2, 1))  # tells the action size
        self.spread = spread

    def quantiles(self, feature, action, taus, shared=False):
        a0, a1 = action[..., :1], action[..., 1:]
        return (a0 + a1 + self.spread * (taus - 0.5) * a0) * feature[..., :1]


def checked_action(actor, critic, grid, cvar, greedy=True):
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from gpurl.agents.acqin import CriticCheckedActor

    policy = CriticCheckedActor(actor, critic, grid, cvar)
    kind = ExplorationType.DETERMINISTIC if greedy else ExplorationType.RANDOM
    with set_exploration_type(kind), torch.no_grad():
        return policy(TensorDict({}, batch_size=[3]))


def test_critic_checked_actor_picks_by_cvar():
    """Grid {-1, 0, 1}^2 beside the actor's (0.9, 0.9). The mean (cvar 1) of
    a0 + a1 + 8 (tau - 0.5) a0 is a0 + a1: (1, 1) scores 2 > 1.8. CVaR_0.25 has mean tau
    0.125, so the score is a1 - 2 a0: (-1, 1) scores 3, the actor's -0.9."""
    actor, critic = FixedActor([0.9, 0.9]), ToyCritic(spread=8.0)
    mean_pick = checked_action(actor, critic, grid=3, cvar=1.0)
    tail_pick = checked_action(actor, critic, grid=3, cvar=0.25)
    assert mean_pick.shape == (3, 2)
    torch.testing.assert_close(mean_pick, torch.tensor([[1.0, 1.0]] * 3))
    torch.testing.assert_close(tail_pick, torch.tensor([[-1.0, 1.0]] * 3))


def test_critic_checked_actor_keeps_the_actor_when_it_is_best_or_exploring():
    """Grid {-1, 1}^2, critic a0 + a1: (1, 1) beats an actor at (0.5, 0.25), and an actor
    at (1, 1) ties it and, scored first, is the one taken. Collection (not greedy) and
    eval_search 0 act with the actor alone."""
    actor = FixedActor([0.5, 0.25])
    critic = ToyCritic(spread=0.0)
    torch.testing.assert_close(
        checked_action(actor, critic, 2, 1.0), torch.tensor([[1.0, 1.0]] * 3)
    )
    torch.testing.assert_close(
        checked_action(actor, critic, 2, 1.0, greedy=False), torch.tensor([[0.5, 0.25]] * 3)
    )
    torch.testing.assert_close(
        checked_action(actor, critic, 0, 1.0), torch.tensor([[0.5, 0.25]] * 3)
    )
    best = FixedActor([1.0, 1.0])
    torch.testing.assert_close(checked_action(best, critic, 2, 1.0), torch.tensor([[1.0, 1.0]] * 3))


def test_eval_search_leaves_checkpoints_unchanged_and_checks_its_settings(tmp_path):
    from gpurl.errors import ConfigError

    base = [
        "agent=acqin",
        "env=marinenav_continuous",
        "device=cpu",
        "env.num_envs=2",
        "agent.hidden=[16]",
        "agent.critic_width=16",
        "agent.critic_hidden=[16]",
        "logger=none",
        "trainer.progress=false",
    ]
    plain = build(load_config(base), tmp_path / "a").agent
    searched = build(
        load_config([*base, "agent.eval_search=5", "agent.eval_cvar=0.25"]), tmp_path / "b"
    ).agent
    assert searched.search.grid.shape == (25, 2)
    assert plain.state()["modules"].keys() == searched.state()["modules"].keys()
    searched.load_state(plain.state())
    for bad in (["agent.eval_search=1"], ["agent.eval_search=5", "agent.eval_cvar=0"]):
        with pytest.raises(ConfigError, match="agent.eval_"):
            build(load_config([*base, *bad]), tmp_path / "c")
