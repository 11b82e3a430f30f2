"""Recurrent DQN (agent=dqn agent.recurrent=lstm | gru, R2D2-style sequence replay): no
gradient through the burn-in, a sequence starts from the state the rollout stored there,
an episode end inside a window zeroes the state and cuts the gradient, n-step returns
along a sequence by hand, R2D2's mixed priorities, windows that never cross the write
cursor, recurrent=null leaving DQN as it was, evaluation's own state, and the settings
refused in one line. The host-read audit: tests/test_host_reads_training.py; bitwise
resume: tests/test_resume.py (EXACT_CASES)."""

import pytest
import torch
from tensordict import TensorDict

from gpurl.agents.dqn import DQNAgent
from gpurl.core.compile import CompileSpec
from gpurl.core.replay import sequence_priority
from gpurl.errors import ConfigError
from gpurl.policies.recurrent import RECURRENT_STATE
from gpurl.train import build, load_config
from gpurl.trainers.compile import InductorPolicy
from gpurl.trainers.evaluation import evaluate_protocol
from gpurl.trainers.replay import DeviceReplay
from gpurl.trainers.sequence_replay import SequenceReplay, aligned

OBS = ("obs", "observation")


def small(tmp_path, *overrides, env="cartpole", envs=4, agent="dqn"):
    """4 envs, 2 rows per iteration, sequences of 2 burn-in + 4 trained + 2 look-ahead
    rows (n_step 3) starting 4 rows apart; updates from the first whole window on. DQN,
    or IQN (the same sequence replay under its quantile head: tests/test_recurrent_iqn.py)."""
    cfg = load_config(
        [
            f"env={env}",
            f"agent={agent}",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            "agent.hidden=[16]",
            "agent.sequence_length=4",
            "agent.burn_in=2",
            "agent.sequence_overlap=2",
            "agent.n_step=3",
            f"env.num_envs={envs}",
            *(["env.eval_envs=2"] if env in ("cartpole", "gym") else []),
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
    """Collect and store without learning (the weights the states were acted with)."""
    for _ in range(iterations):
        trainer.buffer.extend(trainer.collector.rollout())


def starts_of(trainer, sample):
    S, stride = trainer.buffer.streams, trainer.buffer.seq.stride
    return (sample["index"] // S) * stride, sample["index"] % S


def online(agent):
    return (agent.encoder, agent.core, agent.q)


# -- the sample ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "acting", ["eager", pytest.param("compile.policy=true", marks=pytest.mark.slow)]
)
def test_a_sequence_starts_from_the_state_the_rollout_stored_there(tmp_path, acting):
    """The state a sample starts from is the collector's RECURRENT_STATE at its start row,
    and that is the core run from zeros over the stream's episode up to that row, with
    the acting eager or traced through Inductor (compile.policy)."""
    torch.manual_seed(0)
    trainer = small(tmp_path, *([] if acting == "eager" else [acting]))
    assert isinstance(trainer.acting, InductorPolicy) == (acting != "eager")
    stored = []
    for _ in range(20):  # 40 rows of random CartPole: episodes end inside them
        rollout = trainer.collector.rollout()
        stored.append(rollout.get(RECURRENT_STATE).clone())
        trainer.buffer.extend(rollout)
    stored = torch.cat(stored)  # [40, envs, S]: the ring has not wrapped, row = time
    sample = trainer.buffer.sample()
    start, stream = starts_of(trainer, sample)
    torch.testing.assert_close(sample[RECURRENT_STATE], stored[start, stream], rtol=0, atol=0)
    data, core, agent = trainer.buffer.data, trainer.agent.core, trainer.agent
    assert data["done"][:40].any()
    for i in range(len(start)):
        r, s = int(start[i]), int(stream[i])
        if r == 0:
            assert sample[RECURRENT_STATE][i].abs().max() == 0
            continue
        x = agent.encoder(TensorDict({"observation": data[OBS][:r, s]}, batch_size=[r]))
        with torch.no_grad():
            _, _, state = core.unroll(x, torch.zeros(core.state_size), data["done"][:r, s])
        torch.testing.assert_close(sample[RECURRENT_STATE][i], state)


def test_nstep_returns_along_a_sequence_by_hand_stop_at_episode_ends(tmp_path):
    """gamma 0.5, n 3, rewards 1, 2, 3, ... along rows 0..7 of a window (2 burn-in, 4
    trained, 2 look-ahead): stream 0 terminates at row 3, stream 1 is truncated there."""
    trainer = small(tmp_path, "agent.gamma=0.5")
    fill(trainer, 6)  # 12 rows
    d = trainer.buffer.data
    d["reward"][:] = torch.arange(1.0, d["reward"].shape[0] + 1).unsqueeze(1)
    d["done"][:] = False
    d["terminated"][:] = False
    d["done"][3, :2] = True
    d["terminated"][3, 0] = True
    start, stream = torch.tensor([0, 0]), torch.tensor([0, 1])
    sample = trainer.buffer.gather(start, stream, torch.tensor([0, 1]), torch.ones(2))
    # trained rows 2..5: row 2 sums rows 2 and 3 (3 + 0.5 x 4), row 3 itself, rows 4 and
    # 5 three rows each (5 + 3 + 1.75 and 6 + 3.5 + 2), bootstrapped at gamma^3
    expected = torch.tensor([5.0, 4.0, 9.75, 11.5])
    torch.testing.assert_close(sample["reward"], expected.expand(2, 4))
    torch.testing.assert_close(sample["discount"][0], torch.tensor([0.0, 0.0, 0.125, 0.125]))
    torch.testing.assert_close(sample["discount"][1], torch.tensor([0.25, 0.5, 0.125, 0.125]))
    assert sample["last"].tolist() == [[3, 3, 6, 7]] * 2  # window positions
    # the bootstrap reads the observation after the last summed step (a truncated
    # episode's final one), and the window's every row for the unroll
    torch.testing.assert_close(
        sample["next", "observation"][1, 0], d[("next", "observation")][3, 1]
    )
    torch.testing.assert_close(sample["observation"][1], d[OBS][0:8, 1])
    assert sample["action"].shape == (2, 4) and sample["done"].shape == (2, 8)


def test_sequence_priorities_mix_the_max_and_the_mean_of_td_errors():
    td = torch.tensor([[1.0, -2.0], [3.0, 0.5], [-0.5, 0.5]])  # [T=3, B=2]
    # |td| of sequence 0: 1, 3, 0.5 (max 3, mean 1.5); of sequence 1: 2, 0.5, 0.5 (2, 1)
    expected = torch.tensor([0.9 * 3 + 0.1 * 1.5, 0.9 * 2 + 0.1 * 1.0])
    torch.testing.assert_close(sequence_priority(td, 0.9), expected)
    torch.testing.assert_close(sequence_priority(td, 1.0), torch.tensor([3.0, 2.0]))
    torch.testing.assert_close(sequence_priority(td, 0.0), torch.tensor([1.5, 1.0]))


def test_an_update_hands_back_each_sequences_mixed_priority(tmp_path):
    trainer = small(tmp_path, "agent.prioritized=true", "agent.priority_eta=0.5")
    fill(trainer, 6)
    agent, sample = trainer.agent, trainer.buffer.sample(trainer.progress)
    seen = {}
    mixed = sequence_priority

    def spy(td, eta):
        seen["td"], seen["eta"] = td.clone(), eta
        return mixed(td, eta)

    import gpurl.agents.dqn as dqn

    dqn.sequence_priority, saved = spy, dqn.sequence_priority
    try:
        out = agent.update(sample, trainer.progress)
    finally:
        dqn.sequence_priority = saved
    assert seen["td"].shape == (4, 8) and seen["eta"] == 0.5  # [trained steps, sequences]
    torch.testing.assert_close(out["priority"], mixed(seen["td"], 0.5))
    trainer.buffer.update_priorities(sample["index"], out["priority"])
    stored = trainer.buffer.sampler.priority[sample["index"]]
    alpha, eps = trainer.buffer.spec.alpha, trainer.buffer.spec.priority_eps
    torch.testing.assert_close(stored.float(), (out["priority"] + eps).pow(alpha))


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_windows_never_cross_the_write_cursor_and_start_on_the_stride(tmp_path, prioritized):
    """A ring of 16 rows (window 8, stride 4) written 2 rows at a time for 5 laps: every
    drawn window lies in rows written and not yet overwritten, starts on the stride,
    and (prioritized) exactly the drawable starts carry priority."""
    trainer = small(tmp_path, "trainer.buffer_size=64", f"agent.prioritized={prioritized}")
    buffer = trainer.buffer
    R, W, stride, S = buffer.rows, buffer.window, buffer.seq.stride, buffer.streams
    assert (R, W, stride) == (16, 8, 4)
    written = 0  # rows written since the start (the test's own count)
    for _ in range(40):
        buffer.extend(trainer.collector.rollout())
        written += 2
        # brute force: the absolute start held at each slot and whether its window is whole
        drawable = []
        for slot in range(R // stride):
            row = slot * stride
            if row >= written:
                continue
            begun = written - 1 - (written - 1 - row) % R  # the latest time at this row
            if begun + W <= written and begun >= written - min(written, R):
                drawable.append(slot)
        assert buffer.ready() == bool(drawable)
        if prioritized:
            held = buffer.sampler.priority.view(R // stride, S) > 0
            assert held.all(1).tolist() == [s in drawable for s in range(R // stride)]
            assert not (held.any(1) & ~held.all(1)).any()  # every stream of a start alike
        if not drawable:
            continue
        sample = buffer.sample(trainer.progress)
        start, _ = starts_of(trainer, sample)
        assert (start % stride == 0).all()
        assert set((start // stride).tolist()) <= set(drawable)
        if not prioritized:  # the uniform draw reaches every drawable start
            for _ in range(30):
                start = torch.cat((start, starts_of(trainer, buffer.sample())[0]))
            assert set((start // stride).tolist()) == set(drawable)


def test_an_empty_window_count_waits_for_updates(tmp_path):
    """The trainer makes no update (and runs up no debt) until a whole window is stored."""
    trainer = small(tmp_path, "trainer.init_random_frames=0")
    trainer.iteration()  # 2 rows of 8: nothing to draw yet
    trainer.iteration()
    trainer.iteration()
    assert trainer.progress.update_count == 0 and trainer.update_debt == 0
    trainer.iteration()  # 8 rows: one window
    assert trainer.progress.update_count == 8
    assert aligned(0, 0, 4) == (0, 1) and aligned(1, 3, 4) == (4, 0) and aligned(3, 12, 4) == (4, 3)


# -- learning --------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", ["dqn", "iqn"])
def test_no_gradient_reaches_the_burn_in(tmp_path, agent, monkeypatch):
    """Through the update's own loss (DQN's TD error, IQN's quantile loss): the gradient
    of the loss with respect to the window's observations is exactly zero on the burn-in
    rows and the stored start state, non-zero on the trained rows."""
    torch.manual_seed(0)
    trainer = small(tmp_path, "agent.burn_in=3", "agent.sequence_overlap=3", agent=agent)
    fill(trainer, 8)
    agent, sample = trainer.agent, trainer.buffer.sample()
    obs = sample["observation"].clone().requires_grad_(True)
    state = sample[RECURRENT_STATE].clone().requires_grad_(True)
    sample.set("observation", obs)
    sample.set(RECURRENT_STATE, state)
    grads = {}

    def spy(optimizer, loss, max_norm):
        grads["obs"], grads["state"] = torch.autograd.grad(loss, (obs, state), allow_unused=True)

    monkeypatch.setattr(type(agent).__module__ + ".clip_and_step", spy)
    agent.update(sample, trainer.progress)
    assert grads["obs"][:, :3].abs().max() == 0  # burn-in rows
    assert grads["state"] is None  # the stored state reaches the loss through the burn-in only
    assert grads["obs"][:, 3:7].abs().amax((0, 2)).gt(0).all()  # each trained row


def test_an_episode_end_inside_a_sequence_zeroes_the_state_and_cuts_the_gradient(tmp_path):
    torch.manual_seed(0)
    trainer = small(tmp_path, "agent.burn_in=0", "agent.sequence_overlap=0")
    fill(trainer, 8)
    agent, sample = trainer.agent, trainer.buffer.sample()
    done = sample["done"].clone()
    done[0] = False
    done[0, 1] = True  # sequence 0's episode ends after its second step
    obs = sample["observation"].clone().requires_grad_(True)
    sample.set("observation", obs)
    out, after = agent.unroll_window(*online(agent)[:2], sample, sample[RECURRENT_STATE], done.T)
    # the step after the end begins from zeros
    x = agent.encoder(sample)[0, 2]
    fresh, _ = agent.core.step(x, torch.zeros(agent.core.state_size))
    torch.testing.assert_close(out[2, 0], fresh)
    # after the end nothing depends on the steps before it; before it everything does
    q_after = agent.head(agent.q, out[2:, 0]).sum()
    (grad,) = torch.autograd.grad(q_after, obs, retain_graph=True)
    assert grad[0, :2].abs().max() == 0 and grad[0, 2:].abs().max() > 0
    assert grad[1:].abs().max() == 0
    (grad,) = torch.autograd.grad(agent.head(agent.q, out[1, 0]).sum(), obs)
    assert grad[0, 0].abs().max() > 0


@pytest.mark.parametrize("agent, head", [("dqn", "q"), ("iqn", "z")])
def test_a_training_run_learns_from_sequences_and_evaluates_from_its_own_state(
    tmp_path, agent, head
):
    trainer = small(tmp_path, "agent.prioritized=true", "agent.recurrent=gru", agent=agent)
    heads = trainer.agent.modules()[head]
    before = {k: v.clone() for k, v in heads.state_dict().items()}
    for _ in range(6):
        trainer.iteration()
    assert trainer.progress.update_count == 24  # from the 4th iteration's 8 rows: one window
    assert any(not torch.equal(v, heads.state_dict()[k]) for k, v in before.items())
    assert sorted(trainer.agent.modules()) == sorted(
        ["core", "core_target", "encoder", "encoder_target", "exploration", head, f"{head}_target"]
    )
    training = trainer.agent.core.state.clone()
    assert training.shape == (4, 8) and training.abs().max() > 0
    result = evaluate_protocol(trainer.eval_env, trainer.agent.policy)
    assert "return" in result and trainer.agent.core.eval_state.shape == (2, 8)
    torch.testing.assert_close(trainer.agent.core.state, training)


@pytest.mark.parametrize("agent, head", [("dqn", "q"), ("iqn", "z")])
def test_recurrent_null_leaves_the_agent_exactly_as_it_was(tmp_path, monkeypatch, agent, head):
    """agent.recurrent=null: the same networks, policy, replay and updates as a DQN (or
    IQN) config without any of the recurrent keys (bitwise equal weights after training)."""
    from omegaconf import open_dict

    import gpurl.train as train

    args = [
        "env=cartpole",
        f"agent={agent}",
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
    plain = build(load_config(args), tmp_path / "plain")  # seeds the global RNG: run it first
    for _ in range(8):
        plain.iteration()
    assert plain.agent.core is None and not plain.agent.recurrent
    assert sorted(plain.agent.modules()) == ["exploration", head, f"{head}_target"]
    assert plain.agent.fuses_draw
    assert plain.agent.policy.out_keys == ["action"] and not plain.agent.policy.stateful
    assert type(plain.buffer) is DeviceReplay and plain.agent.acting_state() == {}
    without = load_config(args)
    with open_dict(without):
        for k in ("recurrent", "recurrent_hidden", "sequence_length", "burn_in"):
            del without.agent[k]
        del without.agent["sequence_overlap"], without.agent["priority_eta"]
    monkeypatch.setattr(train, "check_config", lambda cfg: None)  # it asks for every key
    old = build(without, tmp_path / "old")
    for _ in range(8):
        old.iteration()
    assert plain.progress.update_count == 56
    for (name, a), (_, b) in zip(plain.agent.parameters(), old.agent.parameters(), strict=True):
        assert torch.equal(a, b), name


# -- what is refused ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, env, message",
    [
        (["env.max_episode_steps=20"], "marinenav", "single-agent envs"),
        (["env.collector=torchrl"], "gym", "lean collector"),
        (["agent.sequence_overlap=6"], "cartpole", "sequence_overlap=6 must be below"),
    ],
    ids=["multi_robot", "torchrl", "overlap"],
)
def test_what_recurrent_dqn_refuses_in_one_line(tmp_path, overrides, env, message):
    with pytest.raises(ConfigError, match=message) as err:
        small(tmp_path, *overrides, env=env, envs=2)
    assert "\n" not in str(err.value)


def test_the_sequence_update_takes_compile_and_cuda_graphs(tmp_path):
    # compile.update compiles learn_sequences (tests/test_compile.py matches it against
    # the eager update); under compile.cudagraphs it is captured (the CUDA test there)
    # and the replay's draw stays eager: the sequence replay does not fuse
    trainer = small(tmp_path)
    cfg = load_config(["env=cartpole", "agent=dqn", "agent.recurrent=gru"]).agent
    agent = DQNAgent(cfg, trainer.info, trainer.progress)
    agent.compile = CompileSpec(update=True, cudagraphs=True, policy=True)
    agent.refuse_recurrent("gru")  # none of them refused
    assert not agent.fuses_draw and not trainer.buffer.fusable


def test_a_dqn_subclass_with_its_own_loss_refuses_to_go_recurrent(tmp_path):
    """A plug-in that changes DQN's loss (examples/soft_dqn.py) would otherwise train
    DQN's sequence loss under its name."""

    class SoftDQN(DQNAgent):
        name = "soft_dqn"

        def learn(self, batch):
            raise NotImplementedError

    trainer = small(tmp_path)
    cfg = load_config(["env=cartpole", "agent=dqn", "agent.recurrent=lstm"]).agent
    with pytest.raises(ConfigError, match="agent=soft_dqn changes DQN's loss") as err:
        SoftDQN(cfg, trainer.info, trainer.progress)
    assert "\n" not in str(err.value)


# rainbow and iqn have no agent.recurrent key: tests/test_recurrent.py
# (test_agents_without_a_recurrent_core_have_no_such_key)


def test_the_replay_holds_the_acting_states_beside_the_transitions(tmp_path):
    trainer = small(tmp_path)
    assert isinstance(trainer.buffer, SequenceReplay)
    fill(trainer, 1)
    assert trainer.buffer.data[RECURRENT_STATE].shape == (trainer.buffer.rows, 4, 16)
