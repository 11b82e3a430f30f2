"""Plug-ins by Hydra's `_target_`: a dotted path in a config names the user's own env
factory, agent class or network factory, next to gpurl's registered short names."""

from __future__ import annotations

from collections.abc import Callable

from gpurl.errors import ConfigError

TARGET = "_target_"


def resolve_target(target, what: str) -> Callable:
    """The object a `_target_` names ("package.module.name"), or the callable itself;
    `what` names the config key in the one-line error ("env", "agent", ...)."""
    if callable(target):
        return target
    from hydra.utils import get_object

    try:
        return get_object(str(target))
    except Exception as err:  # ImportError, AttributeError: one line either way
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(
            f"{what}._target_={target} cannot be imported ({reason}): give a dotted path "
            f"to a callable on the Python path (e.g. my_package.module.name)"
        ) from None
