"""Env families and the one factory the trainer uses: `make_env(env_cfg, ...)`.

Native envs are registered by name in NATIVE_ENVS; their constructor takes num_envs,
device, seed, and any other keys of the env config as keyword arguments. Any other
TorchRL env comes in through a config's `_target_`, a factory that returns it
(env._target_=my_package.make_env: envs/foreign.make_target_env), or through env=gym.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpurl.envs.base import NativeEnv
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv
from gpurl.envs.packing.env import PackingEnv
from gpurl.envs.pendulum import PendulumEnv
from gpurl.envs.pixels import PixelsEnv
from gpurl.errors import ConfigError

NATIVE_ENVS: dict[str, type[NativeEnv]] = {
    "cartpole": CartPoleEnv,
    "pendulum": PendulumEnv,
    "pixels": PixelsEnv,
    "packing": PackingEnv,
    "marinenav": MarineNavEnv,
    "marinenav_continuous": MarineNavContinuousEnv,
}

# Keys of an env config that the factory consumes itself.
_FACTORY_KEYS = {
    "name",
    "num_envs",
    "eval_envs",
    "id",
    "validate_actions",
    "collector",
    "_target_",
}
TARGET = "_target_"


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
        collector = env_cfg.get("collector", "auto")
        env = make_target_env(env_cfg[TARGET], options, n, device, seed, steps, collector)
        env.validate_actions = bool(env_cfg.get("validate_actions", False))
        return env
    if name == "gym":
        from gpurl.envs.gym import make_gym_env

        collector = env_cfg.get("collector", "auto")
        env = make_gym_env(env_cfg["id"], num_envs=n, device=device, seed=seed, collector=collector)
        env.validate_actions = bool(env_cfg.get("validate_actions", False))
        return env
    if name not in NATIVE_ENVS:
        known = ", ".join(sorted([*NATIVE_ENVS, "gym"]))
        raise ConfigError(f"unknown env '{name}': choose one of {known}")
    kwargs = env_kwargs(env_cfg)
    try:
        env = NATIVE_ENVS[name](num_envs=n, device=device, seed=seed, **kwargs)
    except TypeError as err:
        raise ConfigError(f"bad option for env={name}: {err}") from err
    env.validate_actions = bool(env_cfg.get("validate_actions", False))
    return env


EVAL_SEED_OFFSET = 10_000  # a run of seed s evaluates on envs built with seed s + 10,000


def make_eval_env(env_cfg: Mapping, device="cpu", seed: int = 0):
    """The evaluation envs of a run of `seed`: `env.eval_envs` copies built with seed +
    EVAL_SEED_OFFSET; an env that takes `held_out` (the pixel worlds) gets worlds that no
    training env of any seed or size has."""
    name = env_cfg["name"]
    cfg = dict(env_cfg)
    if name in NATIVE_ENVS and NATIVE_ENVS[name].has_held_out:
        cfg["held_out"] = True
    return make_env(cfg, device=device, seed=seed + EVAL_SEED_OFFSET, num_envs=cfg["eval_envs"])
