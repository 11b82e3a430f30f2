"""IQN (agents/iqn.py): the quantile Huber loss by hand, the greedy-by-mean target under
an action mask, deterministic greedy evaluation (risk-neutral and CVaR), and a hot path
with no host reads."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.agents.iqn import QuantileNetwork, iqn_target, quantile_huber_loss
from gpurl.train import build, load_config

from .conftest import assert_iterations_read_nothing


def test_quantile_huber_loss_by_hand():
    pred = torch.tensor([[0.0, 2.0]])  # quantiles at taus 0.25 and 0.75
    taus = torch.tensor([[0.25, 0.75]])
    target = torch.tensor([[0.5, 3.0]])
    # u_ij = target_j - pred_i: [[0.5, 3.0], [-1.5, 1.0]]
    # huber (kappa 1): [[0.125, 2.5], [1.0, 0.5]]
    # weights |tau_i - 1{u < 0}|: [[0.25, 0.25], [0.25, 0.75]]
    # rho: [[0.03125, 0.625], [0.25, 0.375]]; mean over j, sum over i: 0.328125 + 0.3125
    loss = quantile_huber_loss(pred, target, taus, kappa=1.0)
    assert loss.item() == pytest.approx(0.640625)
    # kappa 2: huber [[0.125, 4.0], [1.125, 0.5]] / 2 -> rho [[0.015625, 0.5], [0.140625, 0.1875]]
    loss2 = quantile_huber_loss(pred, target, taus, kappa=2.0)
    assert loss2.item() == pytest.approx((0.015625 + 0.5) / 2 + (0.140625 + 0.1875) / 2)


def test_target_is_greedy_by_the_mean_among_legal_actions():
    # two next states, N' = 2 quantiles, 3 actions; per-action means: [2, 3, 1], [1, 1, 1]
    z_next = torch.tensor(
        [
            [[0.0, 6.0, 1.0], [4.0, 0.0, 1.0]],  # action 1 has the best mean but a low quantile
            [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        ]
    )
    reward, discount = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.0])
    t = iqn_target(z_next, reward, discount)
    # s'0: a* = 1 (mean 3, not the per-quantile max 6 / 4): 1 + 0.5 * [6, 0]
    torch.testing.assert_close(t, torch.tensor([[4.0, 1.0], [2.0, 2.0]]))
    mask = torch.tensor([[True, False, True], [False, False, False]])
    t = iqn_target(z_next, reward, torch.tensor([0.5, 0.5]), mask)
    # s'0: action 1 illegal -> a* = 0 (mean 2): 1 + 0.5 * [0, 4]; s'1: no legal action -> 0
    torch.testing.assert_close(t, torch.tensor([[1.0, 3.0], [2.0, 2.0]]))


def test_quantile_loss_gradient_moves_each_quantile_toward_its_fraction():
    """Minimising the loss over many targets puts quantile tau at the tau-quantile."""
    torch.manual_seed(0)
    target = torch.randn(1, 4000)  # N(0, 1) samples
    taus = torch.tensor([[0.1, 0.5, 0.9]])
    pred = torch.zeros(1, 3, requires_grad=True)
    opt = torch.optim.SGD([pred], lr=0.5)
    for _ in range(400):
        opt.zero_grad()
        quantile_huber_loss(pred, target, taus, kappa=0.01).sum().backward()
        opt.step()
    expected = torch.quantile(target, taus[0], dim=1).squeeze()
    torch.testing.assert_close(pred.detach()[0], expected, atol=0.05, rtol=0)


def small(tmp_path, overrides):
    cfg = load_config(
        [
            "agent=iqn",
            *overrides,
            "device=cpu",
            "env.num_envs=4",
            "agent.hidden=[32,32]",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=16",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    return build(cfg, tmp_path)


@pytest.mark.parametrize(
    "overrides",
    [["env=cartpole", "env.eval_envs=2"], ["env=marinenav", "env.max_episode_steps=20"]],
    ids=["cartpole", "marinenav"],
)
def test_iqn_training_iterations_read_nothing_on_the_host(tmp_path, overrides):
    assert_iterations_read_nothing(small(tmp_path, overrides))


def test_iqn_greedy_action_is_deterministic(tmp_path):
    tr = small(tmp_path, ["env=marinenav", "env.max_episode_steps=20"])
    td = tr.env.lean_reset()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        a = tr.agent.policy(td.clone())["agents", "action"]
        b = tr.agent.policy(td.clone())["agents", "action"]
    assert torch.equal(a, b)
    q = tr.agent.z(td)
    assert q.shape[-1] == 25 and torch.isfinite(q).all()


class TwoActionQuantiles(QuantileNetwork):
    """Z_tau(s, 0) = 1 (certain), Z_tau(s, 1) = 4 tau - 0.5 (mean 1.5, a long lower tail)."""

    def __init__(self, eval_cvar: float):
        super().__init__(Feature(), 2, hidden=(), act_quantiles=4, eval_cvar=eval_cvar)
        self.seen = None

    def quantiles(self, feature, taus, shared=False):
        assert shared  # acting: one set of fractions for every row (of its one run)
        taus = self.seen = taus[0]
        z = torch.stack((torch.ones_like(taus), 4 * taus - 0.5), -1)
        return z.expand(*feature.shape[:-1], *z.shape)


class Feature(torch.nn.Module):
    out_features = 1

    def forward(self, obs):
        return torch.ones(*obs.batch_size, 1)


def test_eval_cvar_picks_the_risk_averse_action_in_greedy_evaluation():
    obs = TensorDict({}, batch_size=[3])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        neutral = TwoActionQuantiles(eval_cvar=1.0)
        q = neutral(obs)
        torch.testing.assert_close(neutral.seen, torch.tensor([0.125, 0.375, 0.625, 0.875]))
        # means over the midpoints: 1 and 4 * 0.5 - 0.5 = 1.5: the risky action wins
        torch.testing.assert_close(q, torch.tensor([[1.0, 1.5]] * 3))
        averse = TwoActionQuantiles(eval_cvar=0.25)
        q = averse(obs)
        # midpoints of (0, 0.25): mean tau 0.125, so action 1 is worth 0: the certain one wins
        torch.testing.assert_close(averse.seen, torch.tensor([1, 3, 5, 7]) / 32)
        torch.testing.assert_close(q, torch.tensor([[1.0, 0.0]] * 3))
    # collection (exploration on) samples fractions over all of (0, 1) whatever eval_cvar
    torch.manual_seed(0)
    with set_exploration_type(ExplorationType.RANDOM):
        averse(TensorDict({}, batch_size=[1]))
    assert averse.seen.max() > 0.25


def test_eval_cvar_reaches_the_network_from_the_config(tmp_path):
    tr = small(tmp_path, ["env=cartpole", "agent.eval_cvar=0.25"])
    assert tr.agent.z.eval_cvar == 0.25
