"""One BenchMARL run on a VMAS task, driven by tools/bench_peers.py in BenchMARL's own venv.

    .venv-benchmarl/bin/python tools/peers/benchmarl_run.py '{"algorithm": "iql", ...}'

This file imports nothing of gpurl (BenchMARL 1.5.2 pins torchrl < 0.12, so it runs in a
venv of its own, without gpurl). bench_peers.py writes the spec (JSON, one argument)
from a gpurl preset: the scenario and its options, frames, env count, network sizes and
the algorithm's settings. This script builds BenchMARL's Experiment from it through
BenchMARL's Python API and prints one JSON line, prefixed with RESULT, holding:

    eval_history   [frames, return, training seconds] at each evaluation, the return
                   measured as gpurl measures it (below)
    train_s        the run's wall time less its evaluations
    wall_s         the run's wall time (Experiment.run, evaluations included)
    versions       torch, torchrl, tensordict, benchmarl, vmas, torchvision

The return is computed from BenchMARL's own evaluation rollouts (one vectorized rollout
of max_steps over `evaluation_episodes` envs, deterministic actions, each cut by
BenchMARL at its env's first done) by gpurl's protocol: each env's first episode, the
agents' rewards summed (gpurl's root reward), the mean over envs. BenchMARL's own logged
figure is the mean over agents rather than the sum: n_agents times smaller.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import sys
import time
from pathlib import Path

import torch
from benchmarl.algorithms import IppoConfig, IqlConfig, IsacConfig, MappoConfig
from benchmarl.environments import VmasTask
from benchmarl.experiment import Callback, Experiment, ExperimentConfig
from benchmarl.models.mlp import MlpConfig


class GpurlProtocol(Callback):
    """Keeps (frames, return by gpurl's protocol) at each of BenchMARL's evaluations."""

    def __init__(self):
        super().__init__()
        self.evaluations: list[tuple[int, float]] = []

    def on_evaluation_end(self, rollouts):
        # BenchMARL's logger has cut each env's rollout at its first done: the sum of
        # every agent's reward over it is that env's first-episode return, as gpurl's
        returns = [float(r.get(("next", "agents", "reward")).sum()) for r in rollouts]
        self.evaluations.append((self.experiment.total_frames, sum(returns) / len(returns)))


def main(spec: dict) -> dict:
    torch.set_num_threads(spec.get("threads", 1))

    algorithms = {"iql": IqlConfig, "isac": IsacConfig, "ippo": IppoConfig, "mappo": MappoConfig}
    algorithm = algorithms[spec["algorithm"]].get_from_yaml()
    algorithm = dataclasses.replace(algorithm, **spec.get("algorithm_config", {}))

    task = VmasTask[spec["scenario"].upper()].get_from_yaml()
    task.config.update(spec["scenario_config"])

    Path(spec["save_folder"]).mkdir(parents=True, exist_ok=True)
    config = dataclasses.replace(
        ExperimentConfig.get_from_yaml(),
        **spec["experiment_config"],
        loggers=[],
        create_json=True,  # BenchMARL evaluates only when a logger or its json is on
        render=False,
        checkpoint_interval=0,
        checkpoint_at_end=False,
        save_folder=spec["save_folder"],
    )

    activation = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[spec["activation"]]
    model = MlpConfig(
        num_cells=list(spec["hidden"]), layer_class=torch.nn.Linear, activation_class=activation
    )

    protocol = GpurlProtocol()
    experiment = Experiment(
        task=task,
        algorithm_config=algorithm,
        model_config=model,
        critic_model_config=model,
        seed=spec["seed"],
        config=config,
        callbacks=[protocol],
    )
    evaluate = experiment._evaluation_loop
    eval_seconds, train_seconds = [], []  # each evaluation's length; training time before it

    def timed_evaluation():
        began = time.perf_counter()
        train_seconds.append(began - start - sum(eval_seconds))
        evaluate()
        eval_seconds.append(time.perf_counter() - began)

    # BenchMARL has no hook before an evaluation: time it by wrapping the loop, so that
    # evaluations come out of the training time as gpurl's eval_log does
    experiment._evaluation_loop = timed_evaluation
    start = time.perf_counter()
    experiment.run()
    wall = time.perf_counter() - start
    history = [
        [frames, round(ret, 4), round(seconds, 2)]
        for (frames, ret), seconds in zip(protocol.evaluations, train_seconds, strict=True)
    ]
    train_s = wall - sum(eval_seconds)
    versions = {
        p: installed_version(p)
        for p in ("torch", "torchrl", "tensordict", "benchmarl", "vmas", "torchvision")
    }
    return {
        "eval_history": history,
        "eval_seconds": [round(s, 2) for s in eval_seconds],
        "frames": experiment.total_frames,
        "train_s": round(train_s, 2),
        "wall_s": round(wall, 2),
        "versions": versions,
        "torch_threads": torch.get_num_threads(),
    }


def installed_version(name: str) -> str:
    """A package's version, or "not installed" (torchvision: BenchMARL asks for it, its
    MLP runs never import it, and a machine may lack it)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(result), flush=True)
