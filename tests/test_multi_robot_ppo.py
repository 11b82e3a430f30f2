"""PPO on multi-robot envs (agents/ppo.py): IPPO (agent.critic=local) and MAPPO
(agent.critic=central). Per-robot GAE with stopped robots masked, the masked
normalisation and losses, and the central critic's input, on numbers worked by hand;
then both train a few iterations on MarineNav (discrete and continuous) and VMAS."""

import importlib.util
import math

import pytest
import torch
from tensordict import TensorDict

from gpurl.agents.ppo import masked_mean, normalize_advantage, ppo_policy_loss, ppo_value_loss
from gpurl.core.returns import gae
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError
from gpurl.policies import VALUE, CentralEncoder, central_input
from gpurl.train import build, load_config
from gpurl.utils.host_reads import count_host_reads

requires_vmas = pytest.mark.skipif(
    importlib.util.find_spec("vmas") is None, reason="needs the vmas extra"
)

F, T_ = False, True

# A rollout [T=4, N=1, R=2], gamma = lambda = 0.5 (trace 0.25), by robot (rows are t):
#   robot 0 runs all 4 steps; its env is truncated at t=2 (done, not terminated: it
#   bootstraps from V of its final state, 6.0, not of the reset one) and restarts at t=3.
#   robot 1 terminates at t=1 (it stopped: collision or arrival), is not running at t=2
#   (its value 9.0, reward 7.0 and next value 8.0 there are garbage that must not
#   leak), and runs again in the new episode at t=3.
VALUES = [[1.0, 0.5], [2.0, 1.0], [3.0, 9.0], [4.0, 2.0]]
REWARDS = [[1.0, 0.0], [0.0, 4.0], [2.0, 7.0], [1.0, 1.0]]
NEXT_VALUES = [[2.0, 1.0], [3.0, 5.0], [6.0, 8.0], [2.0, 4.0]]
TERMINATED = [[F, F], [F, T_], [F, F], [F, F]]
DONE = [[F, F], [F, T_], [T_, F], [F, F]]
VALID = [[T_, T_], [T_, T_], [T_, F], [T_, T_]]
# delta_t = r_t + 0.5 V'_t (1 - terminated_t) - V_t, 0 where the robot is not running
#   robot 0: 1 + 1 - 1 = 1.0 | 0 + 1.5 - 2 = -0.5 | 2 + 3 - 3 = 2.0 | 1 + 1 - 4 = -2.0
#   robot 1: 0 + 0.5 - 0.5 = 0.0 | 4 + 0 - 1 = 3.0 | (not running) 0 | 1 + 2 - 2 = 1.0
# A_t = delta_t + 0.25 (1 - done_t) A_t+1, no trace through a step not running:
#   robot 0: A_3 = -2.0; A_2 = 2.0 (done); A_1 = -0.5 + 0.25 * 2.0 = 0.0; A_0 = 1.0
#   robot 1: A_3 = 1.0; A_2 = 0.0; A_1 = 3.0 (done); A_0 = 0.0 + 0.25 * 3.0 = 0.75
ADVANTAGES = [[1.0, 0.75], [0.0, 3.0], [2.0, 0.0], [-2.0, 1.0]]
# returns A + V (robot 1 at t=2: its own value, so its value loss would be 0 anyway)
RETURNS = [[2.0, 1.25], [2.0, 4.0], [5.0, 9.0], [2.0, 3.0]]


def robots(rows, dtype=torch.float32) -> torch.Tensor:
    """[T][R] -> [T, N=1, R]"""
    return torch.tensor(rows, dtype=dtype).unsqueeze(1)


def test_per_robot_gae_masks_a_stopped_robot_and_bootstraps_a_truncation_by_hand():
    rollout = (
        robots(REWARDS),
        robots(VALUES),
        robots(NEXT_VALUES),
        robots(TERMINATED, torch.bool),
        robots(DONE, torch.bool),
    )
    advantage, returns = gae(*rollout, gamma=0.5, lam=0.5, valid=robots(VALID, torch.bool))
    torch.testing.assert_close(advantage, robots(ADVANTAGES))
    torch.testing.assert_close(returns, robots(RETURNS))
    # without the mask the stopped robot's garbage step gets an advantage of its own:
    # 7 + 0.5 * 8 - 9 + 0.25 * 1.0 = 2.25
    unmasked, _ = gae(*rollout, gamma=0.5, lam=0.5)
    assert unmasked[2, 0, 1].item() == pytest.approx(2.25)


def test_the_mask_cuts_the_trace_where_no_done_flag_does():
    """A slot that is not running and carries no done flag (an empty slot filled at the
    next step): the running step before it takes nothing from the steps after it."""
    ones = torch.ones(3, 1)
    false = torch.zeros(3, 1, dtype=torch.bool)
    valid = torch.tensor([[True], [False], [True]])
    advantage, _ = gae(ones, 0 * ones, 0 * ones, false, false, 1.0, 1.0, valid=valid)
    # delta = 1 at the running steps; A_2 = 1, A_1 = 0 (not running), A_0 = 1 + A_1 = 1
    assert advantage.squeeze(-1).tolist() == [1.0, 0.0, 1.0]


def test_normalisation_and_losses_count_the_running_robots_only():
    adv = torch.tensor([[1.0, 100.0], [2.0, 3.0], [6.0, -50.0]])
    valid = torch.tensor([[True, False], [True, True], [True, False]])
    out = normalize_advantage(adv.clone(), valid=valid)
    # running: 1, 2, 3, 6: mean 3, unbiased std sqrt((4 + 1 + 0 + 9) / 3)
    std = math.sqrt(14 / 3)
    for i, j, a in [(0, 0, 1.0), (1, 0, 2.0), (1, 1, 3.0), (2, 0, 6.0)]:
        assert out[i, j].item() == pytest.approx((a - 3) / std, abs=1e-6)
    assert out[0, 1].item() == pytest.approx((100 - 3) / std, abs=1e-5)  # left, weight 0

    weight = valid.float()
    ratio = torch.tensor([[1.0, 1e6], [1.0, 1.0], [1.0, 1e6]], requires_grad=True)
    loss = ppo_policy_loss(ratio, torch.tensor([[2.0, 9.0], [4.0, 6.0], [0.0, 9.0]]), 0.2, weight)
    assert loss.item() == pytest.approx(-(2.0 + 4.0 + 6.0 + 0.0) / 4)
    loss.backward()
    assert ratio.grad[0, 1].item() == 0.0 and ratio.grad[2, 1].item() == 0.0
    value = torch.tensor([[1.0, 50.0], [2.0, 0.0], [0.0, 50.0]])
    target = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    # 0.5 * (1 + 4 + 1 + 0) / 4
    assert ppo_value_loss(value, value, target, None, weight).item() == pytest.approx(0.75)
    assert masked_mean(torch.ones(2), torch.zeros(2)).item() == 0.0  # nothing running


def two_robot_info() -> EnvInfo:
    """Two robots, each observing a vector [2] (scales 2 and 10) and a list of 2 object
    slots [2, 2] with a slot mask."""
    own, objects = ("agents", "own"), ("agents", "objects")
    return EnvInfo(
        obs_keys=(own, objects),
        obs_shapes={own: torch.Size([2]), objects: torch.Size([2, 2])},
        obs_specs={},
        action_key=("agents", "action"),
        action_spec=None,
        reward_key=("agents", "reward"),
        terminated_key=("agents", "terminated"),
        truncated_key=("agents", "truncated"),
        done_key=("agents", "done"),
        batch_shape=torch.Size([1]),
        group_shape=torch.Size([2]),
        slot_masks={objects: ("agents", "objects_mask")},
        obs_scales={own: (2.0, 10.0)},
    )


def test_central_critic_input_by_hand():
    obs = TensorDict(
        {
            "agents": TensorDict(
                {
                    "own": torch.tensor([[[2.0, 10.0], [4.0, -20.0]]]),
                    "objects": torch.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]]),
                    "objects_mask": torch.tensor([[[True, False], [True, True]]]),
                },
                batch_size=[1, 2],
            )
        },
        batch_size=[1],
    )
    encoder = CentralEncoder(two_robot_info())
    # x_j = own / (2, 10), objects with empty slots zeroed, the slot mask
    x0 = [1.0, 1.0, 1.0, 2.0, 0.0, 0.0, 1.0, 0.0]
    x1 = [2.0, -2.0, 5.0, 6.0, 7.0, 8.0, 1.0, 1.0]
    expected = torch.tensor([[x0 + x1 + [1.0, 0.0], x0 + x1 + [0.0, 1.0]]])
    assert encoder.out_features == 18
    torch.testing.assert_close(encoder(obs), expected)
    torch.testing.assert_close(
        central_input(torch.tensor([[3.0], [5.0]])),
        torch.tensor([[3.0, 5.0, 1.0, 0.0], [3.0, 5.0, 0.0, 1.0]]),
    )


TWO_ROBOTS = [
    "env=marinenav",
    "env.max_robots=2",
    "env.curriculum=[{from_step:0,robots:2,obstacles:0,min_start_goal_dis:30}]",
    "env.eval_envs=10",
]


def test_ppo_targets_on_marinenav_read_the_running_mask_and_the_robots_flags(tmp_path):
    """PPOAgent.compute_targets, the code the trainer runs, on the hand rollout above laid
    out under MarineNav's keys."""
    cfg = load_config(
        [
            *TWO_ROBOTS,
            "agent=ppo",
            "agent.gamma=0.5",
            "agent.gae_lambda=0.5",
            "agent.normalize_advantage=false",
            "logger=none",
        ]
    )
    agent = build(cfg, tmp_path).agent
    agent.value = lambda obs: robots(NEXT_VALUES)  # V of each step's next observation
    flag = lambda rows: robots(rows, torch.bool).unsqueeze(-1)  # noqa: E731
    truncated = [[F, F], [F, F], [T_, F], [F, F]]
    group = {
        "reward": robots(REWARDS).unsqueeze(-1),
        "terminated": flag(TERMINATED),
        "truncated": flag(truncated),
        "done": flag(DONE),
    }
    rollout = TensorDict(
        {
            VALUE: robots(VALUES),
            "agents": TensorDict({"running": robots(VALID, torch.bool)}, batch_size=[4, 1, 2]),
            "next": TensorDict(
                {"agents": TensorDict(group, batch_size=[4, 1, 2])}, batch_size=[4, 1]
            ),
        },
        batch_size=[4, 1],
    )
    out = agent.compute_targets(rollout, last_obs=None)
    torch.testing.assert_close(out["advantage"], robots(ADVANTAGES))
    torch.testing.assert_close(out["value_target"], robots(RETURNS))
    torch.testing.assert_close(out["valid"], robots(VALID))
    agent.normalize_advantage = True  # over the 7 running robot-steps
    out = agent.compute_targets(rollout, last_obs=None)
    running = [a for a, v in zip(sum(ADVANTAGES, []), sum(VALID, []), strict=True) if v]
    mean = sum(running) / 7
    std = math.sqrt(sum((a - mean) ** 2 for a in running) / 6)
    expected = (robots(ADVANTAGES) - mean) / std
    valid = robots(VALID, torch.bool)
    torch.testing.assert_close(out["advantage"][valid], expected[valid])


def test_central_critic_on_marinenav_sees_every_robot(tmp_path):
    cfg = load_config([*TWO_ROBOTS, "agent=ppo", "agent.critic=central", "logger=none"])
    trainer = build(cfg, tmp_path)
    critic = trainer.agent.critic.encoder
    assert isinstance(critic, CentralEncoder)
    # per robot: self_state 7 + objects 5 x 5 + their mask 5; 2 robots and their index
    assert critic.out_features == 2 * 37 + 2
    obs = trainer.env.lean_reset()
    x = critic(obs)  # [num_envs, 2, 76]
    own = obs.get(("agents", "self_state"))[:, 1] / torch.tensor(
        [20.0, 20.0, 3.0, 3.0, 1.0, 1000.0, 1000.0]
    )
    torch.testing.assert_close(x[:, 0, 37:44], own)  # robot 1's block, seen by robot 0
    torch.testing.assert_close(x[:, 0, :74], x[:, 1, :74])
    assert x[:, :, 74:].tolist() == [[[1.0, 0.0], [0.0, 1.0]]] * x.shape[0]


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["env=cartpole", "agent.critic=central"], "needs a multi-robot env"),
        (["env=marinenav", "agent.critic=central", "agent.shared_encoder=true"], "shared_encoder"),
    ],
)
def test_central_critic_mistakes_are_one_line(tmp_path, overrides, fragment):
    cfg = load_config(["agent=ppo", *overrides, "logger=none", "trainer.progress=false"])
    with pytest.raises(ConfigError, match=fragment) as err:
        build(cfg, tmp_path)
    assert "\n" not in str(err.value)


def small(tmp_path, overrides):
    """4 envs x 8 steps per rollout, 32-wide networks, 2 epochs of 2 minibatches, 4
    rollouts in all."""
    cfg = load_config(
        [
            *overrides,
            "env.num_envs=4",
            "agent.hidden=[32,32]",
            "trainer.rollout_steps=8",
            "agent.epochs=2",
            "agent.minibatches=2",
            "trainer.total_frames=128",
            "trainer.eval_interval=128",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    return build(cfg, tmp_path)


MARINENAV = ["env.max_episode_steps=20"]
VMAS = ["env=vmas", "+env.n_agents=2", "env.eval_envs=2", "env.max_episode_steps=10"]
CASES = {
    "ippo_marinenav": ["env=marinenav", *MARINENAV],
    "mappo_marinenav": ["env=marinenav", "agent.critic=central", *MARINENAV],
    "ippo_marinenav_continuous": ["env=marinenav_continuous", *MARINENAV],
    "mappo_marinenav_continuous": ["env=marinenav_continuous", "agent.critic=central", *MARINENAV],
    "ippo_vmas": [*VMAS, "env.continuous_actions=false"],
    "mappo_vmas": [*VMAS, "env.continuous_actions=false", "agent.critic=central"],
    "ippo_vmas_continuous": VMAS,
    "mappo_vmas_continuous": [*VMAS, "agent.critic=central"],
}
# the fast suite keeps one env of each family and each critic
FAST = {"ippo_marinenav", "mappo_marinenav_continuous", "mappo_vmas", "ippo_vmas_continuous"}


def case(name):
    marks = [] if name in FAST else [pytest.mark.slow]
    if "vmas" in name:
        marks.append(requires_vmas)
    return pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", [case(c) for c in CASES])
def test_ippo_and_mappo_train_a_few_iterations(tmp_path, name):
    trainer = small(tmp_path, ["agent=ppo", *CASES[name]])
    before = [p.detach().clone() for _, p in trainer.agent.parameters()]
    robots_ = trainer.info.group_shape[0]
    for _ in range(3):
        trainer.iteration()
    assert trainer.frames == 3 * 8 * 4
    assert trainer.progress.update_count == 3 * 2 * 2
    # per-robot targets, and minibatches of (step, env) samples carrying their robots
    assert trainer.targets["advantage"].shape == (8, 4, robots_)
    assert trainer._minibatch["advantage"].shape == (16, robots_)
    metrics = trainer.metrics.read()
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    after = [p.detach() for _, p in trainer.agent.parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    summary = trainer.train()  # one more rollout to total_frames, and an evaluation
    assert summary["frames"] == 128 and len(summary["eval_history"]) == 1


@requires_vmas
def test_mappo_host_reads_on_vmas_are_vmas_and_torchrl_alone(tmp_path):
    """VMAS's step and TorchRL's step_and_maybe_reset read the host (tests/envs/test_vmas.py);
    the PPO part of the iteration (policy, targets, minibatches, updates) adds none."""
    trainer = small(tmp_path, ["agent=ppo", *CASES["mappo_vmas"]])
    trainer.iteration()
    with count_host_reads() as reads:
        trainer.iteration()
    sites = [site.split(" at ")[1] for site in reads.sites]
    assert [s for s in sites if "/vmas/" in s or "/torchrl/" in s] == sites, reads.report()


@pytest.mark.slow
@requires_vmas
@pytest.mark.parametrize("experiment", ["vmas_navigation_ippo", "vmas_navigation_mappo"])
def test_ippo_and_mappo_learn_vmas_navigation(tmp_path, experiment):
    """The preset's first 38,400 frames (a quarter of its budget, about a minute): the
    greedy return of the two agents must be >= 1.0, where uniform random moves score
    -0.65 and the scripted controller 2.00 (docs/RESULTS.md, VMAS navigation)."""
    cfg = load_config(
        [
            f"experiment={experiment}",
            "trainer.total_frames=38400",
            "trainer.eval_interval=12800",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    summary = build(cfg, tmp_path).train()
    assert summary["frames"] == 38400
    assert summary["eval_return"] >= 1.0, summary["eval_history"]
