"""The declared interfaces hold in the source: imports run one way, nothing probes an env
or an agent for hooks it might have, and torch's private APIs are called in one place.

These read gpurl/ as text (Python's own parser), so they fail on the line that breaks
a rule, whatever a run would have exercised.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "gpurl"

# The layers, bottom up (docs/extending.md, "The layers"): a package may import its own layer and
# those below it, never one above.
LAYERS = [
    "errors",
    "core",
    "utils",
    "envs",
    "policies",
    "agents",
    "trainers",
    "schema",
    "train",
    "trained",
    "eval",
    "export",
    "api",
]
# What each layer may import besides itself: core and errors are below everything.
ALLOWED = {
    "errors": set(),
    "core": {"errors"},
    "utils": {"errors", "core"},
    "envs": {"errors", "core", "utils"},
    "policies": {"errors", "core", "utils", "envs"},
    "agents": {"errors", "core", "utils", "envs", "policies"},
    "trainers": {"errors", "core", "utils", "envs", "policies", "agents"},
    # the config mechanism: the base configs of envs and agents, the agent kinds (checked
    # module by module below: no concrete env or agent)
    "schema": {"errors", "core", "utils", "envs", "agents"},
    "train": set(LAYERS) - {"train", "trained", "eval", "export", "api"},
    # a trained run as a policy, its evaluation and export: on top of train's loader
    "trained": set(LAYERS) - {"trained", "eval", "export", "api"},
    "eval": set(LAYERS) - {"eval", "export", "api"},
    "export": set(LAYERS) - {"eval", "export", "api"},
    "api": set(LAYERS) - {"api"},
}

# The only files that may use getattr / hasattr / setattr, and why.
INTROSPECTION_ALLOWED = {
    # the adapter that gives a foreign TorchRL env gpurl's hooks: it asks what it has
    "envs/foreign.py",
    # the host-read counter swaps torch.Tensor's methods for counting ones, by name
    "utils/host_reads.py",
    # declare() gives the keys a config class inherits its own defaults, before the
    # dataclass is built (a class being declared, not a hook of an env or agent)
    "core/config.py",
}


def modules():
    return sorted(p for p in ROOT.rglob("*.py"))


def layer_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def gpurl_imports(tree: ast.AST):
    """(line, layer) of every `gpurl.<layer>` import, at module level or inside functions."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "gpurl" else [a.name for a in node.names]
            if node.module == "gpurl":
                names = [f"gpurl.{n}" for n in names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "gpurl" and len(parts) > 1:
                yield node.lineno, parts[1]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way(path):
    layer = layer_of(path)
    if layer not in ALLOWED:  # gpurl/__init__.py, configs
        return
    tree = ast.parse(path.read_text())
    wrong = [
        f"line {line}: imports gpurl.{target}"
        for line, target in gpurl_imports(tree)
        if target != layer and target not in ALLOWED[layer] and target in ALLOWED
    ]
    assert not wrong, f"{path.relative_to(ROOT)} ({layer}) " + "; ".join(wrong)


# What the config mechanism may import of gpurl: each component's keys live beside the
# component, which registers itself (core/registry.py), so schema.py names none of them.
SCHEMA_IMPORTS = {
    "gpurl.agents",  # the agent kinds and agent_class (the package's own __init__)
    "gpurl.agents.config",  # the keys every agent kind shares
    "gpurl.core",
    "gpurl.core.config",
    "gpurl.core.registry",
    "gpurl.envs.config",  # the keys every env shares
    "gpurl.errors",
    "gpurl.utils.device",
}


def test_the_schema_imports_the_mechanism_alone():
    tree = ast.parse((ROOT / "schema.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpurl"):
            imported |= {node.module} if node.module != "gpurl" else set()
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names if a.name.startswith("gpurl")}
    assert imported <= SCHEMA_IMPORTS, imported - SCHEMA_IMPORTS


@pytest.mark.slow  # a process: 4 s
def test_importing_the_schema_loads_no_env_or_agent():
    """In a fresh process, `import gpurl.schema` brings in none of the modules that declare
    an env family or an agent (the registry loads them when a config is checked)."""
    import subprocess
    import sys

    probe = (
        "import sys, gpurl.schema\n"
        "before = set(sys.modules)\n"
        "from gpurl.core import registry\n"
        "mods = {c.module for g in ('env', 'agent') for c in registry.components(g).values()}\n"
        "print(sorted(mods & before))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    # the foreign-env adapter (env=custom's factory) is no env family: every env uses it
    assert out.stdout.strip() == "['gpurl.envs.foreign']", out.stdout


def test_agents_policies_and_envs_import_nothing_from_trainers():
    """The issue's own wording of the rule, checked over the three packages."""
    for path in modules():
        if layer_of(path) in ("agents", "policies", "envs", "core"):
            targets = {t for _, t in gpurl_imports(ast.parse(path.read_text()))}
            assert not targets & {"trainers", "train"}, path


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_hook_is_found_by_introspection(path):
    """Hooks are declared (envs/hooks.py, agents/base.py, policies/wrapper.py): nothing
    asks an object whether it has one, or replaces a method on it."""
    rel = str(path.relative_to(ROOT))
    if rel in INTROSPECTION_ALLOWED:
        return
    calls = [
        f"line {node.lineno}: {node.func.id}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
    ]
    assert not calls, f"{rel}: " + "; ".join(calls)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_private_torch_apis_are_wrapped_in_one_place(path):
    """torch._x and tensordict's _new_unsafe go through core/private.py, which says why
    each is used and falls back to public API."""
    rel = str(path.relative_to(ROOT))
    if rel == "core/private.py":
        return
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            if not node.attr.startswith("__"):
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in ("torch", "TensorDict"):
                    found.append(f"line {node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch."):
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module}")
    assert not found, f"{rel}: " + "; ".join(found)
