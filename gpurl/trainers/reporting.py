"""What a run leaves behind: scalar logs (TorchRL loggers), a learning-curve PNG and
summary.json."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from gpurl.errors import ConfigError

LOGGERS = ("csv", "tensorboard", "wandb", "mlflow", "none")
# The package each logger imports, and the extra of pyproject.toml that installs it.
_NEEDS = {
    "tensorboard": ("tensorboard", "loggers"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
}


def make_logger(cfg, run_dir: Path, experiment_name: str):
    """A TorchRL logger writing under `run_dir`/logs, or None for logger=none.

    `cfg` is the logger config node (gpurl/configs/logger/*.yaml) or just its name; every
    key but `name` is an option of that logger. wandb and mlflow stay on this machine by
    default: wandb in offline mode, mlflow in a SQLite file.
    """
    options = _as_dict(cfg)
    kind = options.pop("name")
    if kind not in LOGGERS:
        raise ConfigError(f"unknown logger '{kind}': use logger={', logger='.join(LOGGERS)}")
    if kind == "none":
        return None
    module, extra = _NEEDS.get(kind, (None, None))
    if module is not None and importlib.util.find_spec(module) is None:
        raise ConfigError(f"logger={kind} needs the {module} package: pip install -e '.[{extra}]'")
    log_dir = run_dir / "logs"
    try:
        if kind == "wandb":
            return _wandb_logger(options, log_dir, experiment_name)
        if kind == "mlflow":
            return _mlflow_logger(options, log_dir, experiment_name)
        from torchrl.record.loggers import get_logger

        return get_logger(kind, logger_name=str(log_dir), experiment_name=experiment_name)
    except ImportError as err:
        raise ConfigError(
            f"logger={kind} could not import what it needs ({err}): "
            f"pip install -e '.[{extra or 'loggers'}]'"
        ) from err


def close_loggers() -> None:
    """End the wandb or MLflow run this process has open, so that it is complete on disk
    when the run prints its last line, and the next job of a multirun starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
        # finish() returns before wandb's service process has written the run's file;
        # teardown() waits for that process to exit (the next wandb.init starts another).
        wandb.teardown()
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None and mlflow.active_run() is not None:
        mlflow.end_run()


def _as_dict(cfg) -> dict:
    if isinstance(cfg, str):
        return {"name": cfg}
    if not isinstance(cfg, Mapping):
        from omegaconf import OmegaConf

        cfg = OmegaConf.to_container(cfg, resolve=True)
    return dict(cfg)


def _wandb_logger(options: dict, log_dir: Path, run_name: str):
    """TorchRL's WandbLogger; `mode`, `project` and any other key go to wandb.init."""
    from torchrl.record.loggers import WandbLogger

    save_dir = options.pop("dir", None) or log_dir
    options = {k: v for k, v in options.items() if v is not None}
    close_loggers()  # a run left open by an earlier job of a multirun in this process
    # `mode` rather than WandbLogger(offline=True): the latter sets WANDB_MODE for the
    # whole process.
    return WandbLogger(exp_name=run_name, save_dir=str(save_dir), **options)


def _mlflow_logger(options: dict, log_dir: Path, run_name: str):
    """TorchRL's MLFlowLogger on a SQLite store under the run directory by default.

    MLflow 3.10+ refuses the plain `file:` store, and SQLite needs no server.
    """
    if not options.pop("telemetry", False):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow
    from torchrl.record.loggers import MLFlowLogger

    log_dir = log_dir.resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    tracking_uri = options.pop("tracking_uri", None) or f"sqlite:///{log_dir}/mlflow.db"
    artifacts = options.pop("artifact_location", None) or (log_dir / "mlartifacts").as_uri()
    experiment = options.pop("experiment_name", None) or run_name
    tags = options.pop("tags", None) or None
    if options:
        raise ConfigError(
            f"unknown logger=mlflow option(s) {sorted(options)}: use tracking_uri, "
            "artifact_location, experiment_name, tags, telemetry"
        )
    close_loggers()  # a run left open by an earlier job of a multirun in this process
    logger = MLFlowLogger(
        exp_name=experiment, tracking_uri=tracking_uri, tags=tags, artifact_location=artifacts
    )
    mlflow.set_tag("mlflow.runName", run_name)
    return logger


def plot_learning_curve(path: Path, title: str, eval_history, train_history) -> Path:
    """Evaluation returns (markers) and training episode returns (line) against frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if train_history:
        f, r = zip(*train_history, strict=True)
        ax.plot(f, r, color="tab:blue", alpha=0.6, lw=1.2, label="training episodes (mean)")
    if eval_history:
        f, r = zip(*eval_history, strict=True)
        ax.plot(f, r, "o-", color="tab:red", ms=4, lw=1.5, label="greedy evaluation")
    ax.set_xlabel("frames")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_summary(path: Path, summary: dict) -> Path:
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path
