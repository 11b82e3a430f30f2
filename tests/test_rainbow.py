"""Rainbow (agents/rainbow.py): the categorical projection by hand (between atoms, on an
atom, terminal transitions, the support's edges), the Double-Q target, the dueling C51
head, noise per update, bad supports, and the replay it declares."""

import pytest
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.agents.rainbow import categorical_projection, rainbow_target
from gpurl.errors import ConfigError
from gpurl.policies.noisy import NoisyLinear

from .conftest import small_trainer

SUPPORT = torch.tensor([-1.0, 0.0, 1.0])  # 3 atoms, spacing 1


def project(probs, reward, discount):
    return categorical_projection(
        torch.tensor([probs]), torch.tensor([reward]), torch.tensor([discount]), SUPPORT
    )[0]


def test_projection_between_atoms_by_hand():
    # r + 0.5 z = [0, 0.5, 1]: atom 0 -> 0 (all to atom 1), atom 1 -> 0.5 (half to 1, half
    # to 2), atom 2 -> 1 (all to atom 2): [0, 0.2 + 0.15, 0.15 + 0.5]
    torch.testing.assert_close(project([0.2, 0.3, 0.5], 0.5, 0.5), torch.tensor([0.0, 0.35, 0.65]))


def test_projection_of_a_terminal_transition_puts_all_mass_at_the_reward():
    # discount 0: every atom maps to r = 0.25, a quarter of the way from atom 1 to atom 2
    torch.testing.assert_close(project([0.2, 0.3, 0.5], 0.25, 0.0), torch.tensor([0.0, 0.75, 0.25]))
    # r exactly on an atom: all of it there (no mass lost where floor == ceil)
    torch.testing.assert_close(project([0.2, 0.3, 0.5], -1.0, 0.0), torch.tensor([1.0, 0.0, 0.0]))


def test_projection_clips_to_the_edge_atoms():
    torch.testing.assert_close(project([0.2, 0.3, 0.5], 5.0, 0.9), torch.tensor([0.0, 0.0, 1.0]))
    torch.testing.assert_close(project([0.2, 0.3, 0.5], -5.0, 0.9), torch.tensor([1.0, 0.0, 0.0]))
    # r + z = [0, 1, 2]: the top atom's mass lands beyond v_max and is clipped onto it
    torch.testing.assert_close(project([0.2, 0.3, 0.5], 1.0, 1.0), torch.tensor([0.0, 0.2, 0.8]))


def test_projection_keeps_the_mass_and_the_mean_inside_the_support():
    g = torch.Generator().manual_seed(0)
    support = torch.linspace(-10, 10, 51)
    probs = torch.rand(256, 51, generator=g).softmax(-1)
    reward = torch.randn(256, generator=g)
    discount = 0.5 * torch.rand(256, generator=g)  # |r + discount z| < 10: no clipping
    target = categorical_projection(probs, reward, discount, support)
    torch.testing.assert_close(target.sum(-1), torch.ones(256))
    # the projection keeps the mean r + discount E[z]
    expected = reward + discount * (probs * support).sum(-1)
    torch.testing.assert_close((target * support).sum(-1), expected, atol=1e-4, rtol=0)


def test_double_q_target_takes_the_online_choice_and_the_targets_distribution():
    q_online = torch.tensor([[0.0, 1.0], [5.0, 0.0]])  # online picks action 1, then action 0
    big = 20.0  # logits: one-hot distributions
    logits = torch.tensor(
        [
            [[big, 0.0, 0.0], [0.0, 0.0, big]],  # action 0 -> atom -1, action 1 -> atom 1
            [[0.0, big, 0.0], [big, 0.0, 0.0]],  # action 0 -> atom 0, action 1 -> atom -1
        ]
    )
    target = rainbow_target(q_online, logits, torch.zeros(2), torch.ones(2), SUPPORT)
    torch.testing.assert_close(
        target, torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), atol=1e-6, rtol=0
    )
    # an action mask that forbids the online choice moves a*; no legal action bootstraps 0
    mask = torch.tensor([[True, False], [False, False]])
    target = rainbow_target(
        q_online, logits, torch.tensor([0.0, 1.0]), torch.ones(2), SUPPORT, mask
    )
    torch.testing.assert_close(
        target, torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), atol=1e-6, rtol=0
    )


def small(tmp_path, overrides=()):
    return small_trainer(
        tmp_path, ["env=marinenav", "agent=rainbow", "env.max_episode_steps=20", *overrides]
    )


def test_rainbow_preset_replay_is_prioritized_three_step(tmp_path):
    spec = small(tmp_path).buffer.spec
    assert spec.prioritized and spec.n_step == 3 and spec.alpha == 0.5  # host reads: see
    # tests/test_host_reads_training.py (case rainbow_marinenav)


def test_rainbow_head_is_a_distribution_and_greedy_acting_uses_no_noise(tmp_path):
    tr = small(tmp_path)
    q = tr.agent.q
    td = tr.env.lean_reset()
    logits = q.logits(td)
    assert logits.shape[-2:] == (25, 51)
    torch.testing.assert_close(q(td), (logits.softmax(-1) * q.support).sum(-1))
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        a = q(td)
        for m in q.modules():
            if isinstance(m, NoisyLinear):
                m.resample()
        torch.testing.assert_close(q(td), a)  # means only: new noise changes nothing


def test_rainbow_resamples_noise_each_update_and_learns_a_fixed_batch(tmp_path):
    tr = small(tmp_path)
    for _ in range(4):
        tr.iteration()
    noisy = next(m for m in tr.agent.q.modules() if isinstance(m, NoisyLinear))
    batch = tr.buffer.sample(tr.progress)
    losses = []
    for _ in range(30):
        before = noisy.eps_out.clone()
        out = tr.agent.update(batch.clone(), tr.progress)
        assert not torch.equal(before, noisy.eps_out)
        assert (out["priority"] >= 0).all() and torch.isfinite(out["priority"]).all()
        losses.append(float(out["loss"]))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "overrides",
    [["agent.atoms=1"], ["agent.v_min=5", "agent.v_max=5"]],
    ids=["one_atom", "empty_support"],
)
def test_bad_support_is_a_config_error(tmp_path, overrides):
    with pytest.raises(ConfigError, match="v_min"):
        small(tmp_path, overrides)


def test_rainbow_refuses_continuous_actions(tmp_path):
    with pytest.raises(ConfigError, match="discrete"):
        small(tmp_path, ["env=marinenav_continuous"])


def test_projection_is_fp32_for_bf16_probabilities():
    # under compile.amp the softmax before the projection can come out bf16
    probs = torch.tensor([[0.25, 0.25, 0.5, 0.0, 0.0]] * 2, dtype=torch.bfloat16)  # exact
    target = categorical_projection(probs, torch.zeros(2), torch.ones(2), torch.linspace(-2, 2, 5))
    assert target.dtype == torch.float32
    torch.testing.assert_close(target.sum(-1), torch.ones(2))


def test_rainbow_updates_under_amp(tmp_path):
    tr = small(tmp_path, ["compile.amp=true"])
    for _ in range(4):
        tr.iteration()
    assert tr.progress.update_count > 0
    out = tr.agent.update(tr.buffer.sample(tr.progress), tr.progress)
    assert torch.isfinite(out["loss"]) and out["priority"].dtype == torch.float32
