"""Hand-computed checks of every learning rule the off-policy agents use: targets,
bootstrapping on terminated only, n-step returns per (env, robot) stream through the
replay, TD3's smoothing / clipping / delay, SAC's temperature, Polyak and hard updates.
(n-step and GAE arithmetic: test_returns.py; prioritized sampling: test_priority.py;
the PPO clip: test_on_policy.py.)"""

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from gpurl.agents.base import TargetPairs
from gpurl.agents.dqn import dqn_target
from gpurl.agents.sac import temperature_loss
from gpurl.core.progress import Progress
from gpurl.core.replay import ReplaySpec, weighted_mean
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.info import env_info
from gpurl.envs.marinenav import MarineNavEnv
from gpurl.train import build, load_config
from gpurl.trainers.replay import DeviceReplay

GAMMA = 0.9


def test_dqn_targets_double_plain_and_masked():
    target_next = torch.tensor([[1.0, 5.0, 3.0]])
    online_next = torch.tensor([[4.0, 0.0, 2.0]])
    r, d = torch.tensor([1.0]), torch.tensor([GAMMA])
    # plain: max of the target net, 5; double: the target's value at the online argmax (0)
    assert dqn_target(target_next, online_next, r, d, double=False).item() == pytest.approx(5.5)
    assert dqn_target(target_next, online_next, r, d, double=True).item() == pytest.approx(1.9)
    legal = torch.tensor([[False, True, True]])
    # masked: the online argmax over {1, 2} is 2 -> target value 3; plain max over {1, 2} = 5
    assert dqn_target(target_next, online_next, r, d, True, legal).item() == pytest.approx(3.7)
    assert dqn_target(target_next, online_next, r, d, False, legal).item() == pytest.approx(5.5)
    none = torch.zeros(1, 3, dtype=torch.bool)  # no legal action: bootstrap nothing
    assert dqn_target(target_next, online_next, r, d, True, none).item() == pytest.approx(1.0)


def test_dqn_target_never_bootstraps_terminal_states():
    q = torch.tensor([[7.0, 9.0]])
    assert dqn_target(q, q, torch.tensor([2.0]), torch.tensor([0.0]), True).item() == 2.0


def cartpole_batch(rewards, terminated, truncated, obs=None):
    """A hand-made time-major batch [T, 1] in the collector's layout."""
    T = len(rewards)
    obs = (
        torch.arange(T, dtype=torch.float32)[:, None, None].expand(T, 1, 4) if obs is None else obs
    )
    flag = lambda x: torch.tensor(x)[:, None, None]  # noqa: E731
    done = flag(terminated) | flag(truncated)
    return TensorDict(
        {
            "observation": obs.clone(),
            "action": torch.zeros(T, 1, dtype=torch.long),
            "next": {
                "observation": obs.clone() + 0.5,
                "reward": torch.tensor(rewards, dtype=torch.float32)[:, None, None],
                "terminated": flag(terminated),
                "truncated": flag(truncated),
                "done": done,
            },
        },
        batch_size=[T, 1],
    )


def all_rows(replay, n_rows):
    """Sample until every row has been seen; return {row: (reward, discount, next obs)}."""
    replay.batch_size = 4096
    s = replay.sample()
    out = {}
    for i in range(s.shape[0]):
        row = int(s["index"][i])
        out[row] = (
            float(s["reward"][i]),
            float(s["discount"][i]),
            float(s["next", "observation"][i, 0]),
        )
    assert len(out) == n_rows
    return out


def test_replay_bootstraps_truncated_steps_but_not_terminated_ones():
    info = env_info(CartPoleEnv(num_envs=1))
    replay = DeviceReplay(ReplaySpec(n_step=1, gamma=GAMMA), info, ["observation"], 100, 16, "cpu")
    replay.extend(cartpole_batch([1.0, 2.0, 3.0], [False, True, False], [True, False, False]))
    rows = all_rows(replay, 3)
    assert rows[0] == (1.0, pytest.approx(GAMMA), 0.5)  # truncated: bootstrap from s'
    assert rows[1] == (2.0, 0.0, 1.5)  # terminated: no bootstrap
    assert rows[2] == (3.0, pytest.approx(GAMMA), 2.5)


def test_replay_nstep_stops_at_episode_ends():
    info = env_info(CartPoleEnv(num_envs=1))
    replay = DeviceReplay(ReplaySpec(n_step=3, gamma=GAMMA), info, ["observation"], 100, 16, "cpu")
    # rewards 1, 2, 4, 8; the episode terminates after step 1; step 3 is the newest row
    replay.extend(cartpole_batch([1.0, 2.0, 4.0, 8.0], [False, True, False, False], [False] * 4))
    rows = all_rows(replay, 4)
    assert rows[0] == (pytest.approx(1 + GAMMA * 2), 0.0, 1.5)  # cut at the termination
    assert rows[1] == (2.0, 0.0, 1.5)
    # a new episode: 4 + 0.9 * 8, bootstrapped with gamma^2 from the newest next obs
    assert rows[2] == (pytest.approx(4 + GAMMA * 8), pytest.approx(GAMMA**2), 3.5)
    assert rows[3] == (8.0, pytest.approx(GAMMA), 3.5)


def test_replay_keeps_each_robot_its_own_stream_and_masks_stopped_robots():
    env = MarineNavEnv(num_envs=2, max_episode_steps=50)
    info = env_info(env)
    R = info.group_shape[0]
    T = 3
    # reward of (t, env, robot) = 100 t + 10 env + robot: any mixing shows in the sum
    t, e, r = torch.meshgrid(torch.arange(T), torch.arange(2), torch.arange(R), indexing="ij")
    reward = (100 * t + 10 * e + r).float()[..., None]
    running = torch.ones(T, 2, R, dtype=torch.bool)
    running[:, 1, 4] = False  # an empty slot
    zeros = torch.zeros(T, 2, R, 1, dtype=torch.bool)
    obs = env.lean_reset()
    batch = TensorDict(
        {
            "agents": {
                "self_state": obs["agents", "self_state"]
                .expand(T, *obs["agents", "self_state"].shape)
                .clone(),
                "objects": obs["agents", "objects"]
                .expand(T, *obs["agents", "objects"].shape)
                .clone(),
                "objects_mask": obs["agents", "objects_mask"].expand(T, 2, R, 5).clone(),
                "running": running,
                "action": torch.zeros(T, 2, R, dtype=torch.long),
            },
            "next": {
                "agents": {"reward": reward, "terminated": zeros, "truncated": zeros, "done": zeros}
            },
        },
        batch_size=[T, 2],
    )
    keys = [("agents", "self_state"), ("agents", "objects"), ("agents", "objects_mask")]
    spec = ReplaySpec(n_step=2, gamma=GAMMA, next_obs=False)
    replay = DeviceReplay(spec, info, keys, 1000, 4096, "cpu")
    replay.extend(batch)
    s = replay.sample()
    row, stream = s["index"] // (2 * R), s["index"] % (2 * R)
    env_i, robot = stream // R, stream % R
    first = 100 * row + 10 * env_i + robot
    expected = torch.where(row < T - 1, first + GAMMA * (first + 100), first).float()
    assert torch.allclose(s["reward"], expected)
    empty = (env_i == 1) & (robot == 4)
    assert empty.any() and (s["weight"][empty] == 0).all() and (s["weight"][~empty] == 1).all()
    loss = torch.ones(s.shape[0])
    assert weighted_mean(loss, s).item() == pytest.approx(1.0)  # a mean over valid slots


@pytest.mark.parametrize(
    "overrides, uniform",
    [
        (["agent=dqn"], True),
        (["agent=dqn", "agent.prioritized=true"], False),
        (["env=pendulum", "agent=sac"], True),
        (["env=marinenav", "agent=iqn", "env.num_envs=2"], False),  # stopped robots
    ],
)
def test_uniform_samples_take_the_plain_mean_and_it_is_the_weighted_one(
    tmp_path, overrides, uniform
):
    """Where every weight and valid entry of a sample is 1 (a uniform replay of an env
    whose every slot is a sample) an agent's losses take loss.mean(): the weighted mean's
    value, without its ops. Prioritized replay and masked robots keep the weighted mean."""
    trainer = build(load_config([*overrides, "logger=none", "trainer.progress=false"]), tmp_path)
    agent = trainer.agent
    assert agent.uniform_sample is uniform
    if not uniform:
        return
    while trainer.frames <= int(trainer.cfg.init_random_frames):
        trainer.iteration()
    sample = trainer.buffer.sample(trainer.progress)
    assert (sample["weight"] == 1).all() and (sample["valid"] == 1).all()
    loss = torch.rand(sample.shape[0])
    torch.testing.assert_close(weighted_mean(loss, sample, True), weighted_mean(loss, sample))


def test_td3_target_smoothing_is_clipped_and_kept_in_bounds():
    cfg = load_config(
        [
            "experiment=td3_pendulum",
            "device=cpu",
            "agent.hidden=[8]",
            "agent.target_noise=10",
            "agent.target_noise_clip=0.5",
            "logger=none",
            "env.eval_envs=1",
        ]
    )
    trainer = build(cfg, "/tmp/unused")
    agent = trainer.agent
    for p in agent.actor_target.parameters():
        nn.init.zeros_(p)
    obs = TensorDict(observation=torch.zeros(5000, 3), batch_size=[5000])
    with torch.no_grad():
        a = agent._target_action(obs)  # mu' = tanh(0) = 0, plus noise clipped to +-0.5
    assert a.min() >= -0.5 and a.max() <= 0.5
    assert (a == 0.5).float().mean() > 0.4 and (a == -0.5).float().mean() > 0.4


def test_td3_delays_the_actor_and_target_updates():
    cfg = load_config(
        [
            "experiment=td3_pendulum",
            "agent.hidden=[8]",
            "agent.policy_delay=2",
            "logger=none",
            "env.eval_envs=1",
            "trainer.batch_size=8",
        ]
    )
    trainer = build(cfg, "/tmp/unused")
    agent = trainer.agent
    trainer.buffer.extend(trainer.collector.rollout().clone())
    for _ in range(3):
        trainer.buffer.extend(trainer.collector.rollout().clone())
    snapshots, progress = [], Progress()
    for _ in range(4):
        before = [p.clone() for p in agent.actor.parameters()]
        target_before = [p.clone() for p in agent.actor_target.parameters()]
        agent.update(trainer.buffer.sample(), progress)
        progress.add_update()  # as the trainer counts it
        moved = any(
            not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters(), strict=True)
        )
        target_moved = any(
            not torch.equal(a, b)
            for a, b in zip(target_before, agent.actor_target.parameters(), strict=True)
        )
        snapshots.append((moved, target_moved))
    assert snapshots == [(False, False), (True, True), (False, False), (True, True)]


def test_sac_temperature_rises_when_entropy_is_below_target():
    batch = TensorDict(weight=torch.ones(4), valid=torch.ones(4), batch_size=[4])
    for logp, direction in ((torch.full((4,), 3.0), 1), (torch.full((4,), -3.0), -1)):
        log_alpha = torch.zeros((), requires_grad=True)
        # target entropy -1: entropy -logp = -3 is below it (raise alpha), 3 above (lower)
        temperature_loss(log_alpha, logp, -1.0, batch).backward()
        assert torch.sign(-log_alpha.grad).item() == direction  # descent direction
        assert log_alpha.grad.item() == pytest.approx(-(logp[0].item() - 1.0))


def test_polyak_and_hard_target_updates():
    online, target = nn.Linear(2, 1), nn.Linear(2, 1)
    online2, target2 = nn.Linear(1, 1), nn.Linear(1, 1)  # a second pair, one foreach call
    for net, value in ((online, 1.0), (target, 0.0), (online2, 2.0), (target2, 0.0)):
        nn.init.constant_(net.weight, value), nn.init.constant_(net.bias, value)
    pairs = TargetPairs((target, online), (target2, online2))
    pairs.polyak(0.1)
    assert torch.allclose(target.weight, torch.full((1, 2), 0.1))
    assert torch.allclose(target2.weight, torch.full((1, 1), 0.2))
    pairs.polyak(0.1)  # 0.1 + 0.1 (1 - 0.1) = 0.19
    assert torch.allclose(target.bias, torch.tensor([0.19]))
    pairs.copy()
    assert torch.equal(target.weight, online.weight) and torch.equal(target.bias, online.bias)
    assert torch.equal(target2.weight, online2.weight)


def test_dqn_hard_target_copies_every_interval_updates(tmp_path):
    cfg = load_config(
        [
            "agent.target_update=hard",
            "agent.target_update_interval=3",
            "agent.hidden=[8]",
            "logger=none",
            "trainer.batch_size=8",
            "env.eval_envs=1",
        ]
    )
    trainer = build(cfg, tmp_path)
    for _ in range(4):
        trainer.buffer.extend(trainer.collector.rollout().clone())
    agent = trainer.agent
    copied = []
    for _ in range(6):
        agent.update(trainer.buffer.sample(), trainer.progress)
        trainer.progress.add_update()  # as the trainer counts it
        copied.append(
            all(
                torch.equal(a, b)
                for a, b in zip(agent.q.parameters(), agent.q_target.parameters(), strict=True)
            )
        )
    assert copied == [False, False, True, False, False, True]


@pytest.mark.parametrize("runs", [1, 2])
def test_a_step_computes_only_its_own_parameters_gradients(runs):
    """An actor's loss runs through the critic: clip_and_step backpropagates into the
    actor's parameters only (the critic's gradients stay unset), and the actor's step is
    the one a full backward gives. runs=2: RunAdam, each run's [2, ...] slice its own."""
    from gpurl.agents.base import clip_and_step, make_optimizer
    from gpurl.core.runs import Runs

    x = torch.randn(8, 3)
    steps = []
    for only_own in (True, False):
        torch.manual_seed(0)
        actor, critic = nn.Linear(3, 2), nn.Linear(2, 1)
        opt = make_optimizer(actor.parameters(), 1e-2, Runs(n=runs))
        loss = -critic(torch.tanh(actor(x))).mean()
        if only_own:
            clip_and_step(opt, loss, 1.0)
            assert all(p.grad is None for p in critic.parameters())
        else:  # the same step from a full backward
            opt.zero_grad(set_to_none=True)
            (loss * runs).backward()
            assert all(p.grad is not None for p in critic.parameters())
            if runs > 1:
                opt.step(1.0)
            else:
                nn.utils.clip_grad_norm_(list(actor.parameters()), 1.0)
                opt.step()
        steps.append([p.detach().clone() for p in actor.parameters()])
    for own, full in zip(*steps, strict=True):
        torch.testing.assert_close(own, full, rtol=0, atol=0)


@pytest.mark.parametrize("flush", [True, False])
def test_flush_denormal_sets_how_the_process_rounds_tiny_floats(tmp_path, flush):
    tiny = torch.finfo(torch.float32).tiny
    try:
        build(load_config([f"flush_denormal={str(flush).lower()}"]), tmp_path)
        underflow = (torch.tensor(tiny) / 4).item()
        assert (underflow == 0.0) == flush  # flushed to zero, or kept as a denormal
    finally:
        torch.set_flush_denormal(False)
