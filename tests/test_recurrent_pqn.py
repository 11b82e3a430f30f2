"""Recurrent PQN (agent=pqn agent.recurrent=lstm | gru): the acting pass's max Q
replayed by whole-sequence minibatches, bootstrap values from the stored states,
recurrent=null leaving PQN as it was, a short run that learns its minibatches, and what
is refused. The core itself (resets, gradient cuts): tests/test_recurrent.py; the
host-read audit and exact resume: test_host_reads_training.py, test_resume.py."""

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.policies import VALUE
from gpurl.policies.recurrent import RECURRENT_STATE
from gpurl.train import build, load_config


def small(tmp_path, *overrides, envs=4, steps=40):
    cfg = load_config(
        [
            "env=cartpole",
            "agent=pqn",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            f"env.num_envs={envs}",
            "env.eval_envs=2",
            "agent.hidden=[16]",
            f"trainer.rollout_steps={steps}",
            "agent.epochs=2",
            "agent.minibatches=2",
            "logger=none",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def test_minibatches_replay_the_acting_pass_max_q(tmp_path):
    """A minibatch of whole env sequences, the core replayed from the state stored at its
    first step, gives back max_a Q the policy stored while acting (rollouts that begin
    mid-episode included)."""
    trainer = small(tmp_path)
    agent = trainer.agent
    trainer.collector.rollout()
    rollout = trainer.collector.rollout()
    assert rollout.get(RECURRENT_STATE)[0].abs().amax(-1).gt(0).any()
    targets = agent.compute_targets(rollout, trainer.collector.obs)
    assert sorted(targets.keys()) == ["done", "value_target"]
    trainer._allocate(rollout, targets)
    trainer.shuffle()
    batch = trainer.fill_minibatch(0)
    assert batch.batch_size == (40, 2)
    done = rollout.get(("next", "done")).reshape(rollout.shape)
    assert done.any()  # the sequences cross episode ends, where the state restarts
    with torch.no_grad():
        out = agent.core.sequence(
            agent.encoder(batch), batch.get(RECURRENT_STATE)[0], batch.get("done")
        )
        q = agent.q(batch.clone(False).set("features", out))
    torch.testing.assert_close(q.max(-1).values, batch.get(VALUE))


def test_bootstrap_values_follow_the_stored_states(tmp_path):
    trainer = small(tmp_path)
    agent = trainer.agent
    rollout = trainer.collector.rollout()
    with torch.no_grad():
        nxt = agent.next_values(rollout)
    done = rollout.get(("next", "done")).reshape(rollout.shape)
    value = rollout.get(VALUE)
    goes_on = ~done[:-1]
    torch.testing.assert_close(nxt[:-1][goes_on], value[1:][goes_on])
    torch.testing.assert_close(nxt[-1][~done[-1]], agent.value(trainer.collector.obs)[~done[-1]])


def test_a_short_run_steps_every_part_and_carries_the_state(tmp_path):
    trainer = small(tmp_path, steps=16)
    agent = trainer.agent
    before = {k: [p.detach().clone() for p in m.parameters()] for k, m in agent.modules().items()}
    for _ in range(3):
        trainer.iteration()
    assert sorted(agent.modules()) == ["core", "encoder", "q"]
    # the core learns with the head (CartPole's encoder is a flatten: no parameters)
    assert before["core"] and before["q"]
    for name, module in agent.modules().items():
        moved = [
            not torch.equal(a, b) for a, b in zip(before[name], module.parameters(), strict=True)
        ]
        assert any(moved) or not before[name], name
    assert agent.core.state.abs().max() > 0 and agent.acting_state()
    loss = trainer.metrics.peek()["loss"]
    assert 0 < loss < float("inf")


def test_recurrent_null_builds_pqn_as_before(tmp_path):
    trainer = small(tmp_path, "agent.recurrent=null")
    agent = trainer.agent
    assert agent.core is None and not agent.recurrent and agent.acting_state() == {}
    assert sorted(agent.modules()) == ["q"]
    assert agent.policy.out_keys == ["action", VALUE]
    rollout = trainer.collector.rollout()
    assert sorted(rollout.keys()) == ["action", "next", "observation", VALUE]
    assert sorted(agent.compute_targets(rollout, trainer.collector.obs).keys()) == ["value_target"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["trainer.num_seeds=2", "agent.minibatches=8"],
            "does not divide the 4 sequences of one run's rollout",
        ),
        (["agent.minibatches=8"], "does not divide the 4 sequences of a rollout"),
    ],
    ids=["num_seeds_minibatches", "minibatches"],
)
def test_what_recurrent_pqn_refuses_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        small(tmp_path, *overrides)
    assert "\n" not in str(err.value)
