"""An Optuna sweep from the command line: `python -m gpurl.train` returns the final
evaluation return, which hydra-optuna-sweeper (the `launchers` extra) maximises."""

import json
import subprocess
import sys

import pytest
import yaml


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
        f"hydra.sweep.dir={sweep}",
    ]
    out = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
