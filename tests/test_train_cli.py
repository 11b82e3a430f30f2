"""The command line a researcher uses: a run leaves its artefacts; bad input stops with one
clear line and a non-zero exit; multirun sweeps with the basic and joblib launchers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpurl.errors import ConfigError
from gpurl.train import build, load_config

TINY = [
    "agent.hidden=[16,16]",
    "trainer.total_frames=64",
    "trainer.frames_per_batch=8",
    "trainer.init_random_frames=16",
    "trainer.batch_size=8",
    "trainer.eval_interval=32",
    "trainer.log_interval=16",
    "trainer.checkpoint_interval=32",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.progress=false",
]


def train(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "gpurl.train", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # a `python -m gpurl.train` process: seconds
def test_a_run_leaves_logs_checkpoint_plot_and_summary(tmp_path):
    run_dir = tmp_path / "run"
    out = train(*TINY, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary_path = Path(out.stdout.strip().splitlines()[-1])
    assert summary_path == run_dir / "summary.json"
    summary = json.loads(summary_path.read_text())
    for key in ("frames", "eval_return", "wall_time_s", "env", "agent", "seed"):
        assert key in summary
    assert summary["frames"] == 64 and summary["env"] == "cartpole" and summary["agent"] == "dqn"
    assert len(summary["eval_history"]) == 2
    assert (run_dir / "checkpoints" / "last.pt").is_file()
    png = (run_dir / "learning_curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    scalars = list((run_dir / "logs").rglob("*.csv"))
    assert any(p.name == "return.csv" and p.parent.name == "eval" for p in scalars)
    assert (run_dir / ".hydra" / "config.yaml").is_file()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env=pendulum", "agent=dqn"], "agent=dqn needs a discrete action space"),
        (["env=cartpole", "agent=sac"], "agent=sac needs a continuous"),
        (["env=cartpole", "agent=ddpg"], "agent=ddpg needs a continuous"),
        (["env=gym", "env.id=NoSuchTask-v0"], "unknown Gymnasium env id"),
        (["env.num_envs=0"], "num_envs must be >= 1"),
        (["trainer.resume=/nonexistent/run"], "checkpoint not found"),
        (["trainer.frames_per_batch=3", "env.num_envs=2"], "not a multiple"),
        (["env=packing", "env.resolution=32", "env.pool_size=8"], "multi-part discrete"),
        (["env=marinenav", "env.num_envs=2", "env.eval_envs=2"], "fixed set of 60 episodes"),
        (
            ["env=marinenav", "env.num_envs=2", "env.curriculum=[{from_step:5}]"],
            r"env.curriculum\[0\] needs exactly the keys",
        ),
        (["device=cuda:7"] if not __import__("torch").cuda.is_available() else [], "CUDA"),
        (["env=cartpole", "agent=td3"], "agent=td3 needs a continuous"),
        (["env=packing", "agent=sac", "env.resolution=32", "env.pool_size=8"], "multi-part"),
        (["env=marinenav", "agent=sac", "env.eval_envs=60"], "agent=sac needs a continuous"),
        (["env=marinenav_continuous", "agent=dqn", "env.eval_envs=60"], "needs a discrete"),
        (["trainer.total_frames=0"], "trainer.total_frames must be >= 1"),
        (["trainer.batch_size=0"], "trainer.batch_size must be >= 1"),
        (["trainer.buffer_size=0"], "trainer.buffer_size must be >= 1"),
        (["env=pendulum", "agent=ddpg", "agent.noise=pink"], "agent.noise=pink is unknown"),
        (["agent.n_step=0"], "agent.n_step must be >= 1"),
        (["device=tpu"], "unknown device 'tpu'"),
        (["logger.name=bogus"], "unknown logger 'bogus'"),
        (["env.name=bogus"], "unknown env 'bogus'"),
        (["agent.name=bogus"], "unknown agent 'bogus'"),
        (["env=cartpole", "+env.gravity=3"], "unknown config key 'env.gravity' for env=cartpole"),
        (["env=pendulum", "agent=iqn"], "agent=iqn needs a discrete action space"),
        (["env=cartpole", "agent=acqin"], "agent=acqin needs a continuous"),
        (["compile.cudagraphs=true", "device=cpu"], "compile.cudagraphs needs a CUDA device"),
        (["env=gym", "env.id=CartPole-v1", "compile.env=true"], "no pure lean step"),
    ],
)
def test_bad_input_is_a_config_error_naming_the_fix(tmp_path, overrides, message):
    if not overrides:
        pytest.skip("CUDA present: no bad device to name")
    with pytest.raises(ConfigError, match=message):
        build(load_config([*TINY, "logger=none", *overrides]), tmp_path)


def test_corrupt_checkpoint_is_a_config_error(tmp_path):
    bad = tmp_path / "last.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="damaged"):
        build(load_config([*TINY, "logger=none", f"trainer.resume={bad}"]), tmp_path)


@pytest.mark.slow  # subprocesses or whole runs: seconds each (CI runs slow tests)
@pytest.mark.parametrize(
    "args, fragment",
    [
        (["env=pendulum", "agent=dqn"], "use agent=sac, td3 or ddpg"),
        (["trainer.resume=nowhere.pt"], "checkpoint not found"),
        (["trainer.no_such_key=1"], "unknown config key 'trainer.no_such_key'"),
        (["trainer.total_frame=10"], "did you mean trainer.total_frames?"),
    ],
)
def test_cli_errors_are_one_line_without_traceback(tmp_path, args, fragment):
    run_dir = tmp_path / "run"
    out = train(*TINY, *args, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert out.returncode != 0
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("gpurl: error")]
    assert len(errors) == 1
    # nothing that could pass for a run: the run directory holds the error alone, if any
    if run_dir.exists():
        assert [p.name for p in run_dir.iterdir()] == ["error.txt"]
        assert fragment in (run_dir / "error.txt").read_text()


@pytest.mark.slow  # subprocesses or whole runs: seconds each (CI runs slow tests)
@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_multirun_sweeps_seeds(tmp_path, launcher):
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=s${seed}",
        "logger=none",
    ]
    if launcher == "joblib":
        args += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    out = train(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seeds = sorted(
        json.loads((sweep / f"s{s}" / "summary.json").read_text())["seed"] for s in (0, 1)
    )
    assert seeds == [0, 1]


@pytest.mark.parametrize(
    "overrides",
    [
        ["env=gym", "env.id=CartPole-v1", "agent=dqn"],
        ["env=gym", "env.id=Pendulum-v1", "agent=td3"],
        ["env=pendulum", "agent=sac", "logger=tensorboard"],
    ],
)
def test_gymnasium_tasks_and_tensorboard_train_in_process(tmp_path, overrides):
    summary = build(load_config([*TINY, *overrides]), tmp_path).train()
    assert summary["frames"] == 64 and len(summary["eval_history"]) == 2
    if "logger=tensorboard" in overrides:
        assert list((tmp_path / "logs").rglob("events.out.tfevents.*"))


@pytest.mark.slow  # a whole run with the 60-episode evaluation, twice
@pytest.mark.parametrize(
    "overrides", [["env=marinenav", "agent=dqn"], ["env=marinenav_continuous", "agent=sac"]]
)
def test_marinenav_runs_end_to_end_with_the_fixed_set_metrics_in_the_summary(tmp_path, overrides):
    from gpurl.train import run

    cfg = load_config(
        [
            *overrides,
            "device=cpu",
            "env.num_envs=4",
            "env.max_episode_steps=20",
            "agent.hidden=[32,32]",
            "trainer.total_frames=64",
            "trainer.init_random_frames=32",
            "trainer.batch_size=16",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    summary = json.loads(run(cfg, tmp_path).read_text())
    metrics = summary["eval_metrics"]
    for key in ("success", "collisions", "timeouts", "return"):
        assert key in metrics and "stage5/" + key.replace("return", "success") in metrics
    assert 0.0 <= metrics["success"] <= 1.0
    # travel time and energy are means over successful episodes: present when any is
    assert ("travel_time" in metrics) == ("energy" in metrics) == (metrics["success"] > 0)
    assert summary["frames"] == 64 and summary["commit"] is not None


@pytest.mark.parametrize(
    "env_id",
    # CartPole's greedy evaluation episodes run to 500 steps in Python: slow
    [pytest.param("CartPole-v1", marks=pytest.mark.slow), "Pendulum-v1"],
)
def test_ppo_trains_on_gymnasium_tasks(tmp_path, env_id):
    """The on-policy trainer on TorchRL's Collector (Gymnasium envs step on the CPU)."""
    cfg = load_config(
        [
            "env=gym",
            f"env.id={env_id}",
            "env.num_envs=2",
            "env.eval_envs=2",
            "agent=ppo",
            "agent.hidden=[16,16]",
            "trainer.total_frames=128",
            "trainer.rollout_steps=32",
            "trainer.eval_interval=64",
            "logger=none",
            "trainer.progress=false",
            "device=cpu",
        ]
    )
    tr = build(cfg, tmp_path)
    summary = tr.train()
    assert summary["frames"] == 128 and len(summary["eval_history"]) == 2
    assert tr.progress.update_count == 2 * tr.epochs * tr.minibatches


def test_the_task_function_pickles_by_value():
    """`python -m gpurl.train -m` runs gpurl.train as __main__, so joblib and Ray pickle
    its functions by value, with the modules their code names: a name that completes a
    torch submodule holding unpicklable state (torch.distributed.config, reached from
    `distributed` and `config`) breaks every multirun. The slow sweep tests launch them."""
    cloudpickle = pytest.importorskip("joblib.externals.cloudpickle")
    import gpurl.train

    cloudpickle.register_pickle_by_value(gpurl.train)
    try:
        assert cloudpickle.dumps(gpurl.train.main)
    finally:
        cloudpickle.unregister_pickle_by_value(gpurl.train)
