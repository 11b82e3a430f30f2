"""Population-based training (trainer.pbt) against fixed hyperparameters and against Ray
Tune's PopulationBasedTraining, at equal frames per run. One JSON record per side.

    python tools/bench_pbt.py --task pqn_cartpole --sides fixed pbt ray \\
        --out docs/bench/pbt/pbt_pqn_cartpole_cpu.jsonl
    python tools/bench_pbt.py --task sac_pendulum --sides fixed pbt
    python tools/bench_pbt.py --task pqn_minatar_breakout --sides fixed pbt --cores 1

Sides (R = --runs, 16 by default; C = --cores, 2 by default):
    fixed   one gpurl process, trainer.num_seeds=R, each run with its own values drawn
            from the task's space (trainer.per_seed), kept all run long
    pbt     the same process with trainer.pbt on, starting from the same draws
    ray     Ray Tune's PopulationBasedTraining driving R gpurl runs, one trial each
            (threads=1, C trials at a time on C CPUs, actors reused), from the same
            draws, over the same space, interval, quantile (0.25) and resample
            probability (0.25), synchronous (synch=True) as gpurl's steps are; a trial
            reports each evaluation and checkpoints there (what Ray's exploit restores),
            and a restored trial takes its explored values over its parent's
            (Runs.set). Ray perturbs without bounds: a custom_explore_fn keeps values
            in their range, as gpurl does. Needs `pip install "ray[tune]"` (the `ray`
            extra).

gpurl's sides run with threads=C. wall_s is the whole command's wall clock (start-up
and, for Ray, its own processes included: what a researcher waits). Each record has
every run's final evaluation and their IQM and mean with 95% bootstrap intervals.

    python tools/bench_pbt.py --summarize docs/bench/pbt/pbt_pqn_cartpole_cpu_*.jsonl

pools the records' populations (one record per side and population seed; a later record
of the same side and seed replaces an earlier one) into one JSON record: per side, every
run's final return over all populations, their IQM and mean with 95% intervals from a
two-level bootstrap (populations resampled, then runs within each), the runs at the
side's best score and the total wall time; per pair of sides on the same populations,
the IQM difference with its interval (populations resampled together) and the wall-time
ratio, in all and per population.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpurl.core.config import plain_keys  # noqa: E402
from gpurl.trainers.pbt import initial_values  # noqa: E402
from gpurl.utils.aggregate import aggregate, iqm  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

QUIET = ["logger=none", "trainer.progress=false", "hydra/job_logging=disabled"]

# each task: its preset, what it sets beside it, and the space searched (bad values in)
TASKS = {
    "pqn_cartpole": {
        "overrides": ["experiment=pqn_cartpole", "agent.hidden=[64,64]"],
        "space": {
            "lr": {"low": 1e-5, "high": 1e-1, "log": True},
            "gamma": {"low": 0.8, "high": 0.999},
        },
        "interval": 10240,
    },
    "pqn_minatar_breakout": {  # the preset at a twentieth of its 10M frames per run
        "overrides": [
            "experiment=minatar_breakout_pqn",
            "trainer.total_frames=499712",  # 122 rollouts of 32 x 128
            "agent.epsilon_frames=50000",  # a tenth of the run, as in the preset
            "trainer.eval_interval=98304",
            "env.eval_envs=32",
        ],
        "space": {
            "lr": {"low": 1e-5, "high": 1e-2, "log": True},
            "gamma": {"low": 0.8, "high": 0.999},
        },
        "interval": 98304,
    },
    "sac_pendulum": {
        "overrides": ["experiment=sac_pendulum"],
        "space": {  # in the order trainer.pbt.space declares its keys (the draw's order)
            "actor_lr": {"low": 1e-5, "high": 1e-1, "log": True},
            "critic_lr": {"low": 1e-5, "high": 1e-1, "log": True},
        },
        "interval": 2000,
    },
}


def space_overrides(space: dict) -> list[str]:
    def mapping(spec):
        return "{" + ",".join(f"{k}:{str(v).lower()}" for k, v in spec.items()) + "}"

    return [f"trainer.pbt.space.{k}={mapping(v)}" for k, v in space.items()]


def draws(task: dict, runs: int, seed: int) -> dict[str, list[float]]:
    """The R runs' first values: trainer.pbt's own draw, which every side starts from."""
    from gpurl.train import load_config

    agent = load_config(task["overrides"]).agent
    return initial_values(plain_keys({"space": task["space"]}), agent, runs, seed, {})


def gpurl_side(side: str, task: dict, runs: int, seed: int, cores: int, extra) -> dict:
    start = draws(task, runs, seed)
    per_seed = [f"trainer.per_seed.{k}=[{','.join(repr(x) for x in v)}]" for k, v in start.items()]
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            *task["overrides"],
            f"trainer.num_seeds={runs}",
            f"seed={seed}",
            f"threads={cores}",
            *per_seed,
            *QUIET,
            *extra,
            f"hydra.run.dir={tmp}/run",
        ]
        if side == "pbt":
            args += [
                "trainer.pbt.enabled=true",
                f"trainer.pbt.interval_frames={task['interval']}",
                *space_overrides(task["space"]),
            ]
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gpurl.train", *args], check=True, cwd=ROOT)
        wall = time.perf_counter() - began
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    record = {
        "finals": summary["eval_returns"],
        "frames_per_run": summary["frames"],
        "wall_s": round(wall, 2),
        "command": ["python", "-m", "gpurl.train", *[a for a in args if "hydra.run" not in a]],
    }
    if side == "pbt":
        pbt = summary["pbt"]
        record["pbt"] = {k: pbt[k] for k in ("best_run", "best_fitness", "schedule", "copies")}
    return record


def ray_trial(config: dict) -> None:
    """One gpurl run as a Ray Tune trial: build it (its first values through
    trainer.hyper_schedule, which makes them per-run values Runs.set can change), take
    a checkpoint Ray hands over (PBT's exploit) and the explored values over it, then
    report every evaluation with a checkpoint."""
    from ray import tune

    from gpurl.train import build, load_config

    keys = config["keys"]
    run_dir = Path(tempfile.mkdtemp(prefix="gpurl_ray_"))
    start = run_dir / "start.json"
    start.write_text(json.dumps([[0, {k: config[k] for k in keys}]]))
    cfg = load_config(
        [
            *config["overrides"],
            f"seed={config['seed']}",
            f"trainer.hyper_schedule={start}",
            "threads=1",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, run_dir)
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as where:
            trainer.resume(Path(where) / "last.pt")
        for k in keys:
            trainer.runs.set(k, 0, config[k])
    total, every = int(cfg.trainer.total_frames), int(cfg.trainer.eval_interval)
    while trainer.frames < total:
        until = min((trainer.frames // every + 1) * every, total)
        while trainer.frames < until:
            trainer.iteration()
        ret = trainer.evaluate()
        saved = trainer.save()
        tune.report(
            {"return": ret, "frames": trainer.frames},
            checkpoint=tune.Checkpoint.from_directory(str(saved.parent)),
        )


def ray_side(task: dict, runs: int, seed: int, cores: int, extra) -> dict:
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    start = draws(task, runs, seed)
    keys = list(task["space"])

    def domain(spec):
        if "choices" in spec:
            return list(spec["choices"])
        if spec.get("log"):
            return tune.loguniform(spec["low"], spec["high"])
        return tune.uniform(spec["low"], spec["high"])

    def first(key):
        return tune.sample_from(lambda config, key=key: start[key][config["seed"] - seed])

    began = time.perf_counter()
    ray.init(
        num_cpus=cores,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )

    def clip(config):  # Ray perturbs without bounds; gpurl keeps values in their range
        for k in keys:
            spec = task["space"][k]
            if "low" in spec:
                config[k] = min(max(config[k], spec["low"]), spec["high"])
        return config

    scheduler = PopulationBasedTraining(
        time_attr="frames",
        metric="return",
        mode="max",
        perturbation_interval=task["interval"],
        hyperparam_mutations={k: domain(task["space"][k]) for k in keys},
        quantile_fraction=0.25,
        resample_probability=0.25,
        custom_explore_fn=clip,
        # steps when every trial has reached the interval, as gpurl's are: asynchronous
        # PBT clones trials that are ahead back to ones behind, over and over, once
        # many trials tie at CartPole's maximum return
        synch=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        tuner = tune.Tuner(
            tune.with_resources(ray_trial, {"cpu": 1}),
            param_space={
                "seed": tune.grid_search([seed + k for k in range(runs)]),
                "overrides": [*task["overrides"], *extra],
                "keys": keys,
                **{k: first(k) for k in keys},
            },
            tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
            run_config=tune.RunConfig(
                storage_path=tmp,
                verbose=0,
                checkpoint_config=tune.CheckpointConfig(num_to_keep=4),
            ),
        )
        results = tuner.fit()
        finals = [r.metrics["return"] for r in results]
        frames = [r.metrics["frames"] for r in results]
    ray.shutdown()
    wall = time.perf_counter() - began
    return {
        "finals": finals,
        "frames_per_run": min(frames),
        "wall_s": round(wall, 2),
        "ray": ray.__version__,
    }


def _pooled_iqm(finals: dict, seeds: list, index: np.ndarray, rng) -> np.ndarray:
    """The IQM of all runs of the populations `index` [reps, P] picks, each population's
    runs resampled with replacement: [reps]."""
    table = np.stack([finals[s] for s in seeds])  # [populations, runs]
    reps, pops = index.shape
    runs = table.shape[1]
    picked = table[index]  # [reps, P, runs]
    within = rng.integers(0, runs, size=(reps, pops, runs))
    sample = np.take_along_axis(picked, within, axis=2).reshape(reps, -1)
    return iqm(sample[..., None])


def summarize(records: list[dict], reps: int = 2000, seed: int = 0) -> dict:
    """The populations of `records` pooled per side, and each pair of sides compared on
    the populations they share (the module docstring)."""
    latest: dict[tuple, dict] = {}
    for r in records:
        latest[(r["side"], r["seed"])] = r
    sides = sorted({side for side, _ in latest})
    finals = {
        side: {s: np.asarray(r["finals"], float) for (d, s), r in latest.items() if d == side}
        for side in sides
    }
    walls = {side: {s: r["wall_s"] for (d, s), r in latest.items() if d == side} for side in sides}
    tail = 2.5
    out = {"tool": "bench_pbt", "summary": True, "task": records[0]["task"]}
    # the inputs' provenance, each field one value or the list of distinct ones
    for key in ("commit", "date", "device", "device_name", "torch", "python", "torch_threads"):
        seen = list(dict.fromkeys(r[key] for r in latest.values() if key in r))
        if seen:
            out[key] = seen[0] if len(seen) == 1 else seen
    out["sides"] = {}
    for side in sides:
        seeds = sorted(finals[side])
        every = np.concatenate([finals[side][s] for s in seeds])
        rng = np.random.default_rng(seed)
        boot = _pooled_iqm(
            finals[side], seeds, rng.integers(0, len(seeds), (reps, len(seeds))), rng
        )
        out["sides"][side] = {
            "populations": seeds,
            "runs": int(every.size),
            "iqm": float(iqm(every[:, None])),
            "iqm_ci": [float(v) for v in np.percentile(boot, [tail, 100 - tail])],
            "mean": float(every.mean()),
            "at_best": int((every >= every.max()).sum()),
            "best": float(every.max()),
            "wall_s": round(sum(walls[side][s] for s in seeds), 2),
        }
    out["pairs"] = {}
    for a in sides:
        for b in sides:
            shared = sorted(set(finals[a]) & set(finals[b]))
            if a >= b or not shared:
                continue
            rng = np.random.default_rng(seed)
            index = rng.integers(0, len(shared), (reps, len(shared)))
            diff = _pooled_iqm(finals[a], shared, index, rng) - _pooled_iqm(
                finals[b], shared, index, rng
            )
            point = iqm(np.concatenate([finals[a][s] for s in shared])[:, None]) - iqm(
                np.concatenate([finals[b][s] for s in shared])[:, None]
            )
            ratio = {s: round(walls[b][s] / walls[a][s], 2) for s in shared}
            out["pairs"][f"{a} - {b}"] = {
                "populations": shared,
                "iqm_difference": float(point),
                "iqm_difference_ci": [float(v) for v in np.percentile(diff, [tail, 100 - tail])],
                "wall_ratio": round(
                    sum(walls[b][s] for s in shared) / sum(walls[a][s] for s in shared), 2
                ),
                "wall_ratio_per_population": ratio,
            }
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=sorted(TASKS), default="pqn_cartpole")
    p.add_argument("--sides", nargs="+", choices=("fixed", "pbt", "ray"), default=["fixed", "pbt"])
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--set", nargs="*", default=[], help="more overrides, every side")
    p.add_argument("--out", type=Path, help="append the records to this JSONL file")
    p.add_argument(
        "--summarize", nargs="+", type=Path, metavar="JSONL",
        help="pool these records' populations (no run): one summary record",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.summarize:
        records = [
            json.loads(line)
            for path in args.summarize
            for line in path.read_text().splitlines()
            if line.strip() and not json.loads(line).get("summary")
        ]
        emit(summarize(records), args.out)
        return
    task = TASKS[args.task]
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    for side in args.sides:
        if side == "ray":
            out = ray_side(task, args.runs, args.seed, args.cores, args.set)
        else:
            out = gpurl_side(side, task, args.runs, args.seed, args.cores, args.set)
        record = {
            "tool": "bench_pbt",
            "task": args.task,
            "side": side,
            "runs": args.runs,
            "seed": args.seed,
            "cores": args.cores,
            "space": task["space"],
            "interval_frames": task["interval"],
            "overrides": [*task["overrides"], *args.set],
            **out,
            "aggregate": aggregate(np.array(out["finals"], dtype=float)),
            "commit": gpurl_commit(),
            **environment_record("cpu"),
        }
        emit(record, args.out)


if __name__ == "__main__":
    main()
