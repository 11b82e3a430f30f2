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
1 and keeps its directory, checkpoints included, with the line in error.txt. A run
stopped by a signal (SIGTERM, SIGINT, SIGUSR1: core/signals.py) writes a checkpoint and
summary.json, prints one line and exits 128 + the signal's number; the same command with
trainer.resume=auto and a fixed hydra.run.dir continues it (a requeued Slurm job).

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
from gpurl.core import distributed, registry
from gpurl.core.compile import CompileSpec
from gpurl.core.progress import Progress
from gpurl.core.runs import Runs
from gpurl.core.signals import StopSignals, exit_code
from gpurl.envs import make_env, make_eval_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError, RunFault
from gpurl.schema import PerSeed, check_config, help_text, in_range, load_components, range_text
from gpurl.trainers.base import Trainer
from gpurl.trainers.checkpoint import LAST, load_checkpoint, previous_path, resolve_checkpoint
from gpurl.trainers.loggers import close_loggers, make_logger
from gpurl.trainers.off_policy import OffPolicyTrainer
from gpurl.trainers.on_policy import OnPolicyTrainer
from gpurl.trainers.pbt import initial_values, load_schedule
from gpurl.trainers.reporting import write_summary
from gpurl.trainers.seeds import write_runs
from gpurl.trainers.video import video_env
from gpurl.utils.device import resolve_device
from gpurl.utils.provenance import environment_record, gpurl_commit


def load_config(overrides: list[str] | None = None) -> DictConfig:
    """Compose the config as the command line would, for scripts, tools and tests."""
    from hydra import compose, initialize_config_module

    load_components()  # gpurl's and the plug-ins' options, theirs in Hydra's store
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
    check_config(cfg)  # every key typed and ranged, keys that must agree (gpurl/schema.py)
    device = distributed.setup(resolve_device(cfg.device))
    rank, world = distributed.rank(), distributed.world_size()
    rank_seed = int(cfg.seed) + distributed.RANK_SEED_STRIDE * rank
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    # process-wide, as threads: a no-op where the CPU cannot flush (not x86) or on CUDA
    torch.set_flush_denormal(bool(cfg.get("flush_denormal", True)))
    runs = make_runs(cfg, world)
    # N runs step N x env.num_envs envs as one batch, run k owning the k-th slice
    num_envs = int(cfg.env.get("num_envs", 1)) * runs.n if runs.many else None
    env = make_env(cfg.env, device=device, seed=rank_seed, num_envs=num_envs)
    eval_env = make_eval_env(cfg.env, device=device, seed=int(cfg.seed))
    eval_env.check_evaluation()  # a wrong eval_envs fails now, not at the first evaluation
    # N runs: one env of N x eval_envs copies, run k's the k-th slice, evaluates them
    # in one pass where the env's protocol splits by run; else run k evaluates on its
    # own copies, seeded seed + k (run 0's are eval_env)
    if runs.many and eval_env.evaluates_by_run:
        group_cfg = {**cfg.env, "eval_envs": int(cfg.env.eval_envs) * runs.n}
        run_eval_envs = [make_eval_env(group_cfg, device=device, seed=int(cfg.seed))]
    else:
        run_eval_envs = [eval_env] + [
            make_eval_env(cfg.env, device=device, seed=s) for s in runs.seeds[1:]
        ]
    info = env_info(env)
    video_env = make_video_env(cfg, device) if cfg.trainer.get("video_interval") else None
    progress = Progress(device, world, runs)
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
        cfg.trainer,
        env,
        eval_env,
        agent,
        info,
        progress,
        run_dir,
        logger,
        meta,
        compiled,
        run_eval_envs=run_eval_envs,
        video_env=video_env,
    )
    # the run's settings go into its checkpoints; a resume says which of them changed
    # (not `trainer.config`: a multirun pickles this function by value, and cloudpickle
    # then takes torch.distributed.config, named by `distributed` and `config` here)
    trainer.run_settings = OmegaConf.to_container(cfg, resolve=True)
    resume = cfg.trainer.resume
    if resume == "auto":  # rank 0 looks; under torchrun the others take its answer
        resume = distributed.broadcast_object(latest_checkpoint(run_dir) if rank == 0 else None)
        if resume is not None and rank == 0:
            print(f"gpurl: trainer.resume=auto: continuing from {resume}", file=sys.stderr)
    if resume:
        trainer.resume(resolve_checkpoint(resume))
    return trainer


def make_video_env(cfg: DictConfig, device):
    """One evaluation env copy of its own for trainer.video_interval's episodes (the
    evaluations' envs keep their draws), refused in one line if the env draws nothing."""
    if int(cfg.trainer.get("num_seeds", 1) or 1) > 1:
        raise ConfigError(
            "trainer.video_interval records one run's episodes: drop it or trainer.num_seeds"
        )
    env = video_env(cfg.env, device, cfg.seed)
    env.reset()
    if env.render_frames() is None:
        raise ConfigError(
            f"trainer.video_interval: env={cfg.env.name} draws no frames (the native envs, "
            f"gym, dmc and vmas do): set trainer.video_interval=null"
        )
    return env


def latest_checkpoint(run_dir: Path) -> str | None:
    """trainer.resume=auto's choice: the run directory's checkpoints/last.pt when it or
    prev.pt is there (read_checkpoint takes prev.pt where last.pt is damaged), else None:
    start afresh. Checkpoints there that are all damaged stop the run with one line
    rather than be written over."""
    last = Path(run_dir) / "checkpoints" / LAST
    return str(last) if last.is_file() or previous_path(last).is_file() else None


def make_runs(cfg: DictConfig, world: int) -> Runs:
    """The runs this process trains (trainer.num_seeds, trainer.per_seed: core/runs.py)."""
    n = int(cfg.trainer.get("num_seeds", 1) or 1)
    per_seed = {k: v for k, v in (cfg.trainer.get("per_seed") or {}).items() if v is not None}
    if n > 1 and world > 1:
        raise ConfigError("trainer.num_seeds > 1 runs in one process: launch it without torchrun")
    if per_seed and n == 1:
        raise ConfigError("trainer.per_seed needs trainer.num_seeds > 1 (one value per seed)")
    for k in per_seed:
        if k not in cfg.agent:
            raise ConfigError(f"trainer.per_seed.{k}: agent={cfg.agent.name} has no agent.{k}")
    pbt = cfg.trainer.get("pbt") or {}
    if pbt.get("enabled"):  # the population's first values, drawn from trainer.pbt.space
        if n < 2:
            raise ConfigError("trainer.pbt needs a population: set trainer.num_seeds >= 2")
        if cfg.trainer.get("hyper_schedule"):
            raise ConfigError("trainer.pbt and trainer.hyper_schedule: choose one")
        per_seed.update(initial_values(pbt, cfg.agent, n, int(cfg.seed), per_seed))
    elif cfg.trainer.get("hyper_schedule"):  # every run starts at the schedule's values
        schedule = load_schedule(cfg.trainer.hyper_schedule)
        for key in {k for _, values in schedule for k in values}:
            if key in per_seed or key not in PerSeed.__dataclass_fields__ or key not in cfg.agent:
                raise ConfigError(
                    f"trainer.hyper_schedule sets {key}: "
                    + (
                        "so does trainer.per_seed, drop one"
                        if key in per_seed
                        else f"agent={cfg.agent.name} has no per-run agent.{key}"
                    )
                )
            meta = PerSeed.__dataclass_fields__[key].metadata
            for frame, values in schedule:
                if key in values and not in_range(values[key], meta):
                    raise ConfigError(
                        f"trainer.hyper_schedule sets {key}={values[key]} at frame {frame}: "
                        f"agent.{key} takes values {range_text(meta)}"
                    )
            start = schedule[0][1] if schedule[0][0] == 0 else {}
            per_seed[key] = [float(start.get(key, cfg.agent[key]))] * n
    return Runs(n, int(cfg.seed), per_seed)


def saved_config(path: str | Path) -> DictConfig:
    """A run's saved config (.hydra/config.yaml), checked. Keys this gpurl declares that
    the run's version did not take today's defaults (a new key's default keeps what
    runs did before it, as env.observe_velocity's true does); a key it no longer
    knows, or a value it refuses, stops with one line."""
    cfg = OmegaConf.load(path)
    run_dir = Path(path).parent.parent
    try:
        check_config(cfg)
        return cfg
    except ConfigError as err:
        first = err
    try:  # the defaults of the run's env, agent and logger, the run's values over them
        choices = [f"{g}={cfg[g].name}" for g in ("env", "agent", "logger") if g in cfg]
        filled = OmegaConf.merge(load_config(choices), cfg)
        check_config(filled)
        return filled
    except Exception:  # not composable or still refused: the saved config's own error
        raise ConfigError(
            f"{run_dir}'s config does not fit this gpurl (from another version?): {first}"
        ) from None


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
    cfg = saved_config(config_file)
    device = resolve_device(device)
    env = make_env(cfg.env, device=device, seed=cfg.seed, num_envs=1)
    progress = Progress(device)
    agent = make_agent(cfg.agent, env_info(env), progress)
    state = load_checkpoint(path, device)
    agent.load_state(state["agent"])
    progress.load_state_dict(state["progress"])
    return cfg, agent


def run(cfg: DictConfig, run_dir: Path) -> Path:
    """Build and train one run; write and return its summary.json. A signal (SIGTERM,
    SIGINT, SIGUSR1) during training ends it early, checkpoint and summary written
    (core/signals.py); the summary's "stopped" says so."""
    return run_and_stop(cfg, run_dir)[0]


def run_and_stop(cfg: DictConfig, run_dir: Path) -> tuple[Path, str | None]:
    """run(), and the signal that stopped it (None when it ran to its end)."""
    started = time.perf_counter()
    commit = gpurl_commit()  # the code this run imports, read before commits made meanwhile
    trainer = build(cfg, run_dir)
    with StopSignals() as stop:  # the handlers live while it trains, then restored
        trainer.stop = stop
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
        return run_dir / "summary.json", trainer.stopped_by  # rank 0 writes it
    runs = summary.pop("run_summaries", None)
    if runs:  # N runs of one process: each run's summary as a run of its own
        summary["runs"] = [str(p) for p in write_runs(run_dir, summary, runs)]
    return write_summary(run_dir / "summary.json", summary), trainer.stopped_by


def _env_label(env_cfg) -> str:
    return f"gym:{env_cfg.id}" if env_cfg.name == "gym" else env_cfg.name


GROUPS = ("env", "agent", "trainer", "logger", "compile", "experiment")


def command_line_problem(argv: list[str]) -> str | None:
    """One line naming what is wrong with a command line that Hydra would refuse before
    `main` runs (in a dozen lines or more), or None: a bad override's syntax, an unknown
    group option or experiment, an unknown key (with a suggestion: Hydra's own suggests
    `+key=value`, which adds a key nothing reads), several values without -m. The values
    themselves are checked later, by check_config in build()."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    args = [a for a in argv if not a.startswith("-") and ("=" in a or a.startswith("~"))]
    multirun = "-m" in argv or "--multirun" in argv

    def is_choice(o) -> bool:  # a group option: agent=ppo, hydra/launcher=joblib
        return "." not in o.key_or_group and (o.key_or_group in GROUPS or "/" in o.key_or_group)

    try:
        overrides = OverridesParser.create().parse_overrides(args)
    except HydraException as err:
        return f"cannot read the command line: {_hydra_line(err)}"
    fixed, firsts = [], []  # overrides to compose with; each sweep at its first value
    for o in overrides:
        if not o.is_sweep_override():
            fixed.append(o)
        elif not multirun:
            return (
                f"'{o.input_line}' gives several values: sweep them with -m, write a list "
                f"as [a,b], or quote a string that holds a comma"
            )
        elif o.is_discrete_sweep() and o.value_type.name != "GLOB_CHOICE_SWEEP":
            values = list(o.sweep_string_iterator())
            firsts.append((o, f"{o.get_key_element()}={values[0]}"))
            for v in values[1:] if is_choice(o) else ():  # each option of a group sweep
                try:
                    load_config([f"{o.get_key_element()}={v}"])
                except HydraException as err:
                    return _hydra_line(err)
    # group choices and Hydra's settings first: an unknown option is named as such
    choices = [o.input_line for o in fixed if is_choice(o) or o.is_hydra_override()]
    choices += [line for o, line in firsts if is_choice(o)]
    try:
        cfg = load_config(choices)
    except HydraException as err:
        return _hydra_line(err)
    known = set()

    def walk(node, prefix):
        for k, v in node.items():
            known.add(prefix + k)
            if isinstance(v, dict):
                walk(v, prefix + k + ".")

    # unresolved: a `???` still to be given (env=custom's _target_) is no error here
    walk(OmegaConf.to_container(cfg, resolve=False, throw_on_missing=False), "")
    for o in overrides:
        plain = not o.is_add() and not o.is_force_add() and not o.is_hydra_override()
        if plain and not is_choice(o) and o.key_or_group not in known:
            return f"unknown config key '{o.key_or_group}': {_key_hint(o.key_or_group, known)}"
    try:
        load_config([*(o.input_line for o in fixed), *(line for _, line in firsts)])
    except HydraException as err:
        return _hydra_line(err)
    return None


def run_dir_problem(argv: list[str]) -> str | None:
    """One line if the directory the run would write (hydra.run.dir, or hydra.sweep.dir
    under -m) cannot be made or written, else None. Hydra makes it before `main` runs,
    with a traceback where it cannot (a path under /proc, a read-only disk). The check
    makes and removes a scratch directory in the nearest part of the path that exists;
    it leaves nothing behind."""
    import tempfile

    multirun = "-m" in argv or "--multirun" in argv
    name = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = [a.split("=", 1)[1] for a in argv if a.startswith(f"{name}=")]
    # the default (runs/${now:...}/...) lives under the working directory; a given one's
    # ${...} parts are resolved by Hydra later: check the literal path before them
    path = Path(given[-1].split("${")[0] if given else ".").expanduser()
    existing = path if path.is_absolute() else Path.cwd() / path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{name}={given[-1]}: {existing} is a file, not a directory: choose another {name}"
    try:
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as err:
        shown = given[-1] if given else f"{Path.cwd()} (the default runs/... is made there)"
        return (
            f"{name}={shown} cannot be written ({existing}: {err.strerror}): choose a "
            f"directory you can write, e.g. {name}=runs/my_run"
        )
    return None


def _key_hint(key: str, known: set[str]) -> str:
    """The closest key beside `key` (trainer.bach_size -> trainer.batch_size), matched on
    the last part among its siblings so the group name does not dominate the match."""
    import difflib

    parent, _, leaf = key.rpartition(".")
    prefix = f"{parent}." if parent else ""
    siblings = [
        k[len(prefix) :] for k in known if k.startswith(prefix) and "." not in k[len(prefix) :]
    ]
    close = difflib.get_close_matches(leaf, siblings, n=1)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    where = f"{parent} has no key {leaf}" if parent else f"there is no key {leaf}"
    return f"{where} (python -m gpurl.train --help lists the keys)"


def _hydra_line(err: Exception) -> str:
    """A Hydra error as one line: an unknown option names the options there are."""
    from hydra.errors import MissingConfigException

    if isinstance(err, MissingConfigException) and err.missing_cfg_file and err.options:
        group, _, option = err.missing_cfg_file.rpartition("/")
        options = ", ".join(o for o in err.options if not o.startswith("_"))
        left_out = registry.hint()  # plug-ins that failed to import may have held it
        return f"unknown {group} '{option}' ({group}={option}): choose one of {options}{left_out}"
    lines = [line.strip() for line in str(err).strip().splitlines()]
    lines = [line for line in lines if line and not line.startswith("See https://")]
    if "Config search path:" in lines:
        lines = lines[: lines.index("Config search path:")]
    return " ".join(lines) or type(err).__name__


def print_help(argv: list[str]) -> int:
    """`--help`: the groups, then every key of the chosen options with its value, type,
    range and doc (gpurl/schema.py). Returns the exit status."""
    problem = command_line_problem([a for a in argv if a not in ("-m", "--multirun")])
    if problem:
        print(f"gpurl: error: {problem}", file=sys.stderr)
        return 2
    args = [a for a in argv if not a.startswith("-") and "=" in a]
    choices = dict(a.split("=", 1) for a in args if a.split("=", 1)[0] in GROUPS)
    try:
        print(help_text(load_config(args), choices))
    except ConfigError as err:
        print(f"gpurl: error: {err}", file=sys.stderr)
        return 2
    return 0


@hydra.main(config_path="configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Train one run; return its final evaluation return (what a Hydra sweeper optimises)."""
    run_dir = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    return train_or_exit(cfg, run_dir)


def train_or_exit(cfg: DictConfig, run_dir: Path) -> float:
    """`main` past Hydra: run, print the summary's path; a mistake in the config exits 2
    with one line and leaves the run directory holding error.txt alone; a fault met while
    training exits 1 and keeps the run directory; a signal that stopped the run (its
    checkpoint and summary written) prints one line and exits 128 + the signal's number
    (core/signals.py). Tests call this in-process."""
    try:
        path, signal_name = run_and_stop(cfg, run_dir)
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
    if signal_name is not None:
        summary = json.loads(path.read_text()) if distributed.rank() == 0 else {}
        _say(
            f"gpurl: stopped by {signal_name} at frames {summary.get('frames')}: checkpoint "
            f"and summary in {run_dir}; continue with trainer.resume=auto "
            f"hydra.run.dir={run_dir}"
        )
        distributed.shutdown()
        sys.exit(exit_code(signal_name))
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
    no config snapshot, log, checkpoint or summary that could pass for a run. A directory
    that holds checkpoints (a run resumed in its own directory, trainer.resume=auto) is
    kept as it is, error.txt added: its checkpoints are the run so far."""
    import shutil

    if (run_dir / "checkpoints").is_dir():
        (run_dir / "error.txt").write_text(f"gpurl: error: {message}\n")
        return
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


def cli(argv: list[str]) -> None:
    """`python -m gpurl.train ARGS`: gpurl's --help, the command-line check, then Hydra."""
    rank0 = int(os.environ.get("RANK", "0")) == 0
    try:
        load_components()
    except ConfigError as err:  # two plug-ins registering one name
        if rank0:
            print(f"gpurl: error: {err}", file=sys.stderr)
        sys.exit(2)
    if "--help" in argv or "-h" in argv:
        sys.exit(print_help(argv) if rank0 else 0)
    problem = command_line_problem(argv) or run_dir_problem(argv)
    if problem:
        if rank0:
            print(f"gpurl: error: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *argv, *quiet_rank_overrides()]
    main()


if __name__ == "__main__":
    cli(sys.argv[1:])
