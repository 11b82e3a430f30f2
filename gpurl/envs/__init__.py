"""Env families and the one factory the trainer uses: `make_env(env_cfg, ...)`.

Each env family registers itself by name with its config keys (gpurl/core/registry.py):
a native env class (its constructor takes num_envs, device, seed, and any other keys of
the env config as keyword arguments) or a factory. Any other TorchRL env comes in
through a config's `_target_`, a factory that returns it (env._target_=my_package.make_env:
envs/foreign.make_target_env).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpurl.core import registry
from gpurl.core.targets import TARGET
from gpurl.envs.base import NativeEnv
from gpurl.errors import ConfigError

# Keys of an env config that make_env consumes itself.
_FACTORY_KEYS = {"name", "num_envs", "eval_envs", "validate_actions", TARGET}


def env_kwargs(env_cfg: Mapping) -> dict:
    """The constructor options of a native env config (everything but the factory's keys),
    as plain Python values."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(env_cfg, DictConfig):
        env_cfg = OmegaConf.to_container(env_cfg, resolve=True)
    return {k: v for k, v in env_cfg.items() if k not in _FACTORY_KEYS}


def make_env(env_cfg: Mapping, device="cpu", seed: int = 0, num_envs: int | None = None):
    """Build the env an env config names; `num_envs` overrides the config's count."""
    name = env_cfg["name"]
    n = env_cfg.get("num_envs", 1) if num_envs is None else num_envs
    if TARGET in env_cfg.keys():  # keys(): a DictConfig leaves "???" out of `in`
        from omegaconf import DictConfig, OmegaConf

        from gpurl.envs.foreign import make_target_env

        if isinstance(env_cfg, DictConfig) and OmegaConf.is_missing(env_cfg, TARGET):
            raise ConfigError(
                "env=custom needs the env's factory: add env._target_=my_package.make_env "
                "(a callable returning a TorchRL EnvBase)"
            )
        options = env_kwargs(env_cfg)
        steps = options.pop("max_episode_steps", None)
        collector = options.pop("collector", "auto")
        env = make_target_env(env_cfg[TARGET], options, n, device, seed, steps, collector)
        env.validate_actions = bool(env_cfg.get("validate_actions", False))
        return env
    build = registry.get("env", name, "env.name").target
    kwargs = env_kwargs(env_cfg)
    try:
        env = build(num_envs=n, device=device, seed=seed, **kwargs)
    except TypeError as err:
        raise ConfigError(f"bad option for env={name}: {err}") from err
    env.validate_actions = bool(env_cfg.get("validate_actions", False))
    return env


EVAL_SEED_OFFSET = 10_000  # a run of seed s evaluates on envs built with seed s + 10,000


def make_eval_env(env_cfg: Mapping, device="cpu", seed: int = 0):
    """The evaluation envs of a run of `seed`: `env.eval_envs` copies built with seed +
    EVAL_SEED_OFFSET; an env that takes `held_out` (the pixel worlds) gets worlds that no
    training env of any seed or size has."""
    cfg = dict(env_cfg)
    family = registry.find("env", cfg["name"])
    if TARGET not in cfg and family is not None and has_held_out(family.target):
        cfg["held_out"] = True
    return make_env(cfg, device=device, seed=seed + EVAL_SEED_OFFSET, num_envs=cfg["eval_envs"])


def native_envs(own_only: bool = False) -> dict[str, type[NativeEnv]]:
    """The registered env families that are NativeEnv classes, by name (`own_only`:
    gpurl's, no plug-in's)."""
    return {
        name: comp.target
        for name, comp in registry.components("env").items()
        if isinstance(comp.target, type)
        and issubclass(comp.target, NativeEnv)
        and (comp.own or not own_only)
    }


def has_held_out(build) -> bool:
    """Whether a registered env builds evaluation envs apart from its training ones."""
    return isinstance(build, type) and issubclass(build, NativeEnv) and build.has_held_out
