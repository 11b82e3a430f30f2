"""Kill a run after a checkpoint, resume it, and check that it continues from where it was."""

import subprocess
import sys
import time

import pytest
import torch

from gpurl.train import build, load_config

ARGS = [
    "experiment=sac_pendulum",
    "agent.hidden=[16,16]",
    "trainer.total_frames=1000000",
    "trainer.frames_per_batch=4",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.init_random_frames=40",
    "trainer.batch_size=16",
    "trainer.buffer_size=5000",
    "trainer.checkpoint_interval=200",
    "trainer.eval_interval=1000000",
    "trainer.log_interval=100",
    "trainer.progress=false",
    "logger=none",
]


def wait_for_checkpoint(path, min_frames, proc, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if path.is_file():
            state = torch.load(path, weights_only=True)
            if state["frames"] >= min_frames:
                return
        time.sleep(0.5)
    raise TimeoutError("no checkpoint in time")


def tensors_equal(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


@pytest.mark.slow  # subprocesses or whole runs: seconds each (CI runs slow tests)
def test_killed_run_resumes_where_its_checkpoint_left_off(tmp_path):
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpurl.train", *ARGS, f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ckpt = run_dir / "checkpoints" / "last.pt"
    try:
        wait_for_checkpoint(ckpt, 400, proc)
    finally:
        proc.kill()
        proc.wait()
    saved = torch.load(ckpt, weights_only=True)  # checkpoints load without pickled code
    frames = saved["frames"]

    trainer = build(load_config([*ARGS, f"trainer.resume={run_dir}"]), tmp_path / "resumed")
    agent = trainer.agent
    assert trainer.frames == frames
    assert trainer.progress.update_count == saved["progress"]["update_count"] > 0
    for name, module in agent.modules().items():  # networks, target networks, policy
        assert tensors_equal(module.state_dict(), saved["agent"]["modules"][name]), name
    assert trainer.progress.frames.item() == frames
    for name, opt in agent.optimizers().items():
        state = opt.state_dict()["state"]
        assert state and tensors_equal(state, saved["agent"]["optimizers"][name]["state"]), name
    assert len(trainer.buffer) == frames
    assert tensors_equal(trainer.buffer.data, saved["buffer"]["data"])

    trainer.iteration()
    assert trainer.frames == frames + 4
    assert len(trainer.buffer) == frames + 4
    assert trainer.progress.update_count == saved["progress"]["update_count"] + 4
    assert trainer.progress.frames.item() == frames + 4


class Recorder:
    """A logger that keeps every scalar it is handed."""

    def __init__(self):
        self.rows = []

    def log_scalar(self, name, value, step):
        self.rows.append((name, value, step))


def train_to(overrides, total, run_dir, resume=None):
    cfg = load_config(
        [*overrides, f"trainer.total_frames={total}", "logger=none"]
        + ([f"trainer.resume={resume}"] if resume else [])
    )
    trainer = build(cfg, run_dir)
    trainer.logger = Recorder()
    summary = trainer.train()
    return trainer, summary


# a small on-policy run on CartPole, the base of the on-policy cases below
SMALL_ON_POLICY = [
    "env=cartpole",
    "agent.hidden=[32]",
    "agent.anneal_lr=false",  # fixed: the halves differ in total_frames
    "env.num_envs=4",
    "env.eval_envs=2",
    "trainer.rollout_steps=16",
    "agent.minibatches=2",
]

# a recurrent Q-learner's sequence replay, prioritized, on CartPole
SEQUENCES = [
    "env=cartpole",
    "agent.recurrent_hidden=16",
    "agent.hidden=[32]",
    "agent.sequence_length=8",
    "agent.burn_in=4",
    "agent.sequence_overlap=4",
    "agent.n_step=3",
    "agent.prioritized=true",
    "agent.priority_beta_frames=1000",  # fixed: the halves differ in total_frames
    "env.num_envs=4",
    "trainer.frames_per_batch=16",
    "trainer.utd=0.25",
    "trainer.batch_size=8",
    "trainer.init_random_frames=64",
]

MINATAR_DQN = [
    "experiment=minatar_breakout_dqn",
    "trainer.batch_size=8",
    "trainer.buffer_size=1000",
    "trainer.init_random_frames=64",
    "agent.epsilon_frames=200",
    "agent.target_update_interval=50",
    "env.eval_envs=2",
]
EXACT_CASES = {
    "dqn_cartpole": [
        "env=cartpole",
        "env.num_envs=4",
        "agent.hidden=[32,32]",
        "trainer.batch_size=32",
        "trainer.init_random_frames=64",
    ],
    "dqn_cartpole_prioritized_nstep": [
        "env=cartpole",
        "env.num_envs=4",
        "agent.hidden=[32,32]",
        "agent.prioritized=true",
        "agent.n_step=3",
        "agent.priority_beta_frames=1000",  # fixed: the halves differ in total_frames
        "trainer.batch_size=32",
        "trainer.init_random_frames=64",
    ],
    "ddpg_pendulum_ou": [
        "experiment=ddpg_pendulum",
        "agent.hidden=[32,32]",
        "agent.noise=ou",
        "env.num_envs=2",
        "trainer.batch_size=32",
        "trainer.init_random_frames=64",
        "env.eval_envs=2",
    ],
    # the running observation statistics carry across the checkpoint
    "ppo_cartpole_normalize": ["agent=ppo", "agent.encoder.normalize=true", *SMALL_ON_POLICY],
    # the return statistics and each env's running return carry across the checkpoint
    "ppo_cartpole_normalize_reward": [
        "agent=ppo",
        "agent.normalize_reward=true",
        *SMALL_ON_POLICY,
    ],
    # the acting hidden state [num_envs, 2 x hidden] carries across the checkpoint
    "ppo_cartpole_lstm": [
        "agent=ppo",
        "agent.recurrent=lstm",
        "agent.recurrent_hidden=16",
        *SMALL_ON_POLICY,
    ],
    "pqn_cartpole_gru": [
        "agent=pqn",
        "agent.recurrent=gru",
        "agent.recurrent_hidden=16",
        *SMALL_ON_POLICY,
    ],
    # one hidden state per robot [num_envs, robots, 2 x hidden], stopped robots' zeroed
    "ippo_marinenav_lstm": [
        "env=marinenav",
        "agent=ppo",
        "agent.recurrent=lstm",
        "agent.recurrent_hidden=8",
        "agent.hidden=[16]",
        "agent.anneal_lr=false",  # fixed: the halves differ in total_frames
        "env.num_envs=4",
        "env.max_episode_steps=20",
        "trainer.rollout_steps=8",
        "agent.epochs=2",
        "agent.minibatches=2",
    ],
    # recurrent DQN: the acting hidden state, the sequence replay and its priorities
    "dqn_cartpole_lstm_prioritized": ["agent=dqn", "agent.recurrent=lstm", *SEQUENCES],
    # recurrent IQN: the same, under the quantile head's own draws
    "iqn_cartpole_gru_prioritized": ["agent=iqn", "agent.recurrent=gru", *SEQUENCES],
    # MinAtar: the game state, sticky actions' and difficulty ramping's draws, through
    # the preset's compiled env step (compile.env=true)
    "dqn_minatar_breakout": MINATAR_DQN,
    # the MinAtar paper's RMSprop over two stacked runs: its averages carry across
    "dqn_minatar_breakout_rmsprop_2_seeds": [
        *MINATAR_DQN,
        "agent.optimizer=rmsprop",
        "trainer.num_seeds=2",
    ],
    "sac_marinenav": [
        "env=marinenav_continuous",
        "agent=sac",
        "agent.hidden=[32,32]",
        "env.num_envs=4",
        "env.max_episode_steps=40",
        "trainer.batch_size=32",
        "trainer.init_random_frames=64",
    ],
}


@pytest.mark.slow  # subprocesses or whole runs: seconds each (CI runs slow tests)
@pytest.mark.parametrize("case", sorted(EXACT_CASES))
def test_resumed_run_equals_the_uninterrupted_run_bitwise(tmp_path, case):
    """Stop after a checkpoint, resume in a fresh trainer: frames, logged losses and
    returns, evaluations and final weights equal the run that never stopped."""
    args = EXACT_CASES[case] + [
        "trainer.progress=false",
        "trainer.log_interval=64",
        "trainer.eval_interval=128",
        "trainer.checkpoint_interval=128",
        "seed=3",
    ]
    whole, whole_summary = train_to(args, 256, tmp_path / "whole")
    first, _ = train_to(args, 128, tmp_path / "first")
    second, second_summary = train_to(args, 256, tmp_path / "second", resume=tmp_path / "first")
    assert second.frames == whole.frames == 256
    # every logged scalar (losses, training returns, evaluations) but the wall-clock fps
    resumed_rows = _without_fps(first.logger.rows + second.logger.rows)
    assert resumed_rows == _without_fps(whole.logger.rows)
    assert any("loss" in name and step > 128 for name, _, step in resumed_rows)
    assert second_summary["eval_history"] == whole_summary["eval_history"]
    # a group's summary has its runs' (under "runs") and no eval_metrics of its own
    assert second_summary.get("eval_metrics") == whole_summary.get("eval_metrics")
    assert second_summary.get("runs") == whole_summary.get("runs")
    for name, module in whole.agent.modules().items():
        assert tensors_equal(module.state_dict(), second.agent.modules()[name].state_dict()), name


def _without_fps(rows):
    return [r for r in rows if not r[0].endswith("fps")]


def test_a_resume_names_the_settings_that_differ_from_the_checkpoints(tmp_path, capsys):
    """The checkpoint holds the run's settings; resuming with others (a new lr, a preset
    edited since) says which, in one warning line; a longer budget is not one of them."""
    base = ["agent=ppo", *SMALL_ON_POLICY, "trainer.checkpoint_interval=64", "agent.lr=0.001"]
    train_to(base, 64, tmp_path / "a")
    capsys.readouterr()
    train_to(base, 128, tmp_path / "b", resume=tmp_path / "a")  # only the budget grew
    assert "warning" not in capsys.readouterr().err
    train_to([*base, "agent.lr=0.002", "seed=3"], 128, tmp_path / "c", resume=tmp_path / "a")
    err = capsys.readouterr().err
    assert "resuming with 2 setting(s) other than the checkpoint's" in err
    assert "agent.lr 0.001 -> 0.002" in err and "seed 0 -> 3" in err
