"""N runs of one process (trainer.num_seeds, core/runs.py) as N runs: each run's
evaluation, its summary and curve in the layout N separate runs would have, and one
figure of all of them.

    run_dir/summary.json               the group: every run's final evaluation, their
                                       IQM and mean with 95% stratified-bootstrap
                                       intervals (gpurl.utils.aggregate)
    run_dir/seeds_curve.png            every run's evaluation curve, thin, and the IQM
                                       over runs with its interval band
    run_dir/seeds/seed_S/summary.json  run S alone, as `seed=S` would have written it,
    run_dir/seeds/seed_S/.hydra/overrides.yaml  with its overrides (seed=S and its own
                                       per-seed hyperparameters), so
                                       tools/sweep_summary.py reads them as it reads
                                       a sweep's runs
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from gpurl.core.runs import unstack_module
from gpurl.trainers.evaluation import evaluate_by_run, evaluate_protocol
from gpurl.trainers.reporting import plot_learning_curve, write_summary
from gpurl.utils.aggregate import curve_band


def evaluate_runs(eval_envs, policy, runs: int) -> list[dict[str, float]]:
    """Each run's greedy evaluation. One env (N x eval_envs copies): the N runs in one
    pass of the stacked policy, run k on the k-th slice (EnvHooks.evaluation_by_run).
    N envs: run k alone on env k (seeded seed + k, as run k alone would be). Either
    way no run's evaluation depends on another's policy or shares its episodes."""
    if len(eval_envs) == 1 and runs > 1:
        return evaluate_by_run(eval_envs[0], policy, runs)
    return [evaluate_protocol(env, unstack_module(policy, k)) for k, env in enumerate(eval_envs)]


def mean_metrics(per_run: list[dict[str, float]]) -> dict[str, float]:
    """The runs' metrics averaged, key by key (the group's progress-bar figure)."""
    return {k: float(np.mean([m[k] for m in per_run])) for k in per_run[0]}


def run_overrides(
    overrides: list[str], seed: int, hyper: dict[str, float], schedule: str | None = None
) -> list[str]:
    """A group's Hydra overrides as run `seed` alone would have had them: its own
    hyperparameters, or under PBT the schedule its weights were trained under (its
    summary.json, which trainer.hyper_schedule replays)."""
    drop = ("seed", "trainer.num_seeds", "trainer.per_seed", "trainer.pbt")
    own = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in drop]
    own = [o for o in own if not o.split("=", 1)[0].lstrip("+~").startswith(_GROUP_KEYS)]
    if schedule is not None:
        return [*own, f"seed={seed}", f"trainer.hyper_schedule={schedule}"]
    return [*own, f"seed={seed}", *(f"agent.{k}={v}" for k, v in hyper.items())]


_GROUP_KEYS = ("trainer.per_seed.", "trainer.pbt.")


# what the group's summary holds of all runs, left out of each run's own
GROUP_ONLY = ("aggregate", "runs", "seeds", "num_seeds", "eval_returns", "per_seed")


def write_runs(run_dir: Path, group: dict, runs: list[dict]) -> list[Path]:
    """Each run's summary.json and .hydra/overrides.yaml under run_dir/seeds/."""
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(overrides_file.read_text()) or [] if overrides_file.is_file() else []
    paths = []
    for run in runs:
        out = run_dir / "seeds" / f"seed_{run['seed']}"
        (out / ".hydra").mkdir(parents=True, exist_ok=True)
        schedule = str(out / "summary.json") if "hyper_schedule" in run else None
        (out / ".hydra" / "overrides.yaml").write_text(
            yaml.safe_dump(run_overrides(overrides, run["seed"], run.get("per_seed", {}), schedule))
        )
        curve = out / "learning_curve.png"
        title = f"{run.get('agent', '')} on {run.get('env', '')}, seed {run['seed']}"
        plot_learning_curve(curve, title, run["eval_history"], run.pop("train_history"))
        record = {k: v for k, v in group.items() if k not in GROUP_ONLY}
        record.update(run, learning_curve=str(curve), run_dir=str(out), group_dir=str(run_dir))
        paths.append(write_summary(out / "summary.json", record))
    return paths


def plot_seeds(path: Path, title: str, histories: list[list[tuple[int, float]]]) -> Path:
    """Every run's evaluation curve (thin) and the IQM over runs with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for history in histories:
        if history:
            f, r = zip(*history, strict=True)
            ax.plot(f, r, color="tab:gray", alpha=0.35, lw=0.8)
    if len(histories) > 1:
        band = curve_band([np.array(h, dtype=float) for h in histories])
        f = band["frames"]
        ax.fill_between(f, band["ci_low"], band["ci_high"], color="tab:red", alpha=0.2)
        ax.plot(f, band["iqm"], color="tab:red", lw=2, label=f"IQM of {len(histories)} runs")
        ax.legend(loc="lower right")
    ax.set_xlabel("frames (per run)")
    ax.set_ylabel("evaluation return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
