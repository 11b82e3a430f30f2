"""Nested TensorDict keys, one way: tuples inside gpurl's code, plain strings for root
keys where they are shown or stored (as TensorDict prints them)."""

from __future__ import annotations

NestedKey = str | tuple[str, ...]


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    """("agents", "reward") stays; "reward" becomes ("reward",)."""
    return key if isinstance(key, tuple) else (key,)


def normalize(key) -> NestedKey:
    """A key as TensorDict names it: a one-element tuple becomes its string."""
    if isinstance(key, tuple) and len(key) == 1:
        return key[0]
    return key


def leaf(key: NestedKey) -> str:
    """The last name of a key: "self_state" for ("agents", "self_state")."""
    return key[-1] if isinstance(key, tuple) else key


def sibling(key: NestedKey, name: str) -> NestedKey:
    """The key `name` beside `key`: ("agents", "objects") -> ("agents", name)."""
    return (*key[:-1], name) if isinstance(key, tuple) else name
