"""PQN (agents/pqn.py) in the on-policy trainer: the targets it learns from are the
Q(lambda) returns of the rollout (returns.q_lambda, hand-checked in test_returns.py),
bootstrapped from the Q-network's max; its update regresses Q(s, a) onto them; it
refuses what it cannot learn."""

import pytest
import torch

from gpurl.core.returns import q_lambda
from gpurl.errors import ConfigError
from gpurl.policies import VALUE
from gpurl.train import build, load_config


def small(tmp_path, overrides=()):
    cfg = load_config(
        [
            "env=cartpole",
            "agent=pqn",
            "env.num_envs=4",
            "env.eval_envs=2",
            "agent.hidden=[32,32]",
            "trainer.rollout_steps=16",
            "logger=none",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def rollout_targets(trainer):
    """One rollout and the agent's targets for it, before any update."""
    batch = trainer.collector.rollout()
    return batch, trainer.agent.compute_targets(batch, trainer.collector.obs)


@pytest.mark.parametrize("bootstrap_truncated", [True, False])
def test_trainer_hands_pqn_the_q_lambda_returns_of_its_rollout(tmp_path, bootstrap_truncated):
    torch.manual_seed(0)
    trainer = small(tmp_path, [f"agent.bootstrap_truncated={bootstrap_truncated}"])
    agent = trainer.agent
    batch, targets = rollout_targets(trainer)
    nxt = batch["next"]
    done = nxt["done"].squeeze(-1)
    assert done[:-1].any()  # episodes end inside the rollout: the trace is cut there
    with torch.no_grad():
        # the value the policy stored while acting is max_a Q(s_t, a) of the same network
        torch.testing.assert_close(batch[VALUE], agent.q(batch).max(-1).values)
        if bootstrap_truncated:
            next_q = agent.q(nxt).max(-1).values
            terminated = nxt["terminated"].squeeze(-1)
            # within an episode, the batched pass over the next observations gives what
            # the policy stored acting on them one step later
            keep = ~done[:-1]
            torch.testing.assert_close(next_q[:-1][keep], batch[VALUE][1:][keep])
        else:  # acting-time values, the last step from the obs to act on next
            last = agent.q(trainer.collector.obs).max(-1).values.unsqueeze(0)
            next_q = torch.cat([batch[VALUE][1:], last])
            terminated = done  # truncation counts as an end
    reward = nxt["reward"].squeeze(-1) * agent.reward_scale
    expected = q_lambda(reward, next_q, terminated, done, agent.gamma, agent.q_lambda)
    torch.testing.assert_close(targets["value_target"], expected)
    assert list(targets.keys()) == ["value_target"]  # no GAE for PQN


def test_update_regresses_q_of_the_taken_action_onto_the_target(tmp_path):
    torch.manual_seed(0)
    trainer = small(tmp_path, ["agent.anneal_lr=false", "agent.lr=5e-3"])
    agent = trainer.agent
    batch, _ = rollout_targets(trainer)
    batch = batch[0, :4].select("observation", "action").clone()
    batch["value_target"] = torch.linspace(-1.0, 2.0, 4)
    first = agent.update(batch, agent.progress)
    for _ in range(100):
        last = agent.update(batch, agent.progress)
    with torch.no_grad():
        q = agent.q(batch).gather(-1, batch["action"].long().unsqueeze(-1)).squeeze(-1)
    assert last["loss"] < 0.01 * first["loss"]
    torch.testing.assert_close(q, batch["value_target"], atol=0.05, rtol=0)


def test_unknown_loss_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="agent.loss=l1 is unknown") as err:
        small(tmp_path, ["agent.loss=l1"])
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_a_pixel_run_checkpoints_and_resumes_to_the_same_iteration(tmp_path):
    # The on-policy collector keeps the observation to act on next; on env=pixels it is
    # a uint8 view of the env's int64 frame words, which torch.save refused to write.
    pixels = ["env=pixels", "trainer.rollout_steps=4", "agent.epochs=1", "agent.minibatches=2"]
    torch.manual_seed(0)
    run = small(tmp_path / "a", pixels)
    run.iteration()
    path = run.save()
    resumed = small(tmp_path / "b", pixels)
    resumed.resume(path)  # sets the global RNG back to the one saved
    rng = torch.get_rng_state()
    run.iteration()
    torch.set_rng_state(rng)  # both trainers draw from the one global generator
    resumed.iteration()
    torch.testing.assert_close(resumed.targets["value_target"], run.targets["value_target"])
    for key, value in run.agent.q.state_dict().items():
        torch.testing.assert_close(resumed.agent.q.state_dict()[key], value)
