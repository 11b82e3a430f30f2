"""Recurrent PPO and A2C (agent.recurrent): the core's resets and gradient cuts on
hand-made sequences, the hidden state a rollout stores and carries, whole-sequence
minibatches that replay the acting pass, evaluation's own state, the host-read audit,
recurrent=null leaving PPO as it was, and the settings refused in one line."""

import pytest
import torch

from gpurl.agents.ppo import PPOAgent
from gpurl.core.compile import CompileSpec
from gpurl.errors import ConfigError
from gpurl.policies import LOG_PROB, VALUE
from gpurl.policies.recurrent import RECURRENT_STATE, RecurrentCore
from gpurl.train import build, load_config
from gpurl.trainers.compile import InductorPolicy, compile_policy
from gpurl.trainers.evaluation import evaluate_protocol

from .test_bad_input import assert_refused, run_cli


def small(tmp_path, *overrides, envs=4, steps=8, env="cartpole"):
    cfg = load_config(
        [
            f"env={env}",
            "agent=ppo",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            f"env.num_envs={envs}",
            *(["env.eval_envs=2"] if env in ("cartpole", "gym") else []),
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


# -- the core on hand-made sequences ------------------------------------------------------
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_done_zeroes_the_state_for_the_next_step_and_cuts_the_gradient(kind):
    torch.manual_seed(0)
    core = RecurrentCore(kind, 3, 4, (2,))
    x = torch.randn(4, 2, 3)
    state = torch.randn(2, core.state_size, requires_grad=True)
    done = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0]], dtype=torch.bool)  # env 0 ends at t=1
    out = core.sequence(x, state, done)
    # step by step: env 0 starts afresh at t=2 (from zeros), env 1 goes on
    s, expected = state, []
    for t in range(4):
        o, s = core.step(x[t], s)
        expected.append(o)
        if t == 1:
            s = torch.stack((torch.zeros_like(s[0]), s[1]))
    torch.testing.assert_close(out, torch.stack(expected))
    fresh, _ = core.step(x[2, :1], torch.zeros(1, core.state_size))
    torch.testing.assert_close(out[2, :1], fresh)
    # nothing after env 0's end depends on the state it began the sequence with
    (grad,) = torch.autograd.grad(out[2:].sum(), state, retain_graph=True)
    assert grad[0].abs().max() == 0
    assert grad[1].abs().max() > 0
    (grad,) = torch.autograd.grad(out[:2, 0].sum(), state)
    assert grad[0].abs().max() > 0


def split_into_parts(core: RecurrentCore) -> list[RecurrentCore]:
    """Each part of a core of parts > 1 as a core of its own, with that part's weights."""
    gates, h = core.gates // core.hidden, core.part_features
    subs = []
    for k in range(core.parts):
        sub = RecurrentCore(core.kind, core.rnn.input_size, h, core.state.shape[:-1])
        with torch.no_grad():
            for name, p in core.rnn.named_parameters():
                part = p.view(gates, core.parts, h, *p.shape[1:])[:, k]
                if name.startswith("weight_hh"):
                    part = part[..., k * h : (k + 1) * h]
                getattr(sub.rnn, name).copy_(part.reshape(getattr(sub.rnn, name).shape))
        subs.append(sub)
    return subs


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_core_of_two_parts_is_two_independent_layers(kind):
    """parts=2 (agent.critic_recurrent): the outputs are those of two separate layers on
    the same features, resets included; no part's output depends on the other's weights
    or state, and the weights between parts stay 0 through a step of Adam."""
    torch.manual_seed(0)
    core = RecurrentCore(kind, 3, 4, (5,), parts=2)
    assert core.out_features == 8 and core.part_features == 4
    x = torch.randn(6, 5, 3)
    done = torch.zeros(6, 5, dtype=torch.bool)
    done[2, 1] = True
    state = torch.randn(5, core.state_size, requires_grad=True)
    out = core.sequence(x, state, done)
    actor, critic = split_into_parts(core)
    h = 4
    if core.lstm:  # [h, c] of both parts -> each part's [h, c]
        hs, cs = state[:, :8], state[:, 8:]
        states = [torch.cat((hs[:, :h], cs[:, :h]), -1), torch.cat((hs[:, h:], cs[:, h:]), -1)]
    else:
        states = [state[:, :h], state[:, h:]]
    expected = [sub.sequence(x, s, done) for sub, s in zip((actor, critic), states, strict=True)]
    torch.testing.assert_close(out, torch.cat(expected, -1))
    # the critic's outputs reach none of the actor's state
    (grad,) = torch.autograd.grad(out[..., h:].sum(), state)
    own = grad[:, h:8] if not core.lstm else torch.cat((grad[:, h:8], grad[:, 8 + h :]), -1)
    other = grad[:, :h] if not core.lstm else torch.cat((grad[:, :h], grad[:, 8 : 8 + h]), -1)
    assert other.abs().max() == 0 and own.abs().max() > 0
    off_block = core.hh_mask == 0
    optimizer = torch.optim.Adam(core.parameters(), lr=0.1)
    core.sequence(x, state.detach(), done).square().sum().backward()
    assert core.rnn.weight_hh_l0.grad[off_block].abs().max() == 0
    optimizer.step()
    assert core.rnn.weight_hh_l0[off_block].abs().max() == 0


def test_episode_end_zeroes_the_training_state_by_mask():
    core = RecurrentCore("lstm", 3, 2, (3,))
    core.state.fill_(1.0)
    kept = core.state
    core.episode_end(torch.tensor([True, False, True]))
    assert core.state is kept  # in place: the tensor checkpoints and the trainer hold
    assert core.state.tolist() == [[0.0] * 4, [1.0] * 4, [0.0] * 4]


# -- the rollout ---------------------------------------------------------------------------
def replay_rollout(agent, rollout, start):
    """The acting pass again, a step at a time, from `start`: (state each step began
    with, log-probs' logits, values, state after the rollout)."""
    core, states, values = agent.core, [], []
    s = start
    done = rollout.get(("next", "done")).reshape(rollout.shape)
    with torch.no_grad():
        for t in range(rollout.shape[0]):
            states.append(s)
            out, s = core.step(agent.encoder(rollout[t]), s)
            values.append(agent.critic(rollout[t].clone(False).set("features", out)))
            s = s * (~done[t]).unsqueeze(-1)
    return torch.stack(states), torch.stack(values), s


def test_the_rollout_stores_the_state_each_step_began_with_and_carries_it_over(tmp_path):
    trainer = small(tmp_path, envs=4, steps=40)  # 40 random CartPole steps: some end
    agent, collector = trainer.agent, trainer.collector
    first = collector.rollout()
    done = first.get(("next", "done")).reshape(first.shape)
    assert done.any() and not done[-1].all()
    stored = first.get(RECURRENT_STATE)
    assert stored.shape == (40, 4, 16) and stored[0].abs().max() == 0  # zeros at the start
    states, values, after = replay_rollout(agent, first, stored[0])
    torch.testing.assert_close(stored, states)
    torch.testing.assert_close(first.get(VALUE), values)
    # a step after an episode's end begins from zeros
    t, e = done[:-1].nonzero()[0].tolist()
    assert stored[t + 1, e].abs().max() == 0
    # the state after the rollout is the training state, the next rollout's start
    torch.testing.assert_close(agent.core.state, after)
    carried = agent.core.state.clone()
    second = collector.rollout()
    torch.testing.assert_close(second.get(RECURRENT_STATE)[0], carried)


@pytest.mark.parametrize("critic_recurrent", [False, True], ids=["shared", "critic_own"])
def test_minibatches_are_whole_env_sequences_that_replay_the_acting_pass(
    tmp_path, critic_recurrent
):
    """The minibatch an update sees: the rollout's T steps of half the envs, beginning at
    the states the rollout stored at its first step; re-running the core over it gives
    back the log-probs and values the policy acted with (ratio 1 before any update).
    With agent.critic_recurrent the critic reads its own layer's part of the features."""
    trainer = small(tmp_path, f"agent.critic_recurrent={critic_recurrent}", envs=4, steps=40)
    assert trainer.agent.core.parts == (2 if critic_recurrent else 1)
    agent = trainer.agent
    trainer.collector.rollout()  # the second rollout begins mid-episode
    rollout = trainer.collector.rollout()
    assert rollout.get(RECURRENT_STATE)[0].abs().amax(-1).gt(0).any()
    targets = agent.compute_targets(rollout, trainer.collector.obs)
    trainer._allocate(rollout, targets)
    trainer.shuffle()
    envs = trainer.perm[:2]  # whole rollouts (agent.sequence_length=null): env = sequence
    batch = trainer.fill_minibatch(0)
    assert batch.batch_size == (40, 2)
    torch.testing.assert_close(batch.get(RECURRENT_STATE)[0], rollout.get(RECURRENT_STATE)[0, envs])
    done = rollout.get(("next", "done")).reshape(rollout.shape)
    torch.testing.assert_close(batch.get("done"), done[:, envs].float())
    assert_replays_the_acting_pass(agent, batch)


def assert_replays_the_acting_pass(agent, batch):
    """The core replayed over minibatch `batch` from its stored first state gives back the
    log-probs and values the policy stored while acting."""
    with torch.no_grad():
        out = agent.core.sequence(
            agent.encoder(batch), batch.get(RECURRENT_STATE)[0], batch.get("done")
        )
        obs = batch.clone(False).set("features", out)
        log_prob, _ = agent.actor.evaluate(obs, batch.get(agent.info.action_key))
        torch.testing.assert_close(log_prob, batch.get(LOG_PROB))
        torch.testing.assert_close(agent.critic(obs), batch.get(VALUE))


def test_shorter_sequences_start_from_the_states_the_rollout_stored_there(tmp_path):
    """agent.sequence_length=10 cuts a 40-step rollout of 4 envs into 16 sequences: each
    minibatch column is steps [10 k, 10 k + 10) of one env, beginning at the state the
    rollout stored at step 10 k, each sequence once per pass; replaying the core from
    there gives back the log-probs and values the policy acted with."""
    trainer = small(tmp_path, "agent.sequence_length=10", envs=4, steps=40)
    agent = trainer.agent
    trainer.collector.rollout()
    rollout = trainer.collector.rollout()
    stored = rollout.get(RECURRENT_STATE)
    assert stored[10::10].abs().amax(-1).gt(0).all()  # later starts: states of their own
    targets = agent.compute_targets(rollout, trainer.collector.obs)
    trainer._allocate(rollout, targets)
    trainer.shuffle()
    dealt = []
    for i in range(trainer.minibatches):
        batch = trainer.fill_minibatch(i)
        assert batch.batch_size == (10, 8)
        for j, seq in enumerate(trainer.perm[i * 8 : (i + 1) * 8].tolist()):
            k, env = divmod(seq, 4)
            steps = slice(10 * k, 10 * k + 10)
            torch.testing.assert_close(batch.get(RECURRENT_STATE)[:, j], stored[steps, env])
            torch.testing.assert_close(batch.get("action")[:, j], rollout.get("action")[steps, env])
            dealt.append((k, env))
        assert_replays_the_acting_pass(agent, batch)
    assert sorted(dealt) == [(k, env) for k in range(4) for env in range(4)]


def test_the_whole_rollout_as_one_sequence_trains_as_before(tmp_path):
    """agent.sequence_length equal to trainer.rollout_steps is the default (null): the
    same minibatches, the same weights after two iterations, bit for bit."""
    weights = []
    for i, extra in enumerate(([], ["agent.sequence_length=8"])):
        torch.manual_seed(0)
        trainer = small(tmp_path / str(i), "seed=3", *extra)
        trainer.iteration()
        trainer.iteration()
        weights.append(
            [p.detach().clone() for p in trainer.agent.optimizer.param_groups[0]["params"]]
        )
    for a, b in zip(*weights, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("critic_recurrent", [False, True], ids=["shared", "critic_own"])
def test_bootstrap_values_follow_the_stored_states(tmp_path, critic_recurrent):
    """V of each step's next observation: where the episode goes on, the next step's
    stored value (the same observation from the same state)."""
    trainer = small(tmp_path, f"agent.critic_recurrent={critic_recurrent}", envs=4, steps=40)
    agent = trainer.agent
    rollout = trainer.collector.rollout()
    with torch.no_grad():
        nxt = agent.next_values(rollout)
    done = rollout.get(("next", "done")).reshape(rollout.shape)
    value = rollout.get(VALUE)
    goes_on = ~done[:-1]
    torch.testing.assert_close(nxt[:-1][goes_on], value[1:][goes_on])
    # after the last step: V(obs acted on next) from the training state
    torch.testing.assert_close(nxt[-1][~done[-1]], agent.value(trainer.collector.obs)[~done[-1]])


def test_evaluation_runs_its_own_state_and_leaves_the_training_state(tmp_path):
    trainer = small(tmp_path)
    trainer.iteration()
    training = trainer.agent.core.state.clone()
    assert training.abs().max() > 0
    first = evaluate_protocol(trainer.eval_env, trainer.agent.policy)
    torch.testing.assert_close(trainer.agent.core.state, training)
    core = trainer.agent.core
    assert core.eval_state.shape == (2, 16)
    # each evaluation starts from zeros: the same copies play the same episodes
    state = trainer.eval_env.env_state_dict()
    again = evaluate_protocol(trainer.eval_env, trainer.agent.policy)
    core.eval_state.fill_(5.0)  # whatever an earlier greedy call left
    trainer.eval_env.load_env_state_dict(state)
    assert evaluate_protocol(trainer.eval_env, trainer.agent.policy) == again
    assert first.keys() == again.keys()
    core.eval_state.fill_(5.0)
    trainer.agent.policy.start_evaluation()
    assert core.eval_state.abs().max() == 0


def test_play_episodes_marks_episode_starts():
    from gpurl.envs.cartpole import CartPoleEnv

    env = CartPoleEnv(num_envs=3)
    seen = []

    def policy(obs):
        seen.append(obs.get("is_init").clone())
        return obs.set("action", torch.zeros(3, dtype=torch.long))

    env.play_episodes(policy, max_steps=30)
    assert seen[0].shape == (3, 1) and seen[0].all()
    assert not seen[1].any()
    assert any(s.any() for s in seen[2:])  # pushing left ends CartPole within 30 steps


# -- the hot path ------------------------------------------------------------------------
# the host-read audit of recurrent iterations: tests/test_host_reads_training.py


def test_recurrent_null_builds_ppo_as_before(tmp_path):
    plain = small(tmp_path / "a", "agent.recurrent=null")
    default = load_config(["env=cartpole", "agent=ppo"])
    assert default.agent.recurrent is None and default.agent.recurrent_hidden == 128
    agent = plain.agent
    assert agent.core is None and agent.policy.core is None and not agent.recurrent
    assert sorted(agent.modules()) == ["actor", "critic"]  # no shared encoder, no core
    assert not any(isinstance(m, torch.nn.RNNBase) for m in agent.actor.modules())
    assert agent.policy.out_keys == ["action", LOG_PROB, VALUE]
    assert not agent.policy.stateful and agent.acting_state() == {}
    rollout = plain.collector.rollout()
    assert sorted(rollout.keys()) == ["action", "next", "observation", LOG_PROB, VALUE]
    targets = agent.compute_targets(rollout, plain.collector.obs)
    assert sorted(targets.keys()) == ["advantage", "value_target"]


def test_the_memory_preset_rolls_out_two_whole_episodes_per_env(tmp_path):
    """memory_ppo_gru: each 42-step rollout holds two whole 21-step episodes of every
    env, so every answer's gradient reaches its cue inside one sequence."""
    cfg = load_config(
        ["experiment=memory_ppo_gru", "logger=none", "trainer.progress=false", "env.eval_envs=2"]
    )
    assert cfg.agent.recurrent == "gru" and cfg.env.delay == 20
    assert cfg.trainer.rollout_steps == 2 * (cfg.env.delay + 1)
    trainer = build(cfg, tmp_path)
    rollout = trainer.collector.rollout()
    done = rollout["next", "done"].reshape(cfg.trainer.rollout_steps, -1)
    ends = done.nonzero()[:, 0].unique().tolist()
    assert ends == [20, 41]  # the question of each episode, in every env alike
    trainer.iteration()


@pytest.mark.parametrize(
    "env, overrides",
    [
        ("pixels", ["env.stack_k=1", "agent.encoder.cnn=tile"]),  # one frame, no stack
        ("minatar", ["agent.encoder.cnn=minatar"]),
    ],
    ids=["pixels_stack_1", "minatar"],
)
def test_a_recurrent_core_sits_behind_a_cnn(tmp_path, env, overrides):
    """Image envs: the core takes the CNN's features, one state per env, and the next
    rollout starts from the state the last one left."""
    trainer = small(tmp_path, *overrides, env=env)
    agent = trainer.agent
    nets = [m for net in agent.modules().values() for m in net.modules()]
    assert any(isinstance(m, torch.nn.Conv2d) for m in nets)
    assert isinstance(agent.core, RecurrentCore) and agent.core.hidden == 8
    rollout = trainer.collector.rollout()
    assert rollout.get(RECURRENT_STATE).shape == (8, 4, 16)  # an LSTM's h and c per env
    carried = agent.core.state.clone()
    assert carried.abs().max() > 0
    torch.testing.assert_close(trainer.collector.rollout().get(RECURRENT_STATE)[0], carried)
    trainer.iteration()


# -- what is refused ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, message",
    [
        (["agent.minibatches=8"], "does not divide the 4 sequences of a rollout"),
        (["agent.sequence_length=3"], "does not divide trainer.rollout_steps=8"),
        (["agent.sequence_length=4", "agent.minibatches=16"], "does not divide the 8 sequences"),
        (["agent.recurrent=null", "agent.critic_recurrent=true"], "set agent.recurrent"),
        (["agent.recurrent=null", "agent.sequence_length=4"], "cuts a recurrent agent's"),
    ],
    ids=[
        "minibatches",
        "sequence_length",
        "sequence_minibatches",
        "critic_alone",
        "sequence_alone",
    ],
)
def test_what_recurrent_agents_refuse_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        small(tmp_path, *overrides)
    assert "\n" not in str(err.value)


def test_cuda_graphs_capture_the_update_and_leave_the_acting_uncaptured(tmp_path):
    # compile.cudagraphs is taken (the update is captured: tests/test_compile.py runs it
    # on CUDA); the acting policy is not graphed, and with compile.policy it is traced
    trainer = small(tmp_path)
    cfg = load_config(["env=cartpole", "agent=ppo", "agent.recurrent=gru"]).agent
    agent = PPOAgent(cfg, trainer.info, trainer.progress)
    agent.compile = CompileSpec(cudagraphs=True)
    agent.refuse_recurrent("gru")
    assert compile_policy(agent.policy, agent.compile, recurrent=True) is agent.policy
    agent.compile = CompileSpec(cudagraphs=True, policy=True)
    agent.refuse_recurrent("gru")
    acting = compile_policy(agent.policy, agent.compile, recurrent=True)
    assert isinstance(acting, InductorPolicy)


@pytest.mark.slow  # Inductor compiles the acting step: ~10 s a case
@pytest.mark.parametrize(
    "env, kind", [("cartpole", "lstm"), ("marinenav", "gru")], ids=["cartpole", "marinenav"]
)
def test_a_compiled_acting_step_moves_the_hidden_state_as_the_replay_does(tmp_path, env, kind):
    """compile.policy traces the acting step with the core's state buffer: the rollout it
    stores (states, log-probs, values) is what the eager core replays from its first
    stored state, episode ends (and, on MarineNav, stopped robots) included, and the
    training state it leaves is where the replay ends."""
    extra = ["env.max_episode_steps=20"] if env == "marinenav" else []
    trainer = small(
        tmp_path, f"agent.recurrent={kind}", "compile.policy=true", *extra, env=env, steps=40
    )
    assert isinstance(trainer.acting, InductorPolicy)
    agent = trainer.agent
    trainer.collector.rollout()
    rollout = trainer.collector.rollout()  # begins mid-episode, from a carried state
    assert rollout.get(("next", "done")).any()
    targets = agent.compute_targets(rollout, trainer.collector.obs)
    trainer._allocate(rollout, targets)
    trainer.shuffle()
    batch = trainer.fill_minibatch(0)
    assert_replays_the_acting_pass(agent, batch)
    with torch.no_grad():  # the whole rollout from its first state: the carried state
        x = agent.encoder(rollout)
        done = targets.get("done")
        _, _, last = agent.core.unroll(x, rollout.get(RECURRENT_STATE)[0], done)
    if env == "marinenav":  # the acting zeroes robots not running at the next step
        last = last * trainer.collector.obs.get(("agents", "running")).unsqueeze(-1)
    torch.testing.assert_close(agent.core.state, last)
    trainer.iteration()


@pytest.mark.parametrize("agent", ["rainbow", "acqin", "sac"])
def test_agents_without_a_recurrent_core_have_no_such_key(agent, tmp_path, monkeypatch, capsys):
    argv = [f"agent={agent}", "agent.recurrent=lstm"]
    code, lines, run_dir = run_cli(argv, tmp_path, monkeypatch, capsys)
    assert_refused(code, lines, run_dir, "unknown config key 'agent.recurrent'", tmp_path)


def test_the_core_refuses_unknown_kinds():
    with pytest.raises(ConfigError, match="agent.recurrent=rnn is unknown"):
        RecurrentCore("rnn", 3, 4, (2,))


def test_a_recurrent_state_is_not_shared_with_other_batches_while_exploring():
    core = RecurrentCore("gru", 3, 4, (2,))
    with pytest.raises(ConfigError, match="sized for the training envs"):
        core.act(torch.zeros(5, 3), training=True)
    out, began = core.act(torch.zeros(5, 3), training=False)  # greedy: its own state
    assert out.shape == (5, 4) and began.abs().max() == 0
    assert core.state.abs().max() == 0


def test_a_batch_of_sequences_from_the_trainer_loop(tmp_path):
    """The trainer deals the envs of a permutation to the minibatches: each minibatch
    [T, envs / minibatches], every env once per epoch."""
    trainer = small(tmp_path, envs=4, steps=8)
    seen = []
    learn = trainer.agent.learn_step

    def spy(batch):
        seen.append(batch.get(RECURRENT_STATE)[0].clone())
        assert batch.batch_size == (8, 2)
        return learn(batch)

    trainer.agent.learn_step = spy
    rollout_states = []
    collect = trainer.collector.rollout

    def keep():
        out = collect()
        rollout_states.append(out.get(RECURRENT_STATE)[0].clone())
        return out

    trainer.collector.rollout = keep
    trainer.iteration()
    trainer.iteration()
    assert len(seen) == 2 * trainer.epochs * trainer.minibatches
    for i, starts in enumerate(rollout_states):
        for epoch in range(trainer.epochs):
            k = (i * trainer.epochs + epoch) * trainer.minibatches
            dealt = torch.cat(seen[k : k + trainer.minibatches])
            # every env's first state once per epoch, in some order
            assert sorted(map(tuple, dealt.tolist())) == sorted(map(tuple, starts.tolist()))


def test_foreign_envs_run_through_the_lean_collector_and_torchrl_s_is_refused(tmp_path):
    """The hidden state resets through the lean collector's episode_end: a Gymnasium env
    through the lean adapter trains and evaluates; TorchRL's collector is refused."""
    trainer = small(tmp_path / "lean", "env.collector=lean", env="gym", envs=2)
    trainer.iteration()
    assert trainer.collector.buffer.get(RECURRENT_STATE).shape == (8, 2, 16)
    assert "return" in evaluate_protocol(trainer.eval_env, trainer.agent.policy)
    with pytest.raises(ConfigError, match="lean collector") as err:
        small(tmp_path / "torchrl", "env.collector=torchrl", env="gym", envs=2)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_recurrent_update_runs_under_autocast(tmp_path, kind):
    """compile.amp autocasts the forward passes, the sequence replay's included."""
    trainer = small(tmp_path, f"agent.recurrent={kind}", "compile.amp=true")
    trainer.iteration()
    assert trainer.progress.update_count > 0
