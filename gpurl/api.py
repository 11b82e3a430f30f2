"""gpurl from plain Python: compose a config, build and train, get the summary back.

    from gpurl import api

    summary = api.train(env="pendulum", agent="sac", seed=1, trainer={"total_frames": 20000})
    summary["eval_return"]                     # the final greedy evaluation

    cfg = api.config("experiment=ppo_cartpole", seed=3)     # the command line's strings
    trainer = api.build(cfg, run_dir="runs/mine")          # env, agent and trainer, built
    trainer.iteration()                                     # one collect-and-learn step
    summary = trainer.train()

    # one's own env, agent or encoder: a callable or class (module-level), or a dotted path
    summary = api.train(env={"_target_": make_my_env, "num_envs": 16}, agent="dqn")

    policy = api.load(summary["run_dir"])                  # the trained policy, greedy
    action = policy(observation)                            # batched or not

`config` composes exactly what `python -m gpurl.train` would from the same choices and
overrides, so a run started here and one started on the command line with the same
settings are the same run; it, `build` and `train` check the config against the schema
as the command line does (gpurl/schema.py): a mistake raises the same one-line
ConfigError, before anything is written. `train` writes the same run directory (.hydra/config.yaml,
logs, checkpoints, learning_curve.png, summary.json) and returns the summary as a dict.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gpurl.errors import ConfigError
from gpurl.schema import check_config
from gpurl.trainers.base import Trainer

GROUPS = ("env", "agent", "trainer", "logger", "compile")


def _dotted(value):
    """A callable or class as the dotted path a `_target_` holds (it must be importable
    by that path: defined at a module's top level, __main__ included)."""
    if isinstance(value, str) or not callable(value):
        return value
    qualname = value.__qualname__
    if "<locals>" in qualname:
        raise ConfigError(
            f"_target_ {qualname} is defined inside a function: define it at a module's top "
            f"level so a run (and a resumed one) can import it"
        )
    return f"{value.__module__}.{qualname}"


def _flatten(prefix: str, value) -> list[str]:
    """key=value override strings for a (nested) mapping of settings; a `_target_`'s
    callable or class becomes its dotted path."""
    if isinstance(value, Mapping):
        return [line for k, v in value.items() for line in _flatten(f"{prefix}.{k}", v)]
    if prefix.endswith("._target_"):
        value = _dotted(value)
    return [f"{prefix}={value if isinstance(value, str) else json.dumps(value)}"]


def config(*overrides: str, experiment: str | None = None, **settings) -> DictConfig:
    """gpurl's config, composed as the command line would.

    overrides   command-line strings: "agent=iqn", "trainer.total_frames=5000"
    experiment  a preset (gpurl/configs/experiment), as experiment=NAME
    env, agent, trainer, logger, compile
                a string: the group's choice (env="pendulum"); a mapping: settings on
                top of the group's choice (trainer={"total_frames": 20000}), the choice
                itself under "config" (agent={"config": "ppo", "lr": 1e-3}); with a
                "_target_" (a callable, a class or a dotted path) one's own env, agent
                or encoder, on top of env=custom / agent=custom unless "config" says
                which config to extend (agent={"config": "ppo", "_target_": MyPPO})
    seed, device, threads, ...
                top-level keys
    """
    from gpurl.train import load_config

    args: list[str] = [f"experiment={experiment}"] if experiment else []
    for group in GROUPS:
        value = settings.pop(group, None)
        if value is None:
            continue
        if isinstance(value, str):
            args.append(f"{group}={value}")
            continue
        value = dict(value)
        choice = value.pop("config", None)
        if choice is None and "_target_" in value and group in ("env", "agent"):
            choice = "custom"
        if choice is not None:
            args.append(f"{group}={choice}")
        args += ["++" + line for line in _flatten(group, value)]  # ++: set or add
    args += [line.removeprefix(".") for line in _flatten("", settings)]  # seed=..., device=...
    args += list(overrides)
    try:
        cfg = load_config(args)
    except ConfigError:
        raise
    except Exception as err:  # Hydra's composition errors: one line, as on the command line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"the config does not compose ({first}): check {args}") from None
    check_config(cfg)  # what the command line would refuse is refused here, alike
    return cfg


def default_run_dir(cfg: DictConfig) -> Path:
    """runs/<date>/<time>_<agent>_<env>_s<seed>, as the command line names its runs."""
    now = datetime.datetime.now()
    name = f"{now:%H-%M-%S}_{cfg.agent.name}_{cfg.env.name}_s{cfg.seed}"
    return Path("runs") / f"{now:%Y-%m-%d}" / name


def build(cfg: DictConfig | None = None, run_dir: str | Path | None = None, **settings) -> Trainer:
    """The trainer of `cfg` (or of config(**settings)), its env and agent built, ready to
    `train()` or step with `iteration()`; `run_dir` (default runs/<date>/<time>_...)
    receives its config, logs and checkpoints."""
    from gpurl.train import build as build_trainer

    cfg = cfg if cfg is not None else config(**settings)
    check_config(cfg)  # a cfg changed after config(): refused before its run dir is made
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
    _save_config(cfg, run_dir)
    return build_trainer(cfg, run_dir)


def train(cfg: DictConfig | None = None, run_dir: str | Path | None = None, **settings) -> dict:
    """Train one run of `cfg` (or of config(**settings)) and return its summary: the
    final evaluation ("eval_return", "eval_metrics"), the evaluation history, frames,
    wall time, versions, commit and the run directory. The run directory is laid out
    as the command line's (tools such as load_trained and sweep_summary read it)."""
    from gpurl.train import run
    from gpurl.trainers.loggers import close_loggers

    cfg = cfg if cfg is not None else config(**settings)
    check_config(cfg)  # a cfg changed after config(): refused before its run dir is made
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
    _save_config(cfg, run_dir)
    try:
        path = run(cfg, run_dir)
    finally:
        close_loggers()
    return json.loads(Path(path).read_text())


def _save_config(cfg: DictConfig, run_dir: Path) -> None:
    """.hydra/config.yaml, as Hydra writes it for a command-line run."""
    hydra_dir = run_dir / ".hydra"
    try:  # the first write of the run: a directory that cannot be written stops here
        hydra_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, hydra_dir / "config.yaml")
    except OSError as err:
        raise ConfigError(
            f"run_dir={run_dir} cannot be written ({err.strerror}): pass a directory you can write"
        ) from None


def load(run_dir: str | Path, checkpoint: str = "last", device: str = "cpu"):
    """A run's trained policy (gpurl/trained.py): a module mapping an observation (a
    tensor, or a mapping of the env's entries; batched or not) to the greedy action, or
    the exploring one with policy(obs, greedy=False). No Hydra involved. `checkpoint`:
    "last" or "best"."""
    from gpurl.trained import TrainedPolicy

    return TrainedPolicy(run_dir, checkpoint, device)
