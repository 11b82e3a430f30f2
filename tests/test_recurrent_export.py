"""A recurrent run used after training (gpurl/trained.py): loaded as a policy that
carries its state from call to call, and exported as a step with its state made
explicit, (*entries, state, first) -> (action, state), run by torch alone."""

import json

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.trained import TrainedPolicy, export

from .conftest import train_run_dir
from .test_trained import run_example

COMMON = [
    "env=cartpole",
    "env.observe_velocity=false",
    "agent.recurrent_hidden=8",
    "agent.hidden=[16]",
    "env.num_envs=4",
    "env.eval_envs=2",
    "trainer.total_frames=64",
    "trainer.eval_interval=64",
    "logger=none",
    "trainer.progress=false",
]
AGENTS = {
    "ppo_gru": ["agent=ppo", "agent.recurrent=gru", "trainer.rollout_steps=8"],
    "dqn_lstm": [
        "agent=dqn",
        "agent.recurrent=lstm",
        "agent.sequence_length=4",
        "agent.burn_in=2",
        "agent.sequence_overlap=2",
        "trainer.frames_per_batch=8",
        "trainer.init_random_frames=32",
        "trainer.batch_size=8",
    ],
}


@pytest.fixture(scope="module", params=sorted(AGENTS))
def run(request, tmp_path_factory):
    """A finished recurrent run on CartPole without its velocities (a tiny budget: what
    is tested is the plumbing)."""
    run_dir = tmp_path_factory.mktemp(request.param) / "run"
    run_dir.mkdir()
    train_run_dir(run_dir, [*COMMON, *AGENTS[request.param]])
    return run_dir


def test_a_loaded_recurrent_policy_carries_its_state_and_restarts_where_asked(run):
    """The acting state stays out of the module checkpoints: the policy loads with one
    env (the run trained with 4) and acts at any batch from a state of its own, which
    each call moves on; `reset()` restarts it everywhere, `first` row by row."""
    policy = TrainedPolicy(run)
    assert policy.recurrent and policy.state_shape[0] > 8 - 1
    core = policy.policy.core
    o1, o2 = torch.randn(5, 2), torch.randn(5, 2)
    policy(o1)
    assert core.eval_state.shape == (5, policy.state_shape[0])
    after_o1 = core.eval_state.clone()
    assert after_o1.abs().sum() > 0  # the state moved on
    first = torch.tensor([True, False, True, False, False])
    policy(o2, first=first)
    mixed = core.eval_state.clone()
    policy.reset()
    assert core.eval_state.abs().sum() == 0
    policy(o2)  # from zeros on every row
    fresh = core.eval_state.clone()
    assert torch.equal(mixed[first], fresh[first])  # restarted rows: as from zeros
    policy.reset()
    policy(o1)
    policy(o2)
    assert torch.equal(mixed[~first], core.eval_state[~first])  # the others carried on
    assert not torch.equal(mixed[~first], fresh[~first])


@pytest.mark.slow  # a run, exported (and to ONNX): seconds
def test_a_recurrent_policy_exports_as_a_step_with_its_state_explicit(run, tmp_path):
    policy = TrainedPolicy(run)
    meta = export(policy, tmp_path / "policy.pt2", observations=256)
    kind = policy.policy.core.kind
    size = policy.state_shape[0]
    assert meta["state"] == {"shape": [size], "dtype": "float32", "kind": kind}
    assert meta["inputs"] == [{"key": "observation", "shape": [2], "dtype": "float32"}]
    assert meta["checked_observations"] == 256
    assert json.loads((tmp_path / "policy.json").read_text()) == meta
    program = torch.export.load(tmp_path / "policy.pt2").module()
    # stepped from zeros at another batch, the program acts as the loaded policy does,
    # episode starts and all, and hands back the state the policy holds
    gen = torch.Generator().manual_seed(0)
    state = torch.zeros(3, size)
    policy.reset()
    for t in range(12):
        obs = torch.randn(3, 2, generator=gen)
        first = torch.tensor([t == 0, t % 5 == 0, t % 3 == 1])
        action, state = program(obs, state, first)
        assert torch.equal(action, policy(obs, first=first))
        assert torch.equal(state, policy.policy.core.eval_state)
    # on an episode's first step the state handed in is not read
    obs, ones = torch.randn(3, 2, generator=gen), torch.ones(3, dtype=torch.bool)
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            program(obs, torch.randn(3, size, generator=gen), ones),
            program(obs, torch.zeros(3, size), ones),
            strict=True,
        )
    )


@pytest.mark.slow  # a run, exported to ONNX, run in a process of its own: seconds
def test_a_recurrent_policy_exports_to_onnx_checked_step_by_step(run, tmp_path):
    pytest.importorskip("onnxruntime")
    meta = export(TrainedPolicy(run), tmp_path / "policy.pt2", observations=128, onnx=True)
    assert meta["onnx"] == "policy.onnx" and (tmp_path / "policy.onnx").is_file()
    out = run_example("run_exported_onnx.py", tmp_path / "policy.onnx", tmp_path)
    assert "torch imported: False" in out


@pytest.mark.slow  # a run, exported, run in a process of its own: seconds
def test_the_exported_recurrent_program_runs_without_gpurl(run, tmp_path):
    out = tmp_path / "export" / "policy.pt2"
    export(TrainedPolicy(run), out, observations=64)
    assert "gpurl imported: False" in run_example("run_exported.py", out, tmp_path)


def test_a_many_seed_recurrent_run_is_still_refused(run, tmp_path):
    """Loading takes a one-seed run (trained.py's check, before anything is built)."""
    stacked = tmp_path / "stacked"
    (stacked / ".hydra").mkdir(parents=True)
    text = (run / ".hydra" / "config.yaml").read_text()
    (stacked / ".hydra" / "config.yaml").write_text(text.replace("num_seeds: 1", "num_seeds: 2"))
    with pytest.raises(ConfigError, match="trained 2 seeds in one process"):
        TrainedPolicy(stacked)


@pytest.mark.slow  # a MarineNav run, exported: seconds
def test_a_multi_robot_recurrent_policy_exports_a_state_per_robot(tmp_path):
    """IPPO with an LSTM on MarineNav: the program's state is [batch, robots, S], its
    entries include which robots run (a stopped robot's state is zeroed at each step),
    and stepped through recorded episodes it acts as the run's policy did."""
    from .test_recurrent_robots import CROWDED

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train_run_dir(
        run_dir,
        [
            "env=marinenav",
            *CROWDED,
            "agent=ppo",
            "agent.recurrent=lstm",
            "agent.recurrent_hidden=8",
            "agent.hidden=[16]",
            "env.num_envs=4",
            "trainer.rollout_steps=8",
            "trainer.total_frames=64",
            "trainer.eval_interval=64",
            "logger=none",
            "trainer.progress=false",
        ],
    )
    policy = TrainedPolicy(run_dir)
    robots = policy.info.group_shape[0]
    meta = export(policy, tmp_path / "policy.pt2", observations=160)
    assert meta["state"]["shape"] == [robots, 16] and meta["state"]["kind"] == "lstm"
    assert ["agents", "running"] in [i["key"] for i in meta["inputs"]]
    program = torch.export.load(tmp_path / "policy.pt2").module()
    inputs = [torch.randn(2, *i["shape"]).to(getattr(torch, i["dtype"])) for i in meta["inputs"]]
    running = policy.in_keys.index(("agents", "running"))
    inputs[running] = torch.tensor([[True] * robots, [True] + [False] * (robots - 1)])
    state = torch.randn(2, robots, 16)
    action, after = program(*inputs, state, torch.zeros(2, dtype=torch.bool))
    assert action.shape[:2] == (2, robots) and after.shape == (2, robots, 16)
    # a robot that does not run starts its step from zeros: its next state is the one
    # a zero state gives, whatever was handed in
    again = program(*inputs, torch.zeros(2, robots, 16), torch.zeros(2, dtype=torch.bool))[1]
    assert torch.equal(after[1, 1:], again[1, 1:])
    assert not torch.equal(after[0], again[0])
