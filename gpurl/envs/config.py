"""The keys every env config has, declared once: each env family's config subclasses
EnvConfig (a native env) or ForeignEnvConfig (a TorchRL env gpurl adapts) beside its
code, and registers with it (gpurl/core/registry.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gpurl.core.config import Schema, key

COLLECTORS = ("auto", "lean", "torchrl")


def collector_key():
    """Which collector runs an env gpurl adapts (envs/foreign.py)."""
    return key(
        "auto",
        "auto | lean | torchrl: gpurl's lean collector through the foreign-env adapter, or "
        "TorchRL's Collector; auto: lean on the CPU",
        choices=COLLECTORS,
    )


@dataclass
class EnvConfig(Schema):
    """The keys gpurl reads of any env config; the rest go to the env's constructor."""

    obs: ClassVar[str] = "any"  # what it observes (vector, images, objects, maps)
    # env.num_envs is the env's batch (the budget checks need it; a factory of one's own
    # may build a batch of another size)
    batch_is_num_envs: ClassVar[bool] = True

    name: str = key("env", "the env family (its registered name)")
    num_envs: int = key(8, "envs stepped together, one batch on the device", ge=1)
    eval_envs: int = key(4, "evaluation envs, one greedy episode each per evaluation", ge=1)
    validate_actions: bool = key(
        False, "true: each step checks actions against the action spec (host reads)"
    )


@dataclass
class ForeignEnvConfig(EnvConfig):
    """The keys of any TorchRL env gpurl adapts (envs/foreign.py)."""

    max_episode_steps: int | None = key(
        None, "evaluation's cap on an episode; null: the env's own, else 1000", ge=1
    )
    collector: str = collector_key()


@dataclass
class AnyEnvConfig(ForeignEnvConfig):
    """Any env by a `_target_` factory under a name of its own: the keys gpurl reads are
    checked, the others go to the factory."""

    open: ClassVar[bool] = True
    complete: ClassVar[bool] = False
    batch_is_num_envs: ClassVar[bool] = False
