"""The config mechanism: the check a composed config must pass before a run starts,
`python -m gpurl.train --help`, the docs' configuration reference and the group YAML
files, all read from the config dataclasses the components declare beside their code
(gpurl/core/config.py: `key`, `declare`) and register by name (gpurl/core/registry.py).
This module declares the keys that belong to no component:

    top level   seed, device, threads                       (Root)
    trainer     Trainer
    compile     Compile

and finds every other group's: env, agent and logger configs by the option's `name`,
an encoder block's by agent.encoder.name. The YAML files of gpurl's own options are
generated from the declarations (`python -m gpurl.schema --write`; tests/test_bad_input.py
fails when one is stale); a plug-in's options reach Hydra through its ConfigStore.

`check_config(cfg)` (called first in gpurl.train.build) raises ConfigError, one line
naming the key, what was given and what fits, at the first key that does not fit: a
wrong type, a value out of range, an unknown or missing key, an unavailable device, or
keys that contradict each other (the budget against one rollout, a minibatch larger than
the replay, and each config's own `check_together`). Configs with a `_target_` (env=custom,
a factory of one's own) are open: the keys gpurl reads are checked, the others go to the
factory as they are. So are agents registered without keys of their own: the keys of
their kind are checked (agents/config.py).
"""

import copy
import dataclasses
import difflib
import inspect
import math
import operator
import sys
import types
import typing
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpurl.agents import OffPolicyAgent, OnPolicyAgent, agent_class
from gpurl.agents.config import AgentConfig, OffPolicyConfig, OnPolicyConfig
from gpurl.core import registry
from gpurl.core.config import MISSING, Schema, group, key
from gpurl.envs.config import AnyEnvConfig
from gpurl.errors import ConfigError
from gpurl.utils.device import resolve_device

CONFIGS = Path(__file__).resolve().parent / "configs"
GROUPS = ("env", "agent", "trainer", "logger", "compile")
# groups whose options are registered components, chosen by `name`
COMPONENT_GROUPS = ("env", "agent", "logger")


# -- the keys of no component -------------------------------------------------------------


@dataclass
class Root(Schema):
    """The keys outside the groups."""

    seed: int = key(
        0, "seed of envs, networks and exploration (evaluation envs: seed + 10000)", ge=0
    )
    device: str = key("auto", "auto | cpu | cuda | cuda:N (auto: CUDA when present)")
    threads: int = key(
        1,
        "torch intra-op threads; 0 keeps torch's default (all cores)",
        ge=0,
        note=(
            "One thread is fastest for small networks on a CPU, and far faster when other",
            "processes share the cores (with two threads on a loaded 2-core machine, small ops",
            "wait on the second thread).",
        ),
    )
    flush_denormal: bool = key(
        True,
        "CPU: flush denormal floats to zero (torch.set_flush_denormal)",
        note=(
            "Adam's first moment of a unit whose gradient stays zero decays by 0.9 a step",
            "into the denormal range, where x86 arithmetic is many times slower: with it",
            "on, an iteration of the RL Zoo's Acrobot DQN takes 2.5 ms instead of 3.1 ms",
            "(docs/benchmarks.md). Values below 1.2e-38 become 0; false keeps IEEE",
            "gradual underflow.",
        ),
    )


@dataclass
class PerSeed(Schema):
    """Hyperparameters each run of trainer.num_seeds has of its own: a list of one value
    per seed replaces the agent's key for that run (null: every run takes the agent's)."""

    lr: list[float] | None = key(None, "agent.lr per run (dqn, ppo, a2c, pqn)", gt=0)
    actor_lr: list[float] | None = key(None, "agent.actor_lr per run (sac, td3, ddpg)", gt=0)
    critic_lr: list[float] | None = key(None, "agent.critic_lr per run (sac, td3, ddpg)", gt=0)
    alpha_lr: list[float] | None = key(None, "agent.alpha_lr per run (sac)", gt=0)
    gamma: list[float] | None = key(None, "agent.gamma per run", gt=0, le=1)
    entropy_coef: list[float] | None = key(None, "agent.entropy_coef per run (ppo, a2c)", ge=0)
    epsilon_start: list[float] | None = key(
        None, "agent.epsilon_start per run (epsilon-greedy)", ge=0, le=1
    )
    epsilon_end: list[float] | None = key(
        None, "agent.epsilon_end per run (epsilon-greedy)", ge=0, le=1
    )


SPACE_DOC = "{low, high} uniform, {low, high, log: true} log-uniform or {choices: [...]}"


@dataclass
class PBTSpace(Schema):
    """The hyperparameters population-based training searches, each over a range:
    {low, high} (uniform), {low, high, log: true} (log-uniform) or {choices: [...]};
    null: not searched. The keys are trainer.per_seed's."""

    lr: dict | None = key(None, f"agent.lr: {SPACE_DOC}")
    actor_lr: dict | None = key(None, "agent.actor_lr (sac, td3, ddpg)")
    critic_lr: dict | None = key(None, "agent.critic_lr (sac, td3, ddpg)")
    alpha_lr: dict | None = key(None, "agent.alpha_lr (sac)")
    gamma: dict | None = key(None, "agent.gamma")
    entropy_coef: dict | None = key(None, "agent.entropy_coef (ppo, a2c)")
    epsilon_start: dict | None = key(None, "agent.epsilon_start (epsilon-greedy)")
    epsilon_end: dict | None = key(None, "agent.epsilon_end (epsilon-greedy)")


@dataclass
class PBT(Schema):
    """Population-based training of the trainer.num_seeds runs in this process
    (trainers/pbt.py, docs/scaling.md#population-based-training): every interval_frames,
    the runs of lowest fitness copy a run of highest fitness (exploit: its networks,
    optimizer state, exploration state and replay) and perturb or redraw its
    hyperparameters (explore)."""

    enabled: bool = key(False, "tune the runs' hyperparameters (trainer.pbt.space) as they train")
    interval_frames: int = key(
        10000,
        "frames per run between exploit-and-explore steps, taken at the first evaluation "
        "at or after each multiple (below trainer.eval_interval: at every evaluation)",
        ge=1,
    )
    fraction: float = key(
        0.25,
        "truncation selection: the bottom fraction of runs copies the top fraction",
        gt=0,
        le=0.5,
    )
    fitness: int = key(
        1, "K: a run's fitness is the mean of its last K evaluations since it last copied", ge=1
    )
    perturb: list[float] = key(
        [0.8, 1.2],
        "explore: each value is multiplied by one of these, drawn uniformly, and kept in "
        "its range (a choice moves to a neighbour)",
        gt=0,
        nonempty=True,
    )
    resample_prob: float = key(
        0.25, "explore: the chance a value is drawn afresh from its range instead", ge=0, le=1
    )
    replay: str = key(
        "parent",
        "off-policy: a copying run's replay, the parent's data (parent) or its own (own)",
        choices=("parent", "own"),
    )
    space: PBTSpace = group(PBTSpace, "the range of each hyperparameter searched")


@dataclass
class Trainer(Schema):
    """The training loop (gpurl/trainers/). The agent's kind picks the loop: off-policy
    agents learn from a replay (trainers/off_policy.py), on-policy ones from rollouts
    (trainers/on_policy.py). Frames count env steps over all envs (and torchrun's ranks)."""

    total_frames: int = key(40000, "frames to train for (the default run: DQN on CartPole)", ge=1)
    log_interval: int = key(
        2500, "frames between log lines (the only host reads of training metrics)", ge=1
    )
    eval_interval: int = key(
        2500, "frames between greedy evaluations on env.eval_envs copies", ge=1
    )
    stop_at_return: float | None = key(
        None,
        "end the run at the first evaluation whose greedy return reaches this (with "
        "trainer.num_seeds > 1, every run's); null: train to total_frames",
    )
    checkpoint_interval: int = key(10000, "frames between checkpoints (and one at the end)", ge=1)
    resume: str | None = key(
        None,
        "a checkpoint file or run directory to continue from; auto: this run directory's "
        "latest checkpoint when it has one, else start afresh (a requeued job)",
    )
    progress: bool = key(True, "tqdm progress bar")
    frames_per_batch: int | None = key(
        None,
        "frames between update rounds: null = one step of every env (env.num_envs); else "
        "a multiple of it",
        ge=1,
        note=("off-policy agents (dqn, iqn, rainbow, ddpg, td3, sac, acqin, hrl_dqn)",),
    )
    init_random_frames: int = key(1000, "uniform random actions and no updates before this", ge=0)
    utd: float = key(1.0, "gradient updates per collected frame", gt=0)
    batch_size: int = key(128, "the minibatch (over all ranks under torchrun)", ge=1)
    buffer_size: int = key(100000, "replay capacity in transitions (a robot's step is one)", ge=1)
    save_replay: bool = key(
        True, "keep the replay in checkpoints (exact resume); false for huge buffers"
    )
    video_interval: int | None = key(
        None,
        "frames between videos of one greedy episode, videos/frames_<N>.mp4 in the run "
        "directory (native envs draw them); null: none",
        ge=1,
    )
    save_best: bool = key(
        False,
        "also keep checkpoints/best.pt (with its checksum): the agent at the evaluation "
        "of the highest greedy return so far (python -m gpurl.eval --checkpoint best)",
    )
    rollout_steps: int = key(
        128,
        "T: steps per env per rollout (rollout_steps x env.num_envs frames)",
        ge=1,
        note=("on-policy agents (ppo, a2c, pqn; epochs and minibatches are the agent's)",),
    )
    num_seeds: int = key(
        1,
        "independent runs trained at once in this process, seeds seed..seed+N-1, each "
        "with its own env.num_envs envs, networks, optimizer, replay and evaluation",
        ge=1,
        note=("many seeds in one process (core/runs.py: dqn, ddpg, td3, sac, ppo, a2c, pqn)",),
    )
    per_seed: PerSeed = group(PerSeed, "per-run hyperparameters, a list of num_seeds values each")
    pbt: PBT = group(PBT, "population-based training of the num_seeds runs (trainers/pbt.py)")
    hyper_schedule: str | None = key(
        None,
        "a hyperparameter schedule every run follows: a PBT run's directory or summary.json "
        "(its best run's schedule) or a JSON list of [frame, {key: value}]",
    )


@dataclass
class Compile(Schema):
    """The default: nothing compiled (exactly reproducible runs, no compile time).
    Each switch can be set on its own: compile.update=true compile.amp=true ...
    See gpurl/trainers/compile.py and docs/scaling.md."""

    update: bool = key(
        False,
        "torch.compile each gradient step (forward, backward, optimizer; off-policy: the "
        "replay draw too)",
    )
    policy: bool = key(False, "torch.compile the policy the collector acts with")
    env: bool = key(False, "the env's lean step through Inductor (native envs with a lean core)")
    cudagraphs: bool = key(
        False, "CUDA only: capture the steps and the acting policy as CUDA graphs"
    )
    amp: bool = key(False, "bf16 autocast of forward passes; fp32 weights and optimizer state")
    mode: str | None = key(
        None,
        "torch.compile mode (null: default; e.g. max-autotune-no-cudagraphs)",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    )
    warmup: int = key(3, "eager calls before a CUDA graph is captured", ge=1)


# -- components: loading, the YAML files, Hydra's store ------------------------------------


def load_components() -> None:
    """Load gpurl's components and the installed plug-ins (core/registry.py), and put the
    plug-ins' options, which have no YAML file under gpurl/configs, in Hydra's
    ConfigStore, so that env=<name>, agent=<name> and logger=<name> compose theirs."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for g in COMPONENT_GROUPS:
        for name, comp in registry.components(g).items():
            if not (CONFIGS / g / f"{name}.yaml").is_file():
                store.store(group=g, name=name, node={**_defaults(comp.config), "name": name})


def yaml_files() -> dict[tuple[str, str], type]:
    """The YAML file each config class writes: (group, option) -> class. gpurl's own
    options whose config is theirs alone; the others are presets (a defaults list over
    one of these: compile=full, env=marinenav_continuous) or open configs written by hand
    (agent=custom)."""
    out: dict[tuple[str, str], type] = {}
    for g in COMPONENT_GROUPS:
        for name, comp in sorted(registry.components(g).items()):
            if comp.own and _declared_default(comp.config, "name") == name:
                out[(g, name)] = comp.config
        if g == "agent":
            out[("trainer", "default")] = Trainer
    out[("compile", "eager")] = Compile
    return out


def group_options(g: str) -> list[str]:
    """The options of a config group: its YAML files (shared includes, _*.yaml, left out)
    and the registered components without one (plug-ins')."""
    files = {p.stem for p in (CONFIGS / g).glob("*.yaml") if not p.stem.startswith("_")}
    if g in COMPONENT_GROUPS:
        files |= set(registry.names(g))
    return sorted(files)


# -- types and ranges -----------------------------------------------------------------------


def choices_of(meta) -> tuple | None:
    """A key's choices: a tuple, or what its function returns (a registry's names)."""
    choices = meta.get("choices")
    return tuple(choices()) if callable(choices) else choices


def _optional(tp) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def type_name(tp) -> str:
    """How a type reads in a message or the help: "int", "list of int", "float or null"."""
    inner, nullable = _optional(tp)
    if is_dataclass(inner):
        text = "a block of keys"
    elif typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner) or (Any,)
        text = f"list of {type_name(item) if item is not dict else 'mappings'}"
    elif inner is dict or typing.get_origin(inner) is dict:
        text = "mapping"
    elif inner is Any:
        text = "any"
    else:
        text = inner.__name__
    return f"{text} or null" if nullable else text


def range_text(meta) -> str:
    """The range of a key as a short phrase: ">= 1", "in [0, 1]", "one of a, b"."""
    if choices_of(meta):
        return "one of " + ", ".join(str(c) for c in choices_of(meta))
    low = (meta.get("ge"), "[") if meta.get("ge") is not None else (meta.get("gt"), "(")
    high = (meta.get("le"), "]") if meta.get("le") is not None else (meta.get("lt"), ")")
    if low[0] is not None and high[0] is not None:
        return f"in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
    if low[0] is not None:
        return f"{'>=' if low[1] == '[' else '>'} {_num(low[0])}"
    if high[0] is not None:
        return f"{'<=' if high[1] == ']' else '<'} {_num(high[0])}"
    return ""


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def fits(meta, tp) -> str:
    """What fits a key, e.g. "an int >= 1", "a float in [0, 1] or null"."""
    inner, nullable = _optional(tp)
    rng = range_text(meta)
    if typing.get_origin(inner) is list:
        base = ("a non-empty " if meta.get("nonempty") else "a ") + type_name(inner)
        text = f"{base} (each {rng})" if rng and not choices_of(meta) else base
        if choices_of(meta):
            text += f", each {rng}"
    elif inner is bool:
        text = "true or false"
    elif choices_of(meta):
        text = rng
    else:
        article = "an" if type_name(inner)[0] in "aeiou" else "a"
        text = f"{article} {type_name(inner)}" + (f" {rng}" if rng else "")
    return text + (" or null" if nullable else "")


def _show(value) -> str:
    """A value as the command line writes it."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value).replace("'", "").replace(" ", "")


def _type_ok(value, tp) -> bool:
    if tp is Any:
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is dict or typing.get_origin(tp) is dict:
        return isinstance(value, dict)
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if is_dataclass(tp):
        return isinstance(value, dict)
    raise TypeError(f"schema type {tp} is not supported")


def in_range(x, meta) -> bool:
    if choices_of(meta) is not None:
        return x in choices_of(meta)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return True
    checks = (("ge", operator.ge), ("gt", operator.gt), ("le", operator.le), ("lt", operator.lt))
    return all(meta.get(k) is None or op(x, meta[k]) for k, op in checks)


def _not_finite(x) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def check_value(path: str, value, tp, meta) -> None:
    """Raise a one-line ConfigError naming the key, what was given and what fits if `value`
    does not fit the key at `path`."""
    inner, nullable = _optional(tp)
    doc = f" ({meta['doc']})"
    if value == MISSING:
        raise ConfigError(f"{path} is not set: give {path}=<{fits(meta, tp)}>{doc}")
    if value is None:
        if nullable:
            return
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got null{doc}")
    if inner is int and isinstance(value, float) and value.is_integer():
        raise ConfigError(f"{path} must be an int, got {value}: write {path}={int(value)}")
    if choices_of(meta) and typing.get_origin(inner) is not list:
        if not _type_ok(value, inner) or value not in choices_of(meta):
            choices = ", ".join(str(c) for c in choices_of(meta)) + (" or null" if nullable else "")
            if all(str(c) in meta["doc"] for c in choices_of(meta)):
                doc = ""  # the doc lists the choices and nothing more
            raise ConfigError(
                f"{path}={_cli(value)} is unknown: {path} must be one of {choices}{doc}"
            )
        return
    if not _type_ok(value, inner):
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got {_show(value)}{doc}")
    # a NaN passes no comparison and an inf passes a one-sided bound (agent.lr=inf would
    # train): refused here, for every float key, unless its doc gives them a meaning
    numbers = value if isinstance(value, list) else [value]
    if not meta.get("nonfinite") and any(_not_finite(v) for v in numbers):
        raise ConfigError(
            f"{path} must be a finite number, got {_show(value)}: give {path}="
            f"<{fits(meta, tp)}>{doc}"
        )
    if not isinstance(value, list):
        if not in_range(value, meta):
            raise ConfigError(f"{path} must be {range_text(meta)}, got {value}{doc}")
        return
    if any(not in_range(v, meta) for v in value) or (meta.get("nonempty") and not value):
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got {_show(value)}{doc}")


def check_node(
    node: dict, schema, path: str, label: str, open_: bool = False, partial: bool = False
) -> None:
    """Check the keys of `node` (a plain dict) against a schema dataclass: each key's type
    and range, unknown keys (unless the schema, or `open_`, lets them through) and missing
    ones (if the schema is complete and not `partial`). `label` names the option in
    messages (agent=dqn)."""
    hints = typing.get_type_hints(schema)
    known = {f.name: f for f in fields(schema)}
    for k, value in node.items():
        full = f"{path}{k}"
        if k not in known:
            if schema.open or open_:
                continue
            close = difflib.get_close_matches(full, [f"{path}{n}" for n in known], n=1)
            hint = f"did you mean {close[0]}?" if close else "see python -m gpurl.train --help"
            raise ConfigError(f"unknown config key '{full}' for {label}: {hint}")
        tp = hints[k]
        if is_dataclass(tp) and isinstance(value, dict):
            # one's own module factory (agent.encoder._target_): its own keys pass to it,
            # gpurl's keys it may take are typed where given, none is required
            mine = "_target_" in value
            chosen = block_schema(tp, value, full)
            if chosen is not tp:  # a registered block of another's (a plug-in encoder):
                check_node(value, chosen, f"{full}.", label, open_=True, partial=True)
            else:
                check_node(value, tp, f"{full}.", label, open_=mine, partial=mine)
        else:
            check_value(full, value, tp, known[k].metadata)
    if not schema.complete or partial:
        return
    for k, f in known.items():
        if k not in node:
            raise ConfigError(
                f"{path}{k} is missing from {label}: give {path}{k}=<{fits(f.metadata, hints[k])}>"
                f" ({f.metadata['doc']})"
            )


def block_schema(schema, node: dict, path: str):
    """The schema of a block: a registered component's when the block's `name` picks one
    (agent.encoder.name=<a plug-in's encoder>), else its declared one."""
    if schema.registry_group is None or "_target_" in node or "name" not in node:
        return schema
    name = {f.name: f for f in fields(schema)}["name"]
    check_value(f"{path}.name", node["name"], str, name.metadata)
    return registry.get(schema.registry_group, node["name"], f"{path}.name").config


# -- which schema a config has --------------------------------------------------------------


def env_schema(env: dict) -> tuple[type, bool, bool]:
    """(schema, open, partial) of an env config: its family's (a `_target_` config by its
    factory: env=dmc relabelled by env.name is still dmc); env=custom's for another
    `_target_`; the open AnyEnvConfig for a factory of one's own under another name."""
    if "_target_" in env:
        for comp in registry.components("env").values():
            if _declared_default(comp.config, "_target_") == env["_target_"]:
                return comp.config, False, False
        if env.get("name") == "custom":
            return registry.get("env", "custom", "env.name").config, False, False
        return AnyEnvConfig, True, True
    return registry.get("env", env.get("name"), "env.name").config, False, False


def _declared_default(schema, name: str):
    """The default a schema declares for a key, or None if it has no such key."""
    return next((f.default for f in fields(schema) if f.name == name), None)


def agent_kind(agent: dict):
    """The Agent class an agent config builds (gpurl.agents.agent_class: its `_target_`,
    else its registered name; an unknown name or a broken path is a one-line error)."""
    if agent.get("_target_") == MISSING:
        raise ConfigError(
            "agent._target_ is not set: give agent._target_=my_package.MyAgent (an "
            "OffPolicyAgent or OnPolicyAgent subclass)"
        )
    return agent_class(agent)


def agent_schema(agent: dict, cls) -> tuple[type, bool, bool]:
    """(schema, open, partial) of an agent config: the nearest registered agent's among
    the class and its bases (a `_target_` subclass of a gpurl agent keeps its keys,
    whatever its name, and passes its own on); otherwise the keys of its kind."""
    for base in cls.__mro__:
        comp = registry.of_target("agent", base)
        if comp is not None:
            return comp.config, "_target_" in agent, False
    if issubclass(cls, OnPolicyAgent):
        return OnPolicyConfig, True, False
    if issubclass(cls, OffPolicyAgent):
        return OffPolicyConfig, True, True
    return AgentConfig, True, True


def logger_schema(logger: dict) -> type:
    return registry.get("logger", logger.get("name"), "logger.name").config


# -- the check ------------------------------------------------------------------------------


def as_plain(cfg) -> dict:
    """`cfg` as plain Python values, interpolations resolved, `???` kept."""
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        except OmegaConfBaseException as err:
            raise ConfigError(f"config value cannot be resolved: {_first_line(err)}") from err
    return copy.deepcopy(dict(cfg))


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def check_config(cfg) -> None:
    """Raise ConfigError (one line) at the first key of a composed config that does not
    fit the schema, or at keys that contradict each other; return None if all fit."""
    data = as_plain(cfg)
    roots = {f.name for f in fields(Root)}
    for k in data:
        if k not in roots and k not in GROUPS:
            close = difflib.get_close_matches(k, [*roots, *GROUPS], n=1)
            hint = f"did you mean {close[0]}?" if close else "see python -m gpurl.train --help"
            raise ConfigError(f"unknown config key '{k}': {hint}")
    for g in ("env", "agent", "trainer"):
        if not isinstance(data.get(g), dict):
            raise ConfigError(
                f"the config has no {g} group: compose it with gpurl.train.load_config"
            )
    check_node({k: v for k, v in data.items() if k in roots}, Root, "", "the top level")
    device = _check_device(data.get("device", "auto"))

    env = data["env"]
    if not isinstance(env.get("name"), str):
        raise ConfigError(f"env.name={_show(env.get('name'))}: env.name must be a string")
    env_cls, open_, partial = env_schema(env)
    check_node(env, env_cls, "env.", f"env={env['name']}", open_, partial)
    if not partial:
        env_cls.check_together(env)

    agent = data["agent"]
    if not isinstance(agent.get("name"), str):
        raise ConfigError(f"agent.name={_show(agent.get('name'))}: agent.name must be a string")
    cls = agent_kind(agent)
    # a `_target_` class's own keys pass through to it
    agent_cls, open_, partial = agent_schema(agent, cls)
    check_node(agent, agent_cls, "agent.", f"agent={agent['name']}", open_, partial)
    if not partial:
        agent_cls.check_together(agent)

    check_node(data["trainer"], Trainer, "trainer.", "the trainer")
    logger = data.get("logger", {"name": "csv"})
    if isinstance(logger, str):
        logger = {"name": logger}
    check_node(logger, logger_schema(logger), "logger.", f"logger={logger.get('name')}")
    comp = data.get("compile") or {}
    check_node({**_defaults(Compile), **comp}, Compile, "compile.", "compile")

    _check_together(data, env_cls, cls, device)


def _defaults(schema) -> dict:
    return dataclasses.asdict(schema())


def _check_device(name) -> torch.device:
    if not isinstance(name, str):
        raise ConfigError(f"device={_show(name)}: device must be auto, cpu, cuda or cuda:N")
    return resolve_device(name)  # a missing device of any kind: one line naming it


def _check_together(data: dict, env_cls, agent_cls, device: torch.device) -> None:
    """The cross-key checks: what each key may be given what the others are."""
    env, agent, t = data["env"], data["agent"], data["trainer"]
    comp = data.get("compile") or {}
    if comp.get("cudagraphs") and device.type != "cuda":
        raise ConfigError(
            f"compile.cudagraphs needs a CUDA device, this run is on {device}: "
            "set device=cuda or compile.cudagraphs=false"
        )
    _check_network(agent, env_cls)
    # The budget and batch checks need the env's batch: env.num_envs is it for gpurl's own
    # families; a `_target_` factory of one's own may build a batch of its own size.
    if not env_cls.batch_is_num_envs or not issubclass(agent_cls, OnPolicyAgent | OffPolicyAgent):
        return
    n = int(env["num_envs"])
    total = int(t["total_frames"])
    if issubclass(agent_cls, OnPolicyAgent):
        rollout = n * int(t["rollout_steps"])
        if total < rollout:
            raise ConfigError(
                f"trainer.total_frames={total} is less than one rollout: env.num_envs x "
                f"trainer.rollout_steps = {n} x {t['rollout_steps']} = {rollout} frames; "
                f"raise trainer.total_frames to >= {rollout} or lower env.num_envs or "
                f"trainer.rollout_steps"
            )
        mb = agent.get("minibatches")
        if isinstance(mb, int) and rollout % mb:
            raise ConfigError(
                f"agent.minibatches={mb} does not divide trainer.rollout_steps x env.num_envs "
                f"= {rollout}: pick a divisor"
            )
        return
    fpb = t.get("frames_per_batch")
    if fpb is not None and fpb % n:
        raise ConfigError(
            f"trainer.frames_per_batch={fpb} is not a multiple of env.num_envs={n}: each "
            f"batch is whole steps of every env; use {max(n, fpb - fpb % n)} or {fpb - fpb % n + n}"
        )
    batch = fpb or n
    if total < batch:
        raise ConfigError(
            f"trainer.total_frames={total} is less than one batch of {batch} frames "
            f"(trainer.frames_per_batch, or env.num_envs={n}): raise trainer.total_frames "
            f"to >= {batch}"
        )
    if int(t["batch_size"]) > int(t["buffer_size"]):
        raise ConfigError(
            f"trainer.batch_size={t['batch_size']} is larger than the replay, "
            f"trainer.buffer_size={t['buffer_size']}: lower the batch or raise the buffer"
        )


def _check_network(agent: dict, env_cls) -> None:
    """An empty `hidden` leaves a vector observation one linear map from the output: no
    network to learn with. It fits where an encoder learns features (images, object
    slots, agent.encoder.embed > 0, an encoder of one's own)."""
    if agent.get("hidden") != [] or env_cls.obs != "vector":
        return
    enc = agent.get("encoder") or {}
    if "_target_" in enc or (enc.get("embed") or 0) > 0:
        return
    raise ConfigError(
        "agent.hidden=[]: this env's observation is a vector, so the network would be one "
        "linear map; give hidden widths, e.g. agent.hidden=[64,64] (or agent.encoder.embed > 0)"
    )


# -- introspection: the reference, the help, the YAML ---------------------------------------


@dataclass(frozen=True)
class KeyDoc:
    """One key of one option, as the docs' configuration reference lists it."""

    group: str  # "" for the top level
    option: str  # the option's name (dqn, cartpole, default)
    path: str  # the key as an override writes it: agent.encoder.embed
    type: str
    range: str
    default: Any
    doc: str


def ordered_fields(schema) -> list[dataclasses.Field]:
    """A schema's keys in the order they are shown: `name` first, blocks last, and
    between them its own keys first where the schema says so (own_keys_first: an agent's
    algorithm before its replay), else in declaration order (an env's common keys first)."""
    mro = schema.__mro__
    declared_at: dict[str, int] = {}  # key -> MRO depth of the first class declaring it
    for depth in range(len(mro) - 1, -1, -1):
        for name in mro[depth].__dict__.get("__annotations__", {}):
            declared_at.setdefault(name, depth)
    hints = typing.get_type_hints(schema)

    def rank(item):
        position, f = item
        depth = declared_at[f.name] if schema.own_keys_first else 0
        return (f.name != "name", is_dataclass(hints[f.name]), depth, position)

    return [f for _, f in sorted(enumerate(fields(schema)), key=rank)]


def keys_of(schema, prefix: str = "", node: dict | None = None) -> list[tuple[str, Any, Any, dict]]:
    """(path, type, default, metadata) of every key of a schema, nested blocks flattened,
    in the order they are shown; `node` (a config's values) picks the schema of a block
    whose name chooses a registered one (agent.encoder.name)."""
    hints = typing.get_type_hints(schema)
    out = []
    defaults = dataclasses.asdict(schema())
    for f in ordered_fields(schema):
        tp = hints[f.name]
        if is_dataclass(tp):
            sub = (node or {}).get(f.name)
            chosen = block_schema(tp, sub, f"{prefix}{f.name}") if isinstance(sub, dict) else tp
            out += keys_of(chosen, f"{prefix}{f.name}.", sub if isinstance(sub, dict) else None)
        else:
            out.append((f"{prefix}{f.name}", tp, defaults[f.name], dict(f.metadata)))
    return out


def options(own_only: bool = False) -> list[tuple[str, str, type]]:
    """(group, option, schema) of every option with a schema, the top level first, then
    by group: env, agent, trainer, logger, compile, and the registered encoders (group
    "encoder", keys under agent.encoder). `own_only`: gpurl's own, no plug-in's."""
    out = [("", "", Root)]
    for g in (*COMPONENT_GROUPS, "encoder"):
        if g == "logger":
            out.append(("trainer", "default", Trainer))
        for name, comp in sorted(registry.components(g).items()):
            if comp.own or not own_only:
                out.append((g, name, comp.config))
        if g == "logger":
            out.append(("compile", "eager", Compile))
    return out


def key_path(g: str, path: str) -> str:
    """A key of a group's option as an override writes it."""
    if g == "encoder":
        return f"agent.encoder.{path}"
    return f"{g}.{path}" if g else path


def reference(own_only: bool = False) -> list[KeyDoc]:
    """Every key of every group option: type, range, default and doc (the docs site's
    configuration reference is generated from this)."""
    rows = []
    for g, option, schema in options(own_only):
        for path, tp, default, meta in keys_of(schema):
            rows.append(
                KeyDoc(
                    g,
                    option,
                    key_path(g, path),
                    type_name(tp),
                    range_text(meta),
                    default,
                    meta["doc"],
                )
            )
    return rows


def help_text(cfg, choices: dict[str, str]) -> str:
    """`python -m gpurl.train --help`: the groups and their options, then every key of
    the chosen options with its current value, type and range, and doc."""
    import textwrap

    data = as_plain(cfg)
    lines = [
        "usage: python -m gpurl.train [GROUP=OPTION ...] [KEY=VALUE ...] [-m] [--cfg job]",
        "",
        "Groups (GROUP=OPTION), the default first:",
    ]
    first = {
        "env": "cartpole",
        "agent": "dqn",
        "trainer": "default",
        "logger": "csv",
        "compile": "eager",
        "experiment": "none",
    }
    for g, default in first.items():
        names = [default] + [o for o in group_options(g) if o != default]
        text = textwrap.fill(
            ", ".join(names), 100, initial_indent=f"  {g:<12}", subsequent_indent=" " * 14
        )
        lines.append(text)
    chosen = " ".join(f"{g}={v}" for g, v in choices.items()) or "the defaults"
    lines += ["", f"Keys of {chosen}; put GROUP=OPTION before --help for another's:"]

    def block(title, node, schema, prefix):
        rows = [
            (f"{prefix}{path}={_cli(_lookup(node, path))}", _kind(tp, meta), meta["doc"])
            for path, tp, _, meta in keys_of(schema, node=node)
        ]
        declared = {f.name for f in fields(schema)}
        rows += [
            (f"{prefix}{k}={_cli(v)}", "", "passed on as it is")
            for k, v in node.items()
            if k not in declared
        ]
        left = min(max(len(r[0]) for r in rows), 36)
        middle = min(max(len(r[1]) for r in rows), 18)
        lines.append(title)
        lines.extend(f"  {a:<{left}}  {b:<{middle}}  {c}".rstrip() for a, b, c in rows)

    def schema_or(fallback, find, node):
        try:
            return find(node)
        except ConfigError:  # agent=custom before its _target_ is given
            return fallback

    roots = {f.name for f in fields(Root)}
    block("top level", {k: v for k, v in data.items() if k in roots}, Root, "")
    env = data["env"]
    env_cls = schema_or(AnyEnvConfig, lambda e: env_schema(e)[0], env)
    block(f"env={env.get('name')}", env, env_cls, "env.")
    agent = data["agent"]
    find_agent = lambda a: agent_schema(a, agent_kind(a))[0]  # noqa: E731
    block(f"agent={agent.get('name')}", agent, schema_or(AgentConfig, find_agent, agent), "agent.")
    block("trainer", data["trainer"], Trainer, "trainer.")
    logger = data.get("logger", {"name": "csv"})
    logger_cls = schema_or(
        registry.get("logger", "csv", "logger.name").config, logger_schema, logger
    )
    block(f"logger={logger.get('name')}", logger, logger_cls, "logger.")
    block("compile", data.get("compile") or _defaults(Compile), Compile, "compile.")
    lines += ["", "Hydra's own: --cfg job (the composed config), --info, --hydra-help."]
    failed = registry.failed()
    if failed:
        lines += ["", *(f"Left out: {line}" for line in failed)]
    return "\n".join(lines)


def _kind(tp, meta) -> str:
    """A key's type and range for the help: "int >= 1", "huber|mse", "[int >= 1]"."""
    inner, nullable = _optional(tp)
    rng = range_text(meta)
    if choices_of(meta) and inner is str:
        text = "|".join(str(c) for c in choices_of(meta))
    elif typing.get_origin(inner) is list:
        item = type_name(inner).removeprefix("list of ")
        text = f"[{item}{' ' + rng if rng and not choices_of(meta) else ''}]"
    else:
        text = type_name(inner) + (f" {rng}" if rng else "")
    return f"{text}|null" if nullable else text


def _cli(value) -> str:
    """A value as the command line writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        return str(value).replace("'", "").replace(" ", "")
    return str(value)


def _lookup(node: dict, path: str):
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value and abs(value) < 0.002:  # learning rates read best as 2.5e-4
            mantissa, exp = f"{value:e}".split("e")
            mantissa = mantissa.rstrip("0")
            return f"{mantissa}{'0' if mantissa.endswith('.') else ''}e{int(exp)}"
        return repr(value)
    if isinstance(value, str):
        plain = value and value not in ("null", "true", "false", "yes", "no", "on", "off")
        if plain and not any(c in value for c in ":#{}[],&*!|>'\"%@`") and value.strip() == value:
            return value
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in value.items()) + "}"
    return str(value)


def yaml_text(schema) -> str:
    """The YAML file of a schema: its docstring as the header, then its keys."""
    header = [f"# {line}".rstrip() for line in (inspect.getdoc(schema) or "").splitlines()]
    source = schema.__module__.replace(".", "/") + ".py"
    header.append(f"# Keys, types and ranges: {source} (python -m gpurl.schema --write)")
    return "\n".join(header) + "\n" + yaml_keys(schema)


def yaml_keys(schema) -> str:
    """A schema's keys as YAML: each with its default and its doc as the comment, notes
    above keys, nested blocks indented (config.yaml holds Root's keys as this writes them)."""
    rows: list[tuple[str, str | None]] = []

    def walk(cls, indent):
        hints = typing.get_type_hints(cls)
        defaults = dataclasses.asdict(cls())
        pad = " " * indent
        for f in ordered_fields(cls):
            meta = f.metadata
            rows.extend((f"{pad}# {line}", None) for line in meta.get("note", ()))
            tp, value = hints[f.name], defaults[f.name]
            if is_dataclass(tp):
                rows.append((f"{pad}{f.name}:", meta["doc"]))
                walk(tp, indent + 2)
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                rows.append((f"{pad}{f.name}:", meta["doc"]))
                rows.extend((f"{pad}  - {_yaml_scalar(v)}", None) for v in value)
            else:
                rows.append((f"{pad}{f.name}: {_yaml_scalar(value)}", meta["doc"]))

    walk(schema, 0)
    column = min(max(len(t) for t, c in rows if c), 30)
    lines = [f"{text.ljust(column)}  # {comment}" if comment else text for text, comment in rows]
    return "\n".join(lines) + "\n"


def write_yaml(check: bool = False) -> list[Path]:
    """Write (or with check=True, only list) the group option files that differ from
    their schema. Returns the files that differed."""
    stale = []
    for (g, option), schema in yaml_files().items():
        path = CONFIGS / g / f"{option}.yaml"
        text = yaml_text(schema)
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    return stale


if __name__ == "__main__":
    from gpurl import schema  # this file as gpurl.schema: its classes' module names the YAML

    if sys.argv[1:] == ["--write"]:
        for p in schema.write_yaml():
            print(f"wrote {p}")
    elif sys.argv[1:] == ["--check"]:
        stale = schema.write_yaml(check=True)
        for p in stale:
            print(f"stale: {p}")
        sys.exit(1 if stale else 0)
    else:
        print("python -m gpurl.schema --write | --check  (the group YAML files from the schema)")
