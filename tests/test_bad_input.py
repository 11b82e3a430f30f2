"""Mistakes a new user makes, refused before a run starts: one line naming the key, what
was given and what fits; exit status 2; nothing written but the run directory's
error.txt (gpurl/schema.py, gpurl/train.py).

CASES is the list of command lines, by kind of mistake and across every group; each runs
through gpurl.train.cli in this process (Hydra's main included: it makes the run
directory, which the error leaves holding error.txt alone). The fast suite runs the first
case of each kind, the slow one all of them, and one of each kind as a real
`python -m gpurl.train` process. `schema_cases()` adds, from the schema itself, a value
of the wrong type and one out of range for every key of every group option, each through
the same exit path (train_or_exit).
"""

import copy
import functools
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gpurl.agents.dqn import DQNAgent
from gpurl.core import registry
from gpurl.errors import ConfigError
from gpurl.schema import (
    CONFIGS,
    Root,
    _optional,
    check_config,
    group_options,
    keys_of,
    reference,
    write_yaml,
    yaml_files,
    yaml_keys,
)
from gpurl.train import build, cli, load_config, print_help, train_or_exit
from tools.common import pythonpath

ROOT = Path(__file__).resolve().parents[1]

# a device this machine does not have
NO_DEVICE = (
    f"device=cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "device=cuda"
)


def _missing_device(kind: str) -> str:
    """device=<kind> where this machine has none of that kind (else one past its count)."""
    from gpurl.utils.device import ACCELERATORS, _count

    if not ACCELERATORS[kind].is_available():
        return f"device={kind}"
    return f"device={kind}:{_count(kind)}"


# The kinds of mistake (the list, and two the command line adds).
KINDS = {
    "type": "a wrong type: a string where a number goes, a float count, a list for a number",
    "range": "a value out of range: rates, probabilities and Polyak rates above 1, "
    "intervals of 0 or below, a choice that is not one",
    "conflict": "keys that contradict each other: a minibatch larger than the replay, "
    "minibatches that do not divide the rollout, a batch not whole env steps",
    "network": "an empty network",
    "device": "an unusable device",
    "option": "an unknown group option",
    "experiment": "an unknown experiment",
    "key": "an unknown key, or a key removed that the run reads",
    "budget": "a budget smaller than one batch or rollout",
    "syntax": "a command line Hydra cannot read, or several values without -m",
    "run_dir": "a run directory that cannot be made or written",
}

# (kind, command line, a fragment of the one line it must give)
CASES = [
    # top level
    ("type", ["seed=abc"], "seed must be an int >= 0, got 'abc'"),
    ("type", ["seed=1.5"], "seed must be an int >= 0, got 1.5"),
    ("range", ["seed=-1"], "seed must be >= 0, got -1"),
    ("range", ["threads=-1"], "threads must be >= 0, got -1"),
    ("type", ["threads=two"], "threads must be an int"),
    ("device", [NO_DEVICE], "device=cuda"),
    ("device", ["device=tpu"], "unknown device 'tpu'"),
    ("device", [_missing_device("mps")], _missing_device("mps")),
    ("device", [_missing_device("xpu")], _missing_device("xpu")),
    ("device", ["device=meta"], "device=meta is not supported"),
    ("run_dir", ["hydra.run.dir=/proc/gpurl_run"], "hydra.run.dir=/proc/gpurl_run cannot be"),
    ("run_dir", ["-m", "hydra.sweep.dir=/proc/gpurl_sweep"], "hydra.sweep.dir=/proc/gpurl_sweep"),
    ("key", ["+foo=1"], "unknown config key 'foo'"),
    ("key", ["sed=1"], "did you mean seed?"),
    # env
    ("range", ["env.num_envs=0"], "env.num_envs must be >= 1, got 0"),
    ("type", ["env.num_envs=2.5"], "env.num_envs must be an int >= 1, got 2.5"),
    ("type", ["env.num_envs=8.0"], "write env.num_envs=8"),
    ("type", ["env.num_envs=many"], "env.num_envs must be an int >= 1, got 'many'"),
    ("range", ["env.eval_envs=0"], "env.eval_envs must be >= 1"),
    ("type", ["env.validate_actions=maybe"], "env.validate_actions must be true or false"),
    ("option", ["env=bogus"], "unknown env 'bogus' (env=bogus): choose one of"),
    ("key", ["env.num_env=4"], "did you mean env.num_envs?"),
    ("key", ["+env.gravity=3"], "unknown config key 'env.gravity' for env=cartpole"),
    ("range", ["env=pixels", "env.wall_prob=1.5"], "env.wall_prob must be in [0, 1), got 1.5"),
    ("range", ["env=pixels", "env.reward=bogus"], "env.reward=bogus is unknown"),
    ("range", ["env=packing", "env.resolution=4"], "env.resolution must be >= 8, got 4"),
    ("range", ["env=packing", "env.shapes=[box,star]"], "env.shapes must be a non-empty list"),
    ("range", ["env=marinenav", "env.stage=-1"], "env.stage must be >= 0"),
    ("type", ["env=marinenav", "env.curriculum=5"], "env.curriculum must be"),
    ("key", ["env=custom"], "env._target_ is not set"),
    ("range", ["env=gym", "env.collector=fast"], "env.collector=fast is unknown"),
    (
        "range",
        ["env=envpool", "env.repeat_action_probability=1.5"],
        "env.repeat_action_probability must be in [0, 1], got 1.5",
    ),
    ("range", ["env=minatar", "env.game=pong"], "env.game=pong is unknown"),
    ("range", ["env=minatar", "env.sticky_prob=1.5"], "env.sticky_prob must be in [0, 1], got 1.5"),
    ("type", ["env=dmc", "env.frame_skip=2.5"], "env.frame_skip must be an int >= 1, got 2.5"),
    ("key", ["env=dmc", "+env.bogus=1"], "unknown config key 'env.bogus' for env=dmc"),
    ("type", ["env=vmas", "env.continuous_actions=maybe"], "env.continuous_actions must be true"),
    ("range", ["env=vmas", "env.max_episode_steps=0"], "env.max_episode_steps must be >= 1"),
    # agent
    ("range", ["agent.gamma=1.5"], "agent.gamma must be in [0, 1], got 1.5"),
    ("range", ["agent.gamma=-0.1"], "agent.gamma must be in [0, 1], got -0.1"),
    ("range", ["agent.tau=0"], "agent.tau must be in (0, 1], got 0"),
    ("range", ["agent.tau=2"], "agent.tau must be in (0, 1], got 2"),
    ("range", ["agent.lr=0"], "agent.lr must be > 0, got 0"),
    ("type", ["agent.lr=fast"], "agent.lr must be a float > 0, got 'fast'"),
    ("range", ["agent.lr=inf"], "agent.lr must be a finite number, got inf"),
    ("range", ["agent.lr=nan"], "agent.lr must be a finite number, got nan"),
    ("range", ["agent.gamma=-inf"], "agent.gamma must be a finite number, got -inf"),
    ("range", ["trainer.stop_at_return=nan"], "trainer.stop_at_return must be a finite"),
    ("range", ["trainer.utd=inf"], "trainer.utd must be a finite number, got inf"),
    ("range", ["agent.epsilon_start=1.5"], "agent.epsilon_start must be in [0, 1]"),
    ("range", ["agent.epsilon_end=-0.1"], "agent.epsilon_end must be in [0, 1]"),
    ("range", ["agent.priority_alpha=2"], "agent.priority_alpha must be in [0, 1], got 2"),
    ("range", ["agent.priority_beta_start=1.5"], "agent.priority_beta_start must be in [0, 1]"),
    ("type", ["agent.prioritized=yes"], "agent.prioritized must be true or false, got 'yes'"),
    ("range", ["agent.n_step=0"], "agent.n_step must be >= 1, got 0"),
    ("range", ["agent.target_update=hrad"], "agent.target_update=hrad is unknown"),
    ("range", ["agent.loss=l1"], "agent.loss=l1 is unknown"),
    ("network", ["agent.hidden=[]"], "agent.hidden=[]: this env's observation is a vector"),
    ("network", ["env=pendulum", "agent=sac", "agent.hidden=[]"], "agent.hidden=[]"),
    ("range", ["agent.hidden=[64,0]"], "agent.hidden must be a list of int (each >= 1)"),
    ("type", ["agent.hidden=64"], "agent.hidden must be a list of int"),
    ("range", ["agent.encoder.embed=-1"], "agent.encoder.embed must be >= 0"),
    ("range", ["agent.encoder.cnn=resnet"], "agent.encoder.cnn=resnet is unknown"),
    ("option", ["agent=bogus"], "unknown agent 'bogus' (agent=bogus): choose one of"),
    ("key", ["agent.gama=0.9"], "did you mean agent.gamma?"),
    ("key", ["~agent.tau"], "agent.tau is missing from agent=dqn"),
    ("range", ["agent=ppo", "agent.clip_epsilon=0"], "agent.clip_epsilon must be > 0"),
    ("range", ["agent=ppo", "agent.gae_lambda=1.5"], "agent.gae_lambda must be in [0, 1]"),
    ("conflict", ["agent=ppo", "agent.minibatches=3"], "agent.minibatches=3 does not divide"),
    ("range", ["env=pendulum", "agent=sac", "agent.init_alpha=0"], "agent.init_alpha must be > 0"),
    ("conflict", ["agent=rainbow", "agent.v_min=10", "agent.v_max=5"], "below agent.v_max"),
    ("range", ["agent=iqn", "agent.eval_cvar=0"], "agent.eval_cvar must be in (0, 1]"),
    ("range", ["agent=pqn", "agent.q_lambda=2"], "agent.q_lambda must be in [0, 1]"),
    ("key", ["agent=custom"], "agent._target_ is not set"),
    ("network", ["agent=hrl_dqn", "agent.manager.channels=[]"], "agent.manager.channels"),
    ("conflict", ["agent=hrl_dqn", "agent.manager.blocks=[1]"], "one entry per ResNet stage"),
    # trainer
    ("range", ["trainer.total_frames=0"], "trainer.total_frames must be >= 1, got 0"),
    ("type", ["trainer.total_frames=1e5"], "write trainer.total_frames=100000"),
    ("type", ["trainer.total_frames=lots"], "trainer.total_frames must be an int >= 1"),
    ("range", ["trainer.log_interval=0"], "trainer.log_interval must be >= 1, got 0"),
    ("range", ["trainer.eval_interval=-5"], "trainer.eval_interval must be >= 1, got -5"),
    ("range", ["trainer.checkpoint_interval=0"], "trainer.checkpoint_interval must be >= 1"),
    ("range", ["trainer.utd=0"], "trainer.utd must be > 0, got 0"),
    ("range", ["trainer.rollout_steps=0"], "trainer.rollout_steps must be >= 1"),
    ("type", ["trainer.progress=2"], "trainer.progress must be true or false"),
    ("conflict", ["trainer.batch_size=256", "trainer.buffer_size=100"], "larger than the replay"),
    (
        "conflict",
        ["env.num_envs=2", "trainer.frames_per_batch=3"],
        "not a multiple of env.num_envs",
    ),
    (
        "budget",
        ["env=pixels", "agent=ppo", "trainer.total_frames=8192"],
        "trainer.total_frames=8192 is less than one rollout: env.num_envs x "
        "trainer.rollout_steps = 1024 x 128 = 131072 frames",
    ),
    ("budget", ["agent=ppo", "trainer.total_frames=100"], "less than one rollout"),
    (
        "budget",
        ["env=envpool", "agent=pqn", "trainer.total_frames=512"],
        "env.num_envs x trainer.rollout_steps = 8 x 128 = 1024 frames",
    ),
    ("budget", ["env.num_envs=64", "trainer.total_frames=32"], "less than one batch of 64"),
    ("key", ["trainer.total_frame=10"], "did you mean trainer.total_frames?"),
    # logger
    ("option", ["logger=bogus"], "unknown logger 'bogus' (logger=bogus)"),
    ("range", ["logger.name=bogus"], "unknown logger 'bogus'"),
    ("range", ["logger=wandb", "logger.mode=loud"], "logger.mode=loud is unknown"),
    ("type", ["logger=mlflow", "logger.telemetry=often"], "logger.telemetry must be true or false"),
    ("key", ["logger=mlflow", "logger.uri=x"], "unknown config key 'logger.uri'"),
    # compile
    ("device", ["compile.cudagraphs=true", "device=cpu"], "compile.cudagraphs needs a CUDA"),
    ("range", ["compile.warmup=0"], "compile.warmup must be >= 1, got 0"),
    ("type", ["compile.update=please"], "compile.update must be true or false"),
    ("range", ["compile.mode=fastest"], "compile.mode=fastest is unknown"),
    ("option", ["compile=bogus"], "unknown compile 'bogus'"),
    ("key", ["compile.updates=true"], "did you mean compile.update?"),
    # experiment
    ("experiment", ["experiment=bogus"], "unknown experiment 'bogus' (experiment=bogus)"),
    ("experiment", ["experiment=ppo_cartpol"], "unknown experiment 'ppo_cartpol'"),
    ("conflict", ["experiment=ppo_cartpole", "agent.minibatches=7"], "does not divide"),
    ("conflict", ["experiment=dqn_cartpole", "trainer.buffer_size=10"], "larger than the replay"),
    # the command line itself
    ("syntax", ["agent.hidden=[1,2"], "cannot read the command line"),
    ("syntax", ["seed=0,1"], "'seed=0,1' gives several values: sweep them with -m"),
    ("option", ["-m", "agent=dqn,bogus"], "unknown agent 'bogus'"),
    ("key", ["-m", "seed=0,1", "trainer.no_such=1"], "unknown config key 'trainer.no_such'"),
    ("key", ["trainer.foo=1"], "trainer has no key foo (python -m gpurl.train --help"),
]


def case_id(case) -> str:
    return f"{case[0]}:{' '.join(case[1])}"


FIRST_OF_EACH_KIND = [next(c for c in CASES if c[0] == kind) for kind in KINDS]


def run_cli(argv, tmp_path, monkeypatch, capsys) -> tuple[int, list[str], Path]:
    """`python -m gpurl.train ARGV` in this process: (exit status, stderr lines, run dir)."""
    run_dir = tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["gpurl.train"])  # cli sets it for Hydra's main
    dirs = [f"hydra.run.dir={run_dir}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    dirs = [d for d in dirs if not any(a.startswith(d.split("=")[0]) for a in argv)]
    # Hydra's main reconfigures logging, closing every handler there is, and absl's
    # handler (dm_control imports absl: tests/envs/test_dmc.py) then closes its stream
    # unless it is a standard one. Imported under another test, that stream is pytest's
    # captured stderr; in a process of its own it is the real one, so make it that.
    absl = sys.modules.get("absl.logging")
    if absl is not None:
        monkeypatch.setattr(absl.get_absl_handler().python_handler, "stream", sys.__stderr__)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        cli([*argv, *dirs])
    return stop.value.code, capsys.readouterr().err.strip().splitlines(), run_dir


def assert_refused(code, lines, run_dir, fragment, tmp_path) -> None:
    assert code == 2, lines
    assert len(lines) == 1, lines  # one line, no traceback, no Hydra dump
    assert lines[0].startswith("gpurl: error: ") and fragment in lines[0], lines[0]
    # nothing that could pass for a run: no directory, or one holding error.txt alone
    assert {p.name for p in tmp_path.iterdir()} <= {"run"}
    if run_dir.exists():
        assert [p.name for p in run_dir.iterdir()] == ["error.txt"]
        assert (run_dir / "error.txt").read_text() == lines[0] + "\n"


@pytest.mark.parametrize("case", FIRST_OF_EACH_KIND, ids=case_id)
def test_each_kind_of_mistake_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    _, argv, fragment = case
    assert_refused(*run_cli(argv, tmp_path, monkeypatch, capsys), fragment, tmp_path)


@pytest.mark.slow  # ~0.5 s each, in this process
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_case_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    _, argv, fragment = case
    assert_refused(*run_cli(argv, tmp_path, monkeypatch, capsys), fragment, tmp_path)


@pytest.mark.slow  # a process each: ~6 s
@pytest.mark.parametrize("case", FIRST_OF_EACH_KIND, ids=case_id)
def test_each_kind_of_mistake_from_a_real_process(case, tmp_path):
    _, argv, fragment = case
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *argv]
        + (
            []
            if any(a.startswith("hydra.run.dir=") for a in argv)
            else [f"hydra.run.dir={run_dir}"]
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": pythonpath(ROOT)},
    )
    assert out.stdout == ""
    assert_refused(out.returncode, out.stderr.strip().splitlines(), run_dir, fragment, tmp_path)


def test_the_cases_cover_every_kind_and_group():
    assert len(CASES) >= 110  # 100 before issue 44's NaN, device and run-directory cases
    assert {kind for kind, _, _ in CASES} == set(KINDS)
    words = " ".join(" ".join(argv) for _, argv, _ in CASES)
    for group in ("seed", "device", "threads", "env", "agent", "trainer", "logger", "compile"):
        assert group in words
    assert "experiment=" in words


# -- from the schema: every key of every option -------------------------------------------


def bad_values(tp, meta) -> list:
    """Values that cannot fit a key: one of another type, one out of its range."""
    inner, nullable = _optional(tp)
    out = []
    if inner is bool:
        out.append("maybe")
    elif inner in (int, float):
        out += ["many"] + ([2.5] if inner is int else [])
        if inner is float and not meta.get("nonfinite"):  # every float key: NaN, inf
            out += [float("nan"), float("inf"), float("-inf")]
        step = 1 if inner is int else 0.5
        for bound, bad in (("ge", -step), ("gt", 0), ("le", step), ("lt", 0)):
            if meta.get(bound) is not None:
                out.append(meta[bound] + bad)
    elif inner is str:
        out.append("bogus" if meta.get("choices") else 7)
    elif typing.get_origin(inner) is list:
        out.append(7)
        if typing.get_args(inner) == (float,) and not meta.get("nonfinite"):
            out.append([float("inf")])
        if meta.get("choices"):
            out.append(["bogus"])
        if meta.get("ge") is not None:
            out.append([meta["ge"] - 1])
        if meta.get("gt") is not None:
            out.append([meta["gt"]])
        if meta.get("nonempty"):
            out.append([])
    else:  # a mapping
        out.append(7)
    if not nullable:
        out.append(None)
    return out


BASE = {("env", "custom"): ["env._target_=my_package.make_env"]}


@functools.cache
def composed(*overrides: str):
    """load_config, once per command line (tests copy what they change)."""
    return load_config(list(overrides))


def schema_cases():
    """(overrides, key, bad value) for every key of every group option and the top level:
    a key declared alike in several options (gamma in every agent) is tried in the first."""
    options = [("", "", Root), *((g, o, s) for (g, o), s in yaml_files().items())]
    seen = set()
    for group, option, schema in options:
        base = ([f"{group}={option}"] if group else []) + BASE.get((group, option), [])
        for path, tp, _, meta in keys_of(schema):
            if path in ("name", "_target_"):  # these pick the schema: CASES has them
                continue
            key = f"{group}.{path}" if group else path
            for bad in bad_values(tp, meta):
                declared = (key, str(tp), repr(sorted(meta.items())), repr(bad))
                if declared not in seen:
                    seen.add(declared)
                    yield base, key, bad


@functools.cache
def composed_plain(*overrides: str) -> dict:
    return OmegaConf.to_container(composed(*overrides), resolve=True)


def with_value(base: tuple[str, ...], key: str, value) -> dict:
    """The composed config of `base` as plain values (check_config reads those the same,
    and copies them 20x faster than a DictConfig) with `key` set to `value`."""
    cfg = copy.deepcopy(composed_plain(*base))
    *parents, last = key.split(".")
    node = cfg
    for part in parents:
        node = node[part]
    node[last] = value
    return cfg


def test_every_key_of_every_option_refuses_a_bad_value():
    """Hundreds of cases: each a one-line ConfigError that starts with the key."""
    failures, count = [], 0
    for base, key, bad in schema_cases():
        count += 1
        cfg = with_value(tuple(base), key, bad)
        try:
            check_config(cfg)
            failures.append(f"{base} {key}={bad!r}: accepted")
        except ConfigError as err:
            if "\n" in str(err) or not str(err).startswith(key):
                failures.append(f"{base} {key}={bad!r}: {err}")
    assert count >= 800  # with NaN, inf and -inf for every float key
    assert not failures, "\n".join(failures[:20])


@pytest.mark.slow  # ~10 ms each: the exit path and the run directory, hundreds of times
def test_every_key_of_every_option_exits_2_leaving_error_txt(tmp_path, capsys, monkeypatch):
    """The same cases, each through train_or_exit (what Hydra's main calls): exit 2,
    one line naming the key, the run directory left holding error.txt alone."""
    monkeypatch.setattr("gpurl.train.gpurl_commit", lambda: None)  # a git call per run
    failures, count = [], 0
    for base, key, bad in schema_cases():
        count += 1
        cfg = composed(*base).copy()
        OmegaConf.update(cfg, key, bad, merge=False)
        run_dir = tmp_path / f"run{count}"
        (run_dir / ".hydra").mkdir(parents=True)  # as Hydra's main leaves it
        (run_dir / ".hydra" / "config.yaml").write_text("# the composed config\n")
        with pytest.raises(SystemExit) as stop:
            train_or_exit(cfg, run_dir)
        lines = capsys.readouterr().err.strip().splitlines()
        ok = (
            stop.value.code == 2
            and len(lines) == 1
            and lines[0].startswith(f"gpurl: error: {key}")
            and [p.name for p in run_dir.iterdir()] == ["error.txt"]
        )
        if not ok:
            failures.append(f"{base} {key}={bad!r}: exit {stop.value.code}, {lines}")
    assert count >= 800  # with NaN, inf and -inf for every float key
    assert not failures, "\n".join(failures[:20])


# -- what must stay valid -----------------------------------------------------------------


@pytest.mark.parametrize("experiment", group_options("experiment"))
def test_every_experiment_passes_the_schema(experiment):
    check_config(composed(f"experiment={experiment}"))


def test_every_logger_and_compile_option_passes_the_schema():
    """The options written by hand over the generated ones (compile=full, cudagraphs)
    included; compile=cudagraphs asks for a CUDA device."""
    for group in ("logger", "compile"):
        for option in group_options(group):
            cfg = composed(f"{group}={option}")
            if option == "cudagraphs" and not torch.cuda.is_available():
                with pytest.raises(ConfigError, match="compile.cudagraphs needs a CUDA"):
                    check_config(cfg)
            else:
                check_config(cfg)


# Default pairs the schema refuses by design (pairs that cannot act, a discrete agent on
# continuous actions say, pass the schema and are refused by build with their own line).
REFUSED_PAIRS = {
    # one rollout of 1,024 envs x 128 steps is 131,072 frames, over the default 40,000
    ("pixels", "ppo"): "less than one rollout",
    ("pixels", "a2c"): "less than one rollout",
    ("pixels", "pqn"): "less than one rollout",
    # one step of 1,024 envs is the smallest off-policy batch: fits 40,000; none others
}


def test_every_env_and_agent_pair_passes_or_is_refused_in_one_line():
    envs = [o for o in group_options("env") if o != "custom"]
    agents = [o for o in group_options("agent") if o != "custom"]
    refused = {}
    for env in envs:
        for agent in agents:
            # what env=ENV agent=AGENT composes: the agent group is independent of the env
            cfg = composed(f"env={env}").copy()
            cfg.agent = composed(f"agent={agent}").agent
            try:
                check_config(cfg)
            except ConfigError as err:
                assert "\n" not in str(err)
                refused[(env, agent)] = str(err)
    assert set(refused) == set(REFUSED_PAIRS)
    for pair, fragment in REFUSED_PAIRS.items():
        assert fragment in refused[pair]


class RenamedDQN(DQNAgent):
    """A subclass of a gpurl agent under a name of its own (as examples/soft_dqn.py)."""

    name = "renamed_dqn"


def test_open_configs_check_what_gpurl_reads_and_pass_the_rest():
    """A `_target_` env or agent: its own keys go to its factory or class unchecked;
    the keys gpurl reads are still checked."""
    env = ["env=custom", "env._target_=my_package.make_env", "+env.size=5", "+env.anything=x"]
    check_config(load_config(env))
    with pytest.raises(ConfigError, match="env.num_envs must be >= 1"):
        check_config(load_config([*env, "env.num_envs=0"]))
    # under a name of its own (examples/: env.name=catch), likewise
    check_config(load_config([*env, "env.name=catch"]))
    with pytest.raises(ConfigError, match="env.eval_envs must be >= 1"):
        check_config(load_config([*env, "env.name=catch", "env.eval_envs=0"]))
    # a VMAS scenario's own options pass; env=vmas's keys are checked
    vmas = ["env=vmas", "+env.n_agents=3", "+env.shared_rew=true", "+env.collisions=false"]
    check_config(load_config(vmas))
    with pytest.raises(ConfigError, match="env.scenario must be a str"):
        check_config(load_config([*vmas, "env.scenario=7"]))
    # env=dmc relabelled is still dmc (found by its factory): its keys are checked
    with pytest.raises(ConfigError, match="env.frame_skip must be >= 1"):
        check_config(load_config(["env=dmc", "env.name=walker", "env.frame_skip=0"]))
    # a subclass of a gpurl agent keeps its keys (checked) and adds its own (passed on)
    ppo = ["agent=ppo", "+agent._target_=gpurl.agents.ppo.PPOAgent", "+agent.my_coef=3"]
    check_config(load_config(ppo))
    with pytest.raises(ConfigError, match="agent.gamma must be in"):
        check_config(load_config([*ppo, "agent.gamma=7"]))
    with pytest.raises(ConfigError, match="cannot be imported"):
        check_config(load_config(["agent=custom", "agent._target_=no_such.Agent"]))
    # an encoder of one's own: its keys pass to it, gpurl's encoder keys are still typed
    encoder = ["+agent.encoder._target_=my_package.make_encoder", "+agent.encoder.width=3"]
    check_config(load_config(encoder))
    with pytest.raises(ConfigError, match="agent.encoder.embed must be >= 0"):
        check_config(load_config([*encoder, "agent.encoder.embed=-1"]))
    # a subclass under its own name keeps the keys of the gpurl agent it extends
    renamed = [
        "agent=dqn",
        f"+agent._target_={__name__}.RenamedDQN",
        "agent.name=renamed_dqn",
        "+agent.temperature=0.05",
    ]
    check_config(load_config(renamed))
    with pytest.raises(ConfigError, match="agent.tau must be in"):
        check_config(load_config([*renamed, "agent.tau=2"]))


# -- one declaration: YAML, reference and help agree --------------------------------------


def test_the_yaml_files_are_generated_from_the_schema():
    """Each group option's file is what `python -m gpurl.schema --write` writes, and
    config.yaml holds the top-level keys as the schema writes them."""
    assert write_yaml(check=True) == []
    assert yaml_keys(Root) in (CONFIGS / "config.yaml").read_text()


def test_every_option_file_is_generated_a_preset_or_open():
    """Each YAML file of a group is one of: generated from a registered config, a preset
    over a generated one, or an open config written by hand (agent=custom)."""
    generated = yaml_files()
    for group in ("env", "agent", "trainer", "logger", "compile"):
        for option in group_options(group):
            if not (CONFIGS / group / f"{option}.yaml").is_file():  # an installed plug-in's
                assert not registry.find(group, option).own, (group, option)
                continue
            text = (CONFIGS / group / f"{option}.yaml").read_text()
            preset = "defaults:" in text  # compile=full, env=marinenav_continuous
            open_ = "_target_: ???" in text  # agent=custom
            assert (group, option) in generated or preset or open_, (group, option)
    for group in ("env", "agent", "logger"):  # and every registered option of gpurl's has one
        for name, comp in registry.components(group).items():
            assert (CONFIGS / group / f"{name}.yaml").is_file() or not comp.own, (group, name)


def test_the_reference_lists_every_key_with_its_type_range_default_and_doc():
    rows = reference()

    def leaves(node, prefix, listed):
        for k, v in node.items():
            if isinstance(v, dict) and f"{prefix}{k}" not in listed:
                yield from leaves(v, f"{prefix}{k}.", listed)
            else:
                yield f"{prefix}{k}", v

    for group, option in yaml_files():
        node = OmegaConf.to_container(composed(f"{group}={option}")[group])
        listed = {r.path: r for r in rows if r.group == group and r.option == option}
        values = dict(leaves(node, f"{group}.", listed))
        assert set(values) == set(listed), (group, option)
        for path, row in listed.items():
            assert row.doc and row.type and values[path] == row.default, path


def test_help_lists_the_keys_of_the_chosen_options_with_their_docs(capsys):
    assert print_help(["agent=ppo", "--help"]) == 0
    out = capsys.readouterr().out
    docs = {r.path: r.doc for r in reference() if r.option in ("ppo", "default", "cartpole")}
    for path in ("agent.clip_epsilon", "agent.gae_lambda", "trainer.rollout_steps"):
        line = next(line for line in out.splitlines() if line.strip().startswith(path + "="))
        assert docs[path] in line
    assert "seed=0" in out and "env.num_envs=8" in out
    assert print_help(["agent=bogus", "--help"]) == 2
    assert "unknown agent 'bogus'" in capsys.readouterr().err


@pytest.mark.slow  # processes
def test_help_and_hydras_own_flags_from_the_command_line(tmp_path):
    env = {**__import__("os").environ, "PYTHONPATH": pythonpath(ROOT)}

    def train(*args):
        return subprocess.run(
            [sys.executable, "-m", "gpurl.train", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    out = train("env=pendulum", "agent=sac", "--help")
    assert out.returncode == 0 and "agent.init_alpha=1.0" in out.stdout
    job = train("agent=ppo", "--cfg", "job")  # Hydra's: the composed config, nothing run
    assert job.returncode == 0 and "clip_epsilon: 0.2" in job.stdout
    info = train("--info", "config")
    assert info.returncode == 0 and "Config search path" in info.stdout
    assert list(tmp_path.iterdir()) == []


# -- resume into a run of another shape -----------------------------------------------------

SMALL = [
    "agent.hidden=[16,16]",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.total_frames=64",
    "trainer.init_random_frames=16",
    "trainer.batch_size=8",
    "logger=none",
    "trainer.progress=false",
]
PIXELS = ["env=pixels", "env.map_height=8", "env.map_width=8", "agent.encoder.cnn=tile"]
MINATAR = ["env=minatar", "agent.encoder.cnn=minatar", "agent.encoder.cnn_features=16"]


@pytest.mark.parametrize(
    "first, then, fragment",
    [
        ([], ["agent.hidden=[32,32]"], "checkpoint's networks differ from this run's"),
        ([], ["agent.dueling=true"], "checkpoint's networks differ from this run's"),
        ([], ["env.num_envs=4"], "written with env.num_envs=2, this run has env.num_envs=4"),
        ([], ["env=pendulum", "agent=sac"], "written by env=cartpole, this run has env=pendulum"),
        (PIXELS, [*PIXELS, "env.stack_k=2"], "observes pixels of shape [1, 72, 80]"),
        (  # a MinAtar game's channels: breakout's 4, seaquest's 10
            [*MINATAR, "env.game=breakout"],
            [*MINATAR, "env.game=seaquest"],
            "observes observation of shape [4, 10, 10], this run's [10, 10, 10]",
        ),
    ],
    ids=["hidden", "dueling", "num_envs", "env", "observation", "minatar_channels"],
)
def test_resume_into_another_shape_is_refused_in_one_line(tmp_path, first, then, fragment):
    run = tmp_path / "first"
    build(load_config([*SMALL, *first]), run).save()
    with pytest.raises(ConfigError, match=__import__("re").escape(fragment)) as err:
        build(load_config([*SMALL, *then, f"trainer.resume={run}"]), tmp_path / "then")
    assert "\n" not in str(err.value)
    # the same settings resume
    build(load_config([*SMALL, *first, f"trainer.resume={run}"]), tmp_path / "same")
