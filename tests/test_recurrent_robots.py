"""Recurrent PPO on multi-robot envs (MarineNav, VMAS): one hidden state per robot, a
stopped robot's state held at zero, the replay meeting every step from the state the
rollout acted from (robots that stop mid-rollout, episodes that end), the stopped
robots' steps out of the losses, evaluation, MAPPO with a recurrent actor, and what is
refused in one line."""

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.policies import LOG_PROB, VALUE
from gpurl.policies.recurrent import RECURRENT_STATE, RecurrentCore
from gpurl.train import build, load_config
from gpurl.trainers.evaluation import evaluate_protocol

# five robots among six obstacles, goals 3 m away and 50-step episodes: within two
# 60-step rollouts of random actions robots collide or arrive mid-episode (their slots
# stop running) and every env's episode is truncated at least once
CROWDED = [
    "env.curriculum=[{from_step:0,robots:5,obstacles:6,min_start_goal_dis:3}]",
    "env.max_obstacles=6",
    "env.max_episode_steps=50",
    "env.eval_envs=10",
]


def small(tmp_path, env, *overrides, steps=60, minibatches=1):
    cfg = load_config(
        [
            f"env={env}",
            "agent=ppo",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            "env.num_envs=4",
            "agent.hidden=[16]",
            f"trainer.rollout_steps={steps}",
            "agent.epochs=1",
            f"agent.minibatches={minibatches}",
            "logger=none",
            "trainer.progress=false",
            *(CROWDED if env == "marinenav" else []),
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def replay(agent, batch):
    """(log-probs, values) of the core replayed over `batch` [L, n, R] from its stored
    first state, as `learn` replays it."""
    with torch.no_grad():
        out = agent.core.sequence(
            agent.encoder(batch), batch.get(RECURRENT_STATE)[0], batch.get("done")
        )
        obs = batch.clone(False).set("features", out)
        log_prob, _ = agent.actor.evaluate(obs, batch.get(agent.info.action_key))
        return log_prob, agent.critic(obs)


def whole_rollout(trainer):
    """The second rollout (it begins mid-episode) as one minibatch of every env."""
    trainer.collector.rollout()
    rollout = trainer.collector.rollout()
    targets = trainer.agent.compute_targets(rollout, trainer.collector.obs)
    trainer._allocate(rollout, targets)
    trainer.shuffle()
    return rollout, trainer.fill_minibatch(0)


def test_each_robot_carries_its_own_state_and_a_stopped_one_holds_zeros(tmp_path):
    trainer = small(tmp_path, "marinenav")
    agent = trainer.agent
    assert agent.core.state.shape == (4, 5, 8 * 2)  # [envs, robots, (h, c)]
    rollout, _ = whole_rollout(trainer)
    stored, running = rollout.get(RECURRENT_STATE), rollout.get(("agents", "running"))
    assert stored.shape == (60, 4, 5, 16)
    # robots that stop mid-episode, and steps where a slot does not run
    assert (running[:-1] & ~running[1:]).any() and (~running).any()
    assert stored[~running].abs().max() == 0  # a robot that is not running has no memory
    # running robots of one env remember different things
    t, e = running.all(-1).nonzero()[-1].tolist()
    assert (stored[t, e, 0] - stored[t, e, 1]).abs().max() > 0


def test_the_replay_meets_every_step_from_the_state_the_rollout_acted_from(tmp_path):
    """A 60-step rollout of 4 envs in which robots stop and episodes end replays, from
    each env's stored first state, to the log-probs and values the policy acted with, at
    every step of every robot: the replay restarts a robot's state where its env's
    episode ended and where it does not run at the next step, as the acting did."""
    trainer = small(tmp_path, "marinenav")
    rollout, batch = whole_rollout(trainer)
    assert rollout.get(("next", "done")).any()  # an episode ends inside the rollout
    resets = batch.get("done")
    assert resets.shape == (60, 4, 5)
    log_prob, value = replay(trainer.agent, batch)
    torch.testing.assert_close(log_prob, batch.get(LOG_PROB))
    torch.testing.assert_close(value, batch.get(VALUE))
    # the robots' own done flags alone leave the replay wrong where a stopped robot's
    # slot runs again in the env's next episode
    robot_done = rollout.get(("next", "agents", "done"))[:, trainer.perm]  # the batch's envs
    batch.set("done", robot_done.reshape(resets.shape).float())
    log_prob, _ = replay(trainer.agent, batch)
    assert (log_prob - batch.get(LOG_PROB)).abs().max() > 1e-3


def test_a_stopped_robot_s_steps_are_out_of_the_losses(tmp_path):
    """The minibatch weighs each robot's step by whether it ran; changing what a stopped
    robot's steps say (its actions, advantages, targets) moves nothing in an update."""
    batches = []
    for scramble in (False, True):
        trainer = small(tmp_path / str(scramble), "marinenav", "seed=3")
        _, batch = whole_rollout(trainer)
        valid = batch.get("valid").bool()
        assert valid.shape == (60, 4, 5) and not valid.all()
        if scramble:
            for k in ("advantage", "value_target", LOG_PROB, VALUE):
                batch.set(k, torch.where(valid, batch.get(k), 123.0))
        before = {k: v.clone() for k, v in trainer.agent.actor.state_dict().items()}
        trainer.agent.learn(batch)
        after = trainer.agent.actor.state_dict()
        assert any((after[k] - v).abs().max() > 0 for k, v in before.items())  # it learnt
        batches.append(after)
    for k, v in batches[0].items():
        torch.testing.assert_close(v, batches[1][k], msg=k)


@pytest.mark.parametrize("overrides", [[], ["agent.critic=central"]], ids=["ippo", "mappo"])
def test_recurrent_ppo_trains_and_evaluates_on_vmas_and_marinenav(tmp_path, overrides):
    for env in ("marinenav", "vmas"):
        if env == "vmas":
            pytest.importorskip("vmas")
        trainer = small(tmp_path / env, env, *overrides, steps=20, minibatches=2)
        for _ in range(2):
            trainer.iteration()
        _, batch = whole_rollout(trainer)
        log_prob, value = replay(trainer.agent, batch)
        torch.testing.assert_close(log_prob, batch.get(LOG_PROB))
        torch.testing.assert_close(value, batch.get(VALUE))
        training = trainer.agent.core.state.clone()
        result = evaluate_protocol(trainer.eval_env, trainer.agent.policy)
        assert "return" in result
        torch.testing.assert_close(trainer.agent.core.state, training)  # its own state


def test_an_env_s_end_zeroes_every_robot_s_training_state():
    core = RecurrentCore("gru", 3, 4, (2, 3))
    core.state.fill_(1.0)
    core.episode_end(torch.tensor([True, False]))
    assert core.state[0].abs().max() == 0 and core.state[1].eq(1.0).all()
    core.state.fill_(1.0)  # a robot that stopped: zeroed at its next step
    running = torch.tensor([[True, False, True], [True, True, True]])
    _, began = core.act(torch.zeros(2, 3, 3), True, torch.tensor([[False], [True]]), running)
    assert began[0, 1].abs().max() == 0 and began[0, 0].eq(1.0).all()
    assert began[1].abs().max() == 0  # env 1's episode begins: every robot restarts


def test_what_multi_robot_memory_refuses_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="drop agent.critic_recurrent") as err:
        small(tmp_path, "marinenav", "agent.critic=central", "agent.critic_recurrent=true")
    assert "\n" not in str(err.value)
    dqn = ["env=marinenav", "agent=dqn", "agent.recurrent=lstm", "env.num_envs=2", "logger=none"]
    with pytest.raises(ConfigError, match="recurrent PPO and A2C keep a state per robot") as err:
        build(load_config(dqn), tmp_path)
    assert "\n" not in str(err.value)


def test_two_seeds_in_one_process_keep_a_state_per_run_env_and_robot(tmp_path):
    """trainer.num_seeds=2 on MarineNav: the stacked core's state holds every run's envs'
    robots, and whole rollouts replay per run (the group's sequences, robots inside)."""
    trainer = small(tmp_path, "marinenav", "trainer.num_seeds=2", steps=20, minibatches=2)
    assert trainer.agent.core.state.shape == (2 * 4, 5, 16)
    for _ in range(2):
        trainer.iteration()
    assert trainer.progress.update_count == 2 * 2  # iterations x minibatches
