"""Loggers by name (logger=csv | tensorboard | wandb | mlflow | none): each registers
itself here with the dataclass of its keys (gpurl/core/registry.py); a plug-in's logger
registers a factory `(options, log_dir, experiment_name) -> TorchRL Logger | None` the
same way. `make_logger` builds the one a run's config names."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpurl.core import registry
from gpurl.core.config import Schema, declare, key
from gpurl.errors import ConfigError

# The package each logger imports, and the extra of pyproject.toml that installs it.
_NEEDS = {
    "tensorboard": ("tensorboard", "loggers"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
}


@dataclass
class LoggerConfig(Schema):
    """The key every logger config has."""

    name: str = key(
        "csv",
        "the logger (csv | tensorboard | wandb | mlflow | none, or a registered one)",
        choices=lambda: registry.names("logger"),
    )


def make_logger(cfg, run_dir: Path, experiment_name: str):
    """A TorchRL logger writing under `run_dir`/logs, or None for logger=none.

    `cfg` is the logger config node (gpurl/configs/logger/*.yaml) or just its name; every
    key but `name` is an option of that logger. wandb and mlflow stay on this machine by
    default: wandb in offline mode, mlflow in a SQLite store.
    """
    options = _as_dict(cfg)
    chosen = registry.get("logger", options.pop("name"), "logger.name")
    module, extra = _NEEDS.get(chosen.name, (None, None)) if chosen.own else (None, None)
    if module is not None and importlib.util.find_spec(module) is None:
        raise ConfigError(
            f"logger={chosen.name} needs the {module} package: pip install -e '.[{extra}]'"
        )
    try:
        return chosen.target(options, Path(run_dir) / "logs", experiment_name)
    except ImportError as err:
        raise ConfigError(
            f"logger={chosen.name} could not import what it needs ({err}): "
            f"pip install -e '.[{extra or 'loggers'}]'"
        ) from err


@declare(name="csv")
class CsvConfig(LoggerConfig):
    """Scalars as CSV files under <run dir>/logs (TorchRL's CSVLogger)."""


@registry.register("logger", "csv", CsvConfig)
def csv_logger(options: dict, log_dir: Path, run_name: str):
    from torchrl.record.loggers import get_logger

    return get_logger("csv", logger_name=str(log_dir), experiment_name=run_name)


@declare(name="tensorboard")
class TensorBoardConfig(LoggerConfig):
    """Scalars as TensorBoard event files under <run dir>/logs (pip install -e '.[loggers]')."""


@registry.register("logger", "tensorboard", TensorBoardConfig)
def tensorboard_logger(options: dict, log_dir: Path, run_name: str):
    from torchrl.record.loggers import get_logger

    return get_logger("tensorboard", logger_name=str(log_dir), experiment_name=run_name)


@declare(name="wandb")
class WandbConfig(LoggerConfig):
    """Weights & Biases through TorchRL's WandbLogger (pip install -e '.[wandb]').
    Offline by default: no network and no login. The run is written to
    <run dir>/logs/wandb/offline-run-<time>-<id>/ and `wandb sync <that folder>` uploads it
    later; logger.mode=online streams it instead (after `wandb login`).
    Keys other than `name` and `dir` go to wandb.init (add more with +logger.notes=...)."""

    open = True  # further keys go to wandb.init

    mode: str = key(
        "offline", "offline | online | disabled", choices=("offline", "online", "disabled")
    )
    project: str = key("gpurl", "the W&B project")
    entity: str | None = key(None, "your W&B user or team (online mode)")
    group: str | None = key(None, "e.g. a sweep's name, to group its runs")
    tags: list[str] = key([], "the run's tags")
    dir: str | None = key(None, "null: <run dir>/logs")


@registry.register("logger", "wandb", WandbConfig)
def wandb_logger(options: dict, log_dir: Path, run_name: str):
    """TorchRL's WandbLogger; `mode`, `project` and any other key go to wandb.init."""
    from torchrl.record.loggers import WandbLogger

    save_dir = options.pop("dir", None) or log_dir
    options = {k: v for k, v in options.items() if v is not None}
    close_loggers()  # a run left open by an earlier job of a multirun in this process
    # `mode` rather than WandbLogger(offline=True): the latter sets WANDB_MODE for the
    # whole process.
    return WandbLogger(exp_name=run_name, save_dir=str(save_dir), **options)


@declare(name="mlflow")
class MLflowConfig(LoggerConfig):
    """MLflow through TorchRL's MLFlowLogger (pip install -e '.[mlflow]').
    Local by default: each run keeps its own SQLite store, <run dir>/logs/mlflow.db, and its
    artifacts in <run dir>/logs/mlartifacts/ (MLflow 3.10+ refuses the plain file store;
    SQLite needs no server). Browse it with
      mlflow ui --backend-store-uri sqlite:///<run dir>/logs/mlflow.db
    or point many runs at one store: logger.tracking_uri=sqlite:////abs/path/mlflow.db
    (one process at a time) or an MLflow server's http://host:port."""

    tracking_uri: str | None = key(None, "null: sqlite:///<run dir>/logs/mlflow.db")
    artifact_location: str | None = key(None, "null: <run dir>/logs/mlartifacts")
    experiment_name: str = key(
        "gpurl", "MLflow experiment; each run is named <agent>_<env>_s<seed>"
    )
    tags: dict = key({}, "experiment tags")
    telemetry: bool = key(False, "false sets MLFLOW_DISABLE_TELEMETRY (MLflow's usage reports)")


@registry.register("logger", "mlflow", MLflowConfig)
def mlflow_logger(options: dict, log_dir: Path, run_name: str):
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


@declare(name="none")
class NoLoggerConfig(LoggerConfig):
    """No scalars logged; the summary, curve and checkpoints are still written."""


@registry.register("logger", "none", NoLoggerConfig)
def no_logger(options: dict, log_dir: Path, run_name: str):
    return None


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


def log_video(logger, name: str, frames, path: Path, step: int) -> None:
    """A recorded episode (frames [T, H, W, 3] uint8, and its MP4 at `path`) in the
    run's logger, where it shows videos: TensorBoard as an animated GIF in its images
    tab (the summary its add_video writes, encoded by imageio instead of moviepy), W&B
    as the MP4. The others keep the MP4 in the run directory alone."""
    from torchrl.record.loggers import TensorboardLogger, WandbLogger

    if isinstance(logger, TensorboardLogger):
        import imageio.v3 as iio
        from tensorboard.compat.proto.summary_pb2 import Summary

        gif = iio.imwrite("<bytes>", frames.numpy(), extension=".gif", duration=1000 / 30, loop=0)
        _, height, width, _ = frames.shape
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
        summary = Summary(value=[Summary.Value(tag=name, image=image)])
        logger.experiment.file_writer.add_summary(summary, step)
    elif isinstance(logger, WandbLogger):
        import wandb

        # log_scalar forwards any W&B value with TorchRL's step keys (eval/step)
        logger.log_scalar(name, wandb.Video(str(path), format="mp4"), step=step)
