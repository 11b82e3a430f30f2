"""Hydra entry point: compose the config, build env, agent and trainer, run, summarise.

    python -m gpurl.train                                   # DQN on native CartPole
    python -m gpurl.train experiment=sac_pendulum seed=1
    python -m gpurl.train -m experiment=td3_pendulum seed=0,1,2
    python -m gpurl.train env=gym env.id=Acrobot-v1 agent=dqn
    python -m torch.distributed.run --nproc-per-node 2 -m gpurl.train experiment=sac_pendulum

Everything a run writes goes to its Hydra run directory: .hydra/ (the composed
config), logs/ (scalars), checkpoints/last.pt (and prev.pt, with their .sha256),
learning_curve.png and summary.json, whose path is the last line printed. A run
stopped by a fault (gpurl.errors.RunFault: a NaN, a full disk) prints one line, exits
1 and keeps its directory, checkpoints included, with the line in error.txt.

Under torchrun (core/distributed.py) rank 0 alone writes the run directory; the
other ranks' Hydra output goes to a temporary directory that is removed at exit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from gpurl.agents import OnPolicyAgent, make_agent
from gpurl.core import distributed
from gpurl.core.compile import CompileSpec
from gpurl.core.progress import Progress
from gpurl.envs import make_env, make_eval_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError, RunFault
from gpurl.trainers.base import Trainer
from gpurl.trainers.checkpoint import load_checkpoint, resolve_checkpoint
from gpurl.trainers.off_policy import OffPolicyTrainer
from gpurl.trainers.on_policy import OnPolicyTrainer
from gpurl.trainers.reporting import close_loggers, make_logger, write_summary
from gpurl.utils.device import resolve_device
from gpurl.utils.provenance import environment_record, gpurl_commit


def load_config(overrides: list[str] | None = None) -> DictConfig:
    """Compose the config as the command line would, for scripts, tools and tests."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("gpurl.configs", version_base="1.3"):
        return compose("config", overrides=list(overrides or []))


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def cpus_per_job(threads) -> int:
    """The cores one run keeps busy: `threads`, or all of them for threads=0 (torch's
    default). The gpurl_* launchers (configs/hydra/launcher/) reserve this many per run."""
    return int(threads) if int(threads) > 0 else _cores()


def jobs_at_once(threads) -> int:
    """How many runs of `threads` threads this machine's cores hold side by side."""
    return max(1, _cores() // cpus_per_job(threads))


# Registered on import: the launcher configs resolve in the sweeping process, which has
# imported this module, and so have Ray and submitit workers before they unpickle a job.
OmegaConf.register_new_resolver("gpurl.cpus_per_job", cpus_per_job, replace=True)
OmegaConf.register_new_resolver("gpurl.jobs_at_once", jobs_at_once, replace=True)


def build(cfg: DictConfig, run_dir: Path) -> Trainer:
    """Everything `run` trains with, from a composed config (also used by tests). The
    trainer is the agent's kind's: off-policy agents learn from a replay, on-policy ones
    from rollouts (agents/base.py)."""
    device = distributed.setup(resolve_device(cfg.device))
    rank, world = distributed.rank(), distributed.world_size()
    rank_seed = int(cfg.seed) + distributed.RANK_SEED_STRIDE * rank
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    env = make_env(cfg.env, device=device, seed=rank_seed)
    eval_env = make_eval_env(cfg.env, device=device, seed=int(cfg.seed))
    eval_env.check_evaluation()  # a wrong eval_envs fails now, not at the first evaluation
    info = env_info(env)
    progress = Progress(device, world)
    compiled = CompileSpec.from_config(cfg.get("compile"), device)
    if compiled.cudagraphs and world > 1:  # an all-reduce inside a captured graph: untried
        raise ConfigError(
            "compile.cudagraphs is not supported under torchrun yet: use compile=full "
            "(torch.compile of the update works with the gradient all-reduce)"
        )
    agent = make_agent(
        cfg.agent,
        info,
        progress,
        random_frames=int(cfg.trainer.init_random_frames),
        compile=compiled,
    )
    if world > 1:
        distributed.broadcast_modules(agent.modules().values())
        torch.manual_seed(rank_seed)  # each rank its own exploration noise and sampling
    meta = {"env": _env_label(cfg.env), "agent": cfg.agent.name, "seed": int(cfg.seed)}
    name = f"{meta['agent']}_{meta['env']}_s{cfg.seed}"
    logger = make_logger(cfg.logger, run_dir, name) if rank == 0 else None
    trainer_cls = OnPolicyTrainer if isinstance(agent, OnPolicyAgent) else OffPolicyTrainer
    trainer = trainer_cls(
        cfg.trainer, env, eval_env, agent, info, progress, run_dir, logger, meta, compiled
    )
    if cfg.trainer.resume:
        trainer.resume(resolve_checkpoint(cfg.trainer.resume))
    return trainer


def load_trained(run: str | Path, device: str = "cpu"):
    """(config, agent) of a finished or interrupted run: its directory's .hydra/config.yaml
    and the agent state and progress record of its checkpoint (a run directory or a
    checkpoints/*.pt inside one). For tools that evaluate or draw a trained policy
    (`agent.policy`)."""
    path = resolve_checkpoint(run)
    run_dir = path.parent.parent
    config_file = run_dir / ".hydra" / "config.yaml"
    if not config_file.is_file():
        raise ConfigError(f"{run_dir} holds no .hydra/config.yaml: pass a gpurl run directory")
    cfg = OmegaConf.load(config_file)
    device = resolve_device(device)
    env = make_env(cfg.env, device=device, seed=cfg.seed, num_envs=1)
    progress = Progress(device)
    agent = make_agent(cfg.agent, env_info(env), progress)
    state = load_checkpoint(path, device)
    agent.load_state(state["agent"])
    progress.load_state_dict(state["progress"])
    return cfg, agent


def run(cfg: DictConfig, run_dir: Path) -> Path:
    started = time.perf_counter()
    commit = gpurl_commit()  # the code this run imports, read before commits made meanwhile
    trainer = build(cfg, run_dir)
    summary = trainer.train()
    summary.update(
        **environment_record(trainer.device),
        commit=commit,
        run_dir=str(run_dir),
        setup_and_train_s=round(time.perf_counter() - started, 2),
        config=OmegaConf.to_container(cfg, resolve=True),
        world_size=trainer.world,
    )
    if trainer.rank > 0:
        return run_dir / "summary.json"  # rank 0 writes it
    return write_summary(run_dir / "summary.json", summary)


def _env_label(env_cfg) -> str:
    return f"gym:{env_cfg.id}" if env_cfg.name == "gym" else env_cfg.name


GROUPS = ("env", "agent", "trainer", "logger", "compile", "experiment")


def unknown_override(argv: list[str]) -> str | None:
    """Name the first `key=value` argument whose key the config lacks, with a suggestion.

    Hydra rejects such keys too, but over several lines and suggesting `+key=value`,
    which would add a key nothing reads. Group choices, `+`/`~` edits, hydra.* settings
    and sweeps over groups are left to Hydra.
    """
    import difflib

    pairs = [a.split("=", 1) for a in argv if "=" in a and not a.startswith(("-", "+", "~"))]
    choices = [f"{k}={v}" for k, v in pairs if k in GROUPS]
    if any("," in c for c in choices):
        return None
    keys = [k for k, _ in pairs if k not in GROUPS and "/" not in k and k.split(".")[0] != "hydra"]
    if not keys:
        return None
    try:
        cfg = load_config(choices)
    except Exception:  # a bad group choice: Hydra's own message names the options
        return None
    known = []

    def walk(node, prefix):
        for k in node.keys():  # keys(): a "???" value (env._target_) is a key too
            known.append(prefix + k)
            if not OmegaConf.is_missing(node, k) and isinstance(node[k], DictConfig):
                walk(node[k], prefix + k + ".")

    walk(cfg, "")
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "see `python -m gpurl.train --cfg job`"
            return f"unknown config key '{key}': {hint}"
    return None


@hydra.main(config_path="configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Train one run; return its final evaluation return (what a Hydra sweeper optimises)."""
    run_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    try:
        path = run(cfg, run_dir)
    except ConfigError as err:
        _say(f"gpurl: error: {err}")
        leave_only_error(run_dir, str(err))
        sys.exit(2)
    except RunFault as err:  # a NaN, a full disk: the run directory and checkpoints stay
        _say(f"gpurl: error: {err}")
        close_loggers()
        if run_dir.is_dir():
            (run_dir / "error.txt").write_text(f"gpurl: error: {err}\n")
        sys.exit(1)
    close_loggers()  # wandb and MLflow flush here, not after the last line at exit
    if distributed.rank() > 0:
        distributed.shutdown()
        return float("nan")
    distributed.shutdown()
    print(path)
    return float(json.loads(path.read_text())["eval_return"])


def _say(line: str) -> None:
    """An error line, once: under torchrun every rank meets the same mistake."""
    if distributed.rank() == 0:
        print(line, file=sys.stderr)


def leave_only_error(run_dir: Path, message: str) -> None:
    """A run stopped by a user's mistake leaves its directory holding the error alone:
    no config snapshot, log, checkpoint or summary that could pass for a run."""
    import shutil

    if run_dir.is_dir():
        for entry in run_dir.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        (run_dir / "error.txt").write_text(f"gpurl: error: {message}\n")


def quiet_rank_overrides() -> list[str]:
    """Under torchrun, Hydra overrides that keep ranks > 0 out of the run directory: their
    config snapshot and log go to a temporary directory removed at exit (rank 0 writes
    the run's files; the others would race it for the same timestamped directory)."""
    import atexit
    import shutil
    import tempfile

    if int(os.environ.get("RANK", "0")) == 0:
        return []
    scratch = tempfile.mkdtemp(prefix=f"gpurl-rank{os.environ['RANK']}-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [f"hydra.run.dir={scratch}", "hydra.output_subdir=null", "hydra/job_logging=disabled"]


if __name__ == "__main__":
    problem = unknown_override(sys.argv[1:])
    if problem:
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"gpurl: error: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv += quiet_rank_overrides()
    main()
