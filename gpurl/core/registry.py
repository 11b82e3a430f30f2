"""Components by name. Each env family, agent, encoder and logger registers itself from
its own module, with the dataclass of its config keys:

    @register("env", "cartpole", CartPoleConfig)
    class CartPoleEnv(NativeEnv): ...

gpurl's own are found by importing every module of its component packages; an installed
package adds its own through the `gpurl.plugins` entry-point group, whose entries name
the modules to import (a `module:function` entry is called after import):

    [project.entry-points."gpurl.plugins"]
    catch = "catch"

`load()` does both, once per process, the first time anything asks for a component. A
plug-in that fails to import is left out with one warning line naming it and the error;
two packages registering one name stop the run with one line naming both.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from gpurl.errors import ConfigError

GROUPS = ("env", "agent", "encoder", "logger")
ENTRY_POINT_GROUP = "gpurl.plugins"
# gpurl's own component packages: every module in them is imported, so a component of
# gpurl's is one module that registers itself, like a plug-in's
BUILTIN_PACKAGES = ("gpurl.envs", "gpurl.policies", "gpurl.agents", "gpurl.trainers")


@dataclass(frozen=True)
class Component:
    group: str  # env | agent | encoder | logger
    name: str  # what a config names it by: env=cartpole, agent.encoder.name=spec
    config: type  # the dataclass of its keys (gpurl.core.config)
    target: Any  # the class or factory it builds
    module: str  # the module that registered it
    package: str  # "gpurl", or the distribution of the plug-in that registered it

    @property
    def own(self) -> bool:
        """Part of gpurl (its YAML file ships in gpurl/configs)."""
        return self.package == "gpurl"


class DuplicateName(ConfigError):
    """Two packages registered one name in one group."""


_components: dict[str, dict[str, Component]] = {g: {} for g in GROUPS}
_plugin_package: str | None = None  # the distribution whose entry point is importing
_failed: list[str] = []  # one line per plug-in left out
_duplicate: list[DuplicateName] = []  # raised again by every load() until restored
_loaded = False


def register(group: str, name: str, config: type) -> Callable:
    """Decorator: register the decorated class or factory as `name` in `group`, built
    from the keys of `config` (a dataclass)."""
    if group not in GROUPS:
        raise ValueError(f"unknown component group {group!r}: one of {', '.join(GROUPS)}")

    def decorate(target):
        module = target.__module__
        package = _plugin_package or ("gpurl" if module.startswith("gpurl.") else module)
        add(Component(group, name, config, target, module, package))
        return target

    return decorate


def add(component: Component) -> None:
    """Register a component; the same module registering it again (a re-import)
    replaces its entry."""
    known = _components[component.group]
    old = known.get(component.name)
    if old is not None and old.module != component.module:
        raise DuplicateName(
            f"{component.group} '{component.name}' is registered twice: by {old.package} "
            f"({old.module}) and by {component.package} ({component.module}); uninstall one "
            f"of the two packages"
        )
    known[component.name] = component


def components(group: str) -> dict[str, Component]:
    """Every component of a group by name, in the order they registered."""
    load()
    return dict(_components[group])


def names(group: str) -> tuple[str, ...]:
    return tuple(components(group))


def find(group: str, name) -> Component | None:
    load()
    return _components[group].get(name)


def get(group: str, name, key: str) -> Component:
    """The component `name` of `group`, or a one-line ConfigError naming `key` (the config
    key that chose it) and the names there are."""
    found = find(group, name)
    if found is None:
        known = ", ".join(sorted(_components[group]))
        raise ConfigError(f"unknown {group} '{name}' ({key}): choose one of {known}{hint()}")
    return found


def of_target(group: str, target) -> Component | None:
    """The component registered for a class or factory, if it is one."""
    return next((c for c in components(group).values() if c.target is target), None)


def failed() -> tuple[str, ...]:
    """The warning lines of the plug-ins left out."""
    load()
    return tuple(_failed)


def hint() -> str:
    """A note for an unknown name: the plug-ins that failed to import may have held it."""
    return f" ({'; '.join(_failed)})" if _failed else ""


def load() -> None:
    """Import gpurl's component packages and the installed plug-ins, once."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in BUILTIN_PACKAGES:
            package = importlib.import_module(name)
            for module in pkgutil.walk_packages(package.__path__, f"{name}."):
                importlib.import_module(module.name)
        try:
            for entry in entry_points(group=ENTRY_POINT_GROUP):
                load_plugin(entry)
        except DuplicateName as err:
            _duplicate.append(err)
    if _duplicate:
        raise _duplicate[0]


def load_plugin(entry: EntryPoint) -> None:
    """Import one plug-in's entry point, registering what it holds under its package's
    name. A failure to import leaves it out with one warning line; a name another package
    holds already raises DuplicateName."""
    global _plugin_package
    package = entry.dist.name if entry.dist is not None else entry.value
    _plugin_package = package
    try:
        loaded = entry.load()
        if callable(loaded):
            loaded()
    except DuplicateName:
        raise
    except Exception as err:  # anything a broken plug-in raises: gpurl goes on without it
        reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
        line = (
            f"plug-in {entry.name} ({package}) failed to import and is left out: "
            f"{type(err).__name__}{': ' + reason if reason else ''}"
        )
        _failed.append(line)
        print(f"gpurl: warning: {line}", file=sys.stderr)
    finally:
        _plugin_package = None


def snapshot() -> tuple:
    """The registry's state, for restore(): tests register components of their own and
    leave the registry as they found it."""
    load()
    return {g: dict(c) for g, c in _components.items()}, list(_failed), list(_duplicate)


def restore(state: tuple) -> None:
    comps, fails, duplicate = state
    for g in GROUPS:
        _components[g].clear()
        _components[g].update(comps[g])
    _failed[:] = fails
    _duplicate[:] = duplicate
