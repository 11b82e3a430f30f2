"""Sweeps from the command line: an Optuna sweep (`python -m gpurl.train` returns the
final evaluation return, which hydra-optuna-sweeper maximises), and three-job sweeps
through gpurl's Ray and joblib launchers (the `launchers` extra) summarised by
tools/sweep_summary.py. Also how the gpurl_* launchers size jobs by `threads`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Tiny DQN CartPole runs: two evaluations, a few seconds each.
TINY = [
    "agent.hidden=[16,16]",
    "trainer.total_frames=400",
    "trainer.init_random_frames=200",
    "trainer.frames_per_batch=8",
    "trainer.batch_size=32",
    "trainer.eval_interval=200",
    "trainer.log_interval=200",
    "trainer.checkpoint_interval=400",
    "trainer.progress=false",
    "env.eval_envs=2",
    "logger=none",
]


def _train(cwd, args, timeout):
    """`python -m gpurl.train ARGS` in `cwd`, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "gpurl.train", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow  # subprocesses or whole runs: seconds each (CI runs slow tests)
def test_optuna_sweep_maximises_the_final_eval_return(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.sampler.seed=0",
        "agent.lr=tag(log,interval(1e-4,1e-3))",
        *TINY,
        f"hydra.sweep.dir={sweep}",
    ]
    out = _train(tmp_path, args, timeout=300)
    assert out.returncode == 0, out.stderr
    trials = {}
    for path in sorted(sweep.glob("*_dqn_cartpole_s0/summary.json")):
        summary = json.loads(path.read_text())
        trials[summary["config"]["agent"]["lr"]] = summary["eval_return"]
    assert len(trials) == 2 and all(1e-4 <= lr <= 1e-3 for lr in trials)
    results = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    best_lr = results["best_params"]["agent.lr"]
    assert best_lr in trials
    assert results["best_value"] == trials[best_lr] == max(trials.values())


def test_gpurl_launchers_reserve_threads_cores_per_run():
    """threads=2: joblib runs cores // 2 at once, Ray and Slurm reserve 2 CPUs per run."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from hydra import compose, initialize_config_module

    from gpurl.train import jobs_at_once

    def launcher(name):
        overrides = [f"hydra/launcher={name}", "threads=2"]
        return compose("config", overrides=overrides, return_hydra_config=True).hydra.launcher

    with initialize_config_module("gpurl.configs", version_base="1.3"):
        assert launcher("gpurl_joblib").n_jobs == jobs_at_once(2)
        ray = launcher("gpurl_ray").ray
        assert ray.remote.num_cpus == 2 and ray.init.address == "local"
        assert launcher("gpurl_submitit_slurm").cpus_per_task == 2


@pytest.mark.slow  # a three-job sweep, then the summary tool: about a minute
@pytest.mark.parametrize("launcher", ["gpurl_ray", "gpurl_joblib"])
def test_three_job_sweep_then_sweep_summary(tmp_path, launcher):
    if launcher == "gpurl_ray":
        pytest.importorskip("hydra_plugins.hydra_ray_launcher")
        pytest.importorskip("ray")
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    from gpurl.train import jobs_at_once

    sweep = tmp_path / "sweep"
    args = ["-m", f"hydra/launcher={launcher}", "seed=0,1,2", *TINY, f"hydra.sweep.dir={sweep}"]
    out = _train(tmp_path, args, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    if launcher == "gpurl_ray":
        assert "Ray Launcher is launching 3 jobs" in log and "(_run_job pid=" in log
    else:  # threads=1 (the default): one run per core
        assert f"Joblib.Parallel(n_jobs={jobs_at_once(1)}," in log
    summaries = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/summary.json"))]
    assert sorted(s["seed"] for s in summaries) == [0, 1, 2]
    assert all(s["frames"] == 400 and s["torch_threads"] == 1 for s in summaries)

    tool = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "sweep_summary.py"), str(sweep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tool.returncode == 0, tool.stderr
    (record,) = [json.loads(x) for x in (sweep / "sweep_summary.jsonl").open()]
    finals = {s["seed"]: s["eval_return"] for s in summaries}
    assert record["runs"] == 3 and record["seeds"] == [0, 1, 2]
    assert record["eval_returns"] == [finals[0], finals[1], finals[2]]
    trains = {s["seed"]: (s["final_train_return"] or {}).get("return") for s in summaries}
    assert record["train_returns"] == [trains[0], trains[1], trains[2]]
    assert record["config"] == "dqn on cartpole" and record["overrides"] == [
        o.replace("false", "False") for o in TINY
    ]
    assert "| dqn on cartpole | dqn | cartpole | 3 | 0,1,2 |" in tool.stdout
    assert (sweep / "sweep_summary.png").stat().st_size > 10_000
