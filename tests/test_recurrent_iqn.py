"""Recurrent IQN (agent=iqn agent.recurrent=lstm | gru): R2D2's sequence replay
(agents/sequence_q.py, shared with recurrent DQN) under IQN's quantile head. No gradient
through the burn-in, the quantile loss at every trained step with its targets read from
the target core's state, R2D2's mixed priorities of the per-step quantile losses, a
training run that learns and evaluates from its own state, and recurrent=null leaving
IQN as it was. The host-read audit: tests/test_host_reads_training.py; bitwise resume:
tests/test_resume.py (EXACT_CASES); learning: docs/results.md (masked CartPole)."""

import torch
from omegaconf import open_dict

import gpurl.agents.iqn as iqn
from gpurl.core.replay import sequence_priority
from gpurl.policies.recurrent import RECURRENT_STATE
from gpurl.train import build, load_config
from gpurl.trainers.evaluation import evaluate_protocol
from gpurl.trainers.sequence_replay import SequenceReplay


def small(tmp_path, *overrides):
    """4 envs, 2 rows per iteration, sequences of 2 burn-in + 4 trained + 2 look-ahead
    rows (n_step 3) starting 4 rows apart, as tests/test_recurrent_dqn.py's."""
    cfg = load_config(
        [
            "env=cartpole",
            "agent=iqn",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            "agent.hidden=[16]",
            "agent.sequence_length=4",
            "agent.burn_in=2",
            "agent.sequence_overlap=2",
            "agent.n_step=3",
            "env.num_envs=4",
            "env.eval_envs=2",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=8",
            "trainer.buffer_size=1000",
            "logger=none",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def fill(trainer, iterations):
    for _ in range(iterations):
        trainer.buffer.extend(trainer.collector.rollout())


def test_no_gradient_reaches_the_burn_in(tmp_path, monkeypatch):
    """Through the update's own quantile loss: zero on the burn-in rows and the stored
    start state, non-zero on every trained row."""
    torch.manual_seed(0)
    trainer = small(tmp_path, "agent.burn_in=3", "agent.sequence_overlap=3")
    assert isinstance(trainer.buffer, SequenceReplay)
    fill(trainer, 8)
    agent, sample = trainer.agent, trainer.buffer.sample()
    obs = sample["observation"].clone().requires_grad_(True)
    state = sample[RECURRENT_STATE].clone().requires_grad_(True)
    sample.set("observation", obs)
    sample.set(RECURRENT_STATE, state)
    grads = {}

    def spy(optimizer, loss, max_norm):
        grads["obs"], grads["state"] = torch.autograd.grad(loss, (obs, state), allow_unused=True)

    monkeypatch.setattr(iqn, "clip_and_step", spy)
    agent.update(sample, trainer.progress)
    assert grads["obs"][:, :3].abs().max() == 0  # burn-in rows
    assert grads["state"] is None  # the stored state reaches the loss through the burn-in only
    assert grads["obs"][:, 3:7].abs().amax((0, 2)).gt(0).all()  # each trained row


def test_the_loss_is_the_quantile_loss_of_each_trained_step(tmp_path, monkeypatch):
    """The update's quantile Huber loss, per trained step and sequence [L, B]: its
    predictions are the online head's quantiles of the core's outputs at the actions
    taken, its targets reward + discount x the target head's quantiles of the greedy
    next action, read from the target core's state after the last summed step; the
    priorities handed back are R2D2's mix of each sequence's per-step losses."""
    torch.manual_seed(0)
    trainer = small(tmp_path, "agent.prioritized=true", "agent.priority_eta=0.5")
    fill(trainer, 20)
    agent = trainer.agent
    for _ in range(50):  # a sample in which some trained step's n-step return ends
        sample = trainer.buffer.sample(trainer.progress)
        if (sample["discount"] == 0).any():
            break
    seen = {}
    loss_fn = iqn.quantile_huber_loss

    def spy(pred, target, taus, kappa):
        seen.update(pred=pred.detach(), target=target, taus=taus)
        return loss_fn(pred, target, taus, kappa)

    monkeypatch.setattr(iqn, "quantile_huber_loss", spy)
    nets = (agent.encoder, agent.core, agent.z)
    states = [{k: v.clone() for k, v in m.state_dict().items()} for m in nets]
    out = agent.update(sample, trainer.progress)
    L, B, n = 4, 8, int(agent.cfg.quantiles)
    assert seen["pred"].shape == (L, B, n) and seen["target"].shape == (L, B, 8)
    for m, state in zip(nets, states, strict=True):
        m.load_state_dict(state)  # the weights the update read
    with torch.no_grad():
        done = sample["done"].transpose(0, 1)
        outs, _ = agent.unroll_window(
            agent.encoder, agent.core, sample, sample[RECURRENT_STATE], done
        )
        z = agent.z.quantiles(outs[:L], seen["taus"])
        action = sample["action"].transpose(0, 1).long()
        want = z.gather(-1, action[..., None, None].expand(L, B, n, 1)).squeeze(-1)
    torch.testing.assert_close(seen["pred"], want)
    per_step = loss_fn(seen["pred"], seen["target"], seen["taus"], 1.0)
    torch.testing.assert_close(out["priority"], sequence_priority(per_step, 0.5))
    # a terminal last step bootstraps nothing: its target is its (n-step) reward alone
    ended = sample["discount"].transpose(0, 1) == 0
    assert ended.any() and not ended.all()
    reward = sample["reward"].transpose(0, 1)
    torch.testing.assert_close(seen["target"][ended], reward[ended].unsqueeze(-1).expand(-1, 8))


def test_a_training_run_learns_from_sequences_and_evaluates_from_its_own_state(tmp_path):
    trainer = small(tmp_path, "agent.prioritized=true", "agent.recurrent=gru")
    before = {k: v.clone() for k, v in trainer.agent.z.state_dict().items()}
    for _ in range(6):
        trainer.iteration()
    assert trainer.progress.update_count == 24
    assert any(not torch.equal(v, trainer.agent.z.state_dict()[k]) for k, v in before.items())
    assert sorted(trainer.agent.modules()) == [
        "core", "core_target", "encoder", "encoder_target", "exploration", "z", "z_target",
    ]  # fmt: skip
    training = trainer.agent.core.state.clone()
    assert training.shape == (4, 8) and training.abs().max() > 0
    result = evaluate_protocol(trainer.eval_env, trainer.agent.policy)
    assert "return" in result and trainer.agent.core.eval_state.shape == (2, 8)
    torch.testing.assert_close(trainer.agent.core.state, training)


def test_recurrent_null_leaves_iqn_exactly_as_it_was(tmp_path, monkeypatch):
    """agent.recurrent=null: bitwise the weights of an IQN config without any of the
    recurrent keys, after training."""
    import gpurl.train as train

    args = [
        "env=cartpole",
        "agent=iqn",
        "agent.hidden=[16]",
        "agent.n_step=3",
        "agent.prioritized=true",
        "env.num_envs=4",
        "env.eval_envs=2",
        "trainer.frames_per_batch=8",
        "trainer.init_random_frames=16",
        "trainer.batch_size=16",
        "logger=none",
        "trainer.progress=false",
        "seed=5",
    ]
    plain = build(load_config(args), tmp_path / "plain")
    for _ in range(8):
        plain.iteration()
    assert plain.agent.core is None and plain.agent.fuses_draw
    assert sorted(plain.agent.modules()) == ["exploration", "z", "z_target"]
    without = load_config(args)
    with open_dict(without):
        for k in ("recurrent", "recurrent_hidden", "sequence_length", "burn_in"):
            del without.agent[k]
        del without.agent["sequence_overlap"], without.agent["priority_eta"]
    monkeypatch.setattr(train, "check_config", lambda cfg: None)  # it asks for every key
    old = build(without, tmp_path / "old")
    for _ in range(8):
        old.iteration()
    for (name, a), (_, b) in zip(plain.agent.parameters(), old.agent.parameters(), strict=True):
        assert torch.equal(a, b), name
