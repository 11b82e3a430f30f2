"""How a component declares its config keys: a dataclass whose fields are the keys.

    @declare(num_envs=8, eval_envs=10)       # defaults of keys the base declares
    class CartPoleConfig(EnvConfig):
        \"\"\"gpurl's native CartPole ...\"\"\"   # the docstring heads its YAML and reference
        obs = "vector"                         # class attributes say what it is, not keys
        length: float = key(0.5, "half the pole's length in metres", gt=0)

A key's annotation is its type, `key(default, doc, ge=..., choices=...)` the rest. The
group YAML files, `python -m gpurl.train --help`, the docs' configuration reference and
the check a composed config passes are all read from these declarations (gpurl/schema.py,
which holds the mechanism and nothing else). Shared keys are declared once, on a base
class (envs/config.py, agents/config.py), and a component changes their defaults with
`declare(...)` rather than spelling them out again.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import ClassVar

MISSING = "???"  # OmegaConf's mark of a value still to be given


def key(
    default,
    doc: str,
    *,
    ge=None,
    gt=None,
    le=None,
    lt=None,
    choices=None,
    nonempty=False,
    nonfinite=False,
    note: tuple[str, ...] = (),
):
    """A config key: its default, its one-line doc and its range (bounds apply to a
    number or to each item of a list; `choices` likewise, a tuple or a function that
    returns one, for choices that registries fill). A float key refuses NaN and
    infinities unless `nonfinite` (its doc then says what they mean). `note`: comment
    lines written above the key in its YAML file."""
    meta = dict(
        doc=doc,
        ge=ge,
        gt=gt,
        le=le,
        lt=lt,
        choices=choices,
        nonempty=nonempty,
        nonfinite=nonfinite,
        note=tuple(note),
    )
    return _field(default, meta)


def group(cls, doc: str, note: tuple[str, ...] = ()):
    """A nested block of keys (agent.encoder, env.reward_weights)."""
    return field(default_factory=cls, metadata=dict(doc=doc, note=tuple(note)))


def _field(default, meta):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


class Schema:
    """What every config class declares beside its keys (class attributes, not keys)."""

    open: ClassVar[bool] = False  # True: keys beyond the declared ones pass through
    complete: ClassVar[bool] = True  # True: every declared key must be present
    # a block whose `name` key picks a registered component, and with it the keys the
    # block holds (agent.encoder): that component's group in gpurl/core/registry.py
    registry_group: ClassVar[str | None] = None
    # the order keys are shown in (YAML, --help, reference): the class's own keys before
    # those it inherits (agents: the algorithm's keys, then the replay's), or after them
    own_keys_first: ClassVar[bool] = False

    @classmethod
    def check_together(cls, node: dict) -> None:
        """Raise a one-line ConfigError where keys of `node` (the config as plain values,
        each key already typed and ranged) contradict each other."""


def declare(cls=None, /, **defaults):
    """`cls` as a config dataclass, with `defaults` replacing the defaults of keys it
    inherits (their type, range and doc stay the base's, and so does their place)."""

    def wrap(cls):
        inherited, hints = {}, {}
        for base in reversed(cls.__mro__[1:]):  # the nearest base's declaration wins
            if dataclasses.is_dataclass(base):
                inherited.update({f.name: f for f in dataclasses.fields(base)})
                hints.update(typing.get_type_hints(base))
        own = cls.__dict__.get("__annotations__")
        if own is None:
            own = {}
            cls.__annotations__ = own
        for name, value in defaults.items():
            if name not in inherited:
                raise TypeError(f"{cls.__name__}: no inherited key {name!r} to give a default")
            own[name] = hints[name]
            setattr(cls, name, _field(value, dict(inherited[name].metadata)))
        return dataclass(cls)

    return wrap if cls is None else wrap(cls)


class Keys(dict):
    """A composed config node as plain Python values, read by attribute (cfg.lr) or as a
    mapping. Agents and trainers keep theirs as Keys: an attribute read of an OmegaConf
    node resolves interpolations and checks for missing values each time (~50 us), which
    on a small network's update path costs more than the arithmetic."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def plain_keys(node) -> Keys:
    """`node` (an OmegaConf node or a mapping) as Keys, nested blocks included."""
    if not isinstance(node, dict):
        from omegaconf import OmegaConf

        node = OmegaConf.to_container(node, resolve=True)
    return Keys({k: plain_keys(v) if isinstance(v, dict) else v for k, v in node.items()})
