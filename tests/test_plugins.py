"""Plug-ins by entry point (gpurl/core/registry.py): an installed package's `gpurl.plugins`
entries name modules whose import registers envs, agents, encoders or loggers, which
then work by name like gpurl's own. Bad plug-ins give one line each: two registering one
name, one that fails to import (gpurl goes on without it), a key of the wrong type.

The fast tests make installed distributions the way pip leaves them (a *.dist-info
folder with METADATA and entry_points.txt on sys.path), so importlib.metadata finds real
entry points; the slow ones pip-install examples/ and run `python -m gpurl.train`.
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch
from torch import nn

from gpurl.core import registry
from gpurl.core.config import Schema, declare, key
from gpurl.core.registry import DuplicateName
from gpurl.errors import ConfigError
from gpurl.schema import check_config, help_text
from gpurl.train import build, load_config
from gpurl.trainers.loggers import LoggerConfig

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["trainer.total_frames=1200", "trainer.eval_interval=600", "trainer.progress=false"]

# A second package's module that registers a name the corridor's package holds.
CORRIDOR_AGAIN = """\
from gpurl.core.registry import register
from tests.extending.corridor import CorridorConfig, CorridorEnv

@register("env", "corridor", CorridorConfig)
class CorridorToo(CorridorEnv):
    pass
"""


def distribution(site: Path, name: str, entries: dict[str, str]) -> None:
    """An installed distribution as pip leaves it: its metadata and entry points."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("[gpurl.plugins]\n" + "\n".join(lines) + "\n")


def plugins_of(package: str) -> list:
    return [e for e in entry_points(group="gpurl.plugins") if e.dist.name == package]


def load(package: str) -> None:
    for entry in plugins_of(package):
        registry.load_plugin(entry)


@pytest.fixture
def site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for name in ("tests.extending.corridor", "corridor_again"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return site


def test_an_installed_plugin_registers_under_its_package(site, scoped_registry):
    distribution(site, "corridor-pkg", {"corridor": "tests.extending.corridor"})
    load("corridor-pkg")
    comp = registry.find("env", "corridor")
    assert comp.package == "corridor-pkg" and comp.module == "tests.extending.corridor"
    assert not comp.own
    cfg = load_config(["env=corridor", "agent=dqn", "env.length=6"])
    check_config(cfg)
    assert cfg.env.length == 6 and cfg.env.num_envs == 16
    # a key of the wrong type: the same one line as gpurl's own keys give
    for value, says in (("abc", "an int >= 1, got 'abc'"), ("0", ">= 1, got 0")):
        with pytest.raises(ConfigError, match=f"env.length must be {says}") as err:
            check_config(load_config(["env=corridor", f"env.length={value}"]))
        assert "\n" not in str(err.value)
        assert str(err.value).startswith("env.length must be")


def test_two_plugins_registering_one_name_give_one_line_naming_both(site, scoped_registry):
    (site / "corridor_again.py").write_text(CORRIDOR_AGAIN)
    distribution(site, "corridor-pkg", {"corridor": "tests.extending.corridor"})
    distribution(site, "other-pkg", {"corridor": "corridor_again"})
    load("corridor-pkg")
    with pytest.raises(DuplicateName) as err:
        load("other-pkg")
    line = str(err.value)
    assert "\n" not in line and "env 'corridor' is registered twice" in line
    assert (
        "corridor-pkg (tests.extending.corridor)" in line and "other-pkg (corridor_again)" in line
    )
    assert isinstance(err.value, ConfigError)  # the command line exits 2 with it


def test_a_plugin_that_fails_to_import_is_left_out_with_one_line(site, scoped_registry, capsys):
    distribution(site, "broken-pkg", {"broken": "no_such_module_for_gpurl"})
    load("broken-pkg")
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == [
        "gpurl: warning: plug-in broken (broken-pkg) failed to import and is left out: "
        "ModuleNotFoundError: No module named 'no_such_module_for_gpurl'"
    ]
    assert registry.failed() == (warning[0].removeprefix("gpurl: warning: "),)
    check_config(load_config([]))  # the rest of gpurl works
    with pytest.raises(ConfigError, match="unknown env 'nowhere'.*plug-in broken") as err:
        registry.get("env", "nowhere", "env.name")  # and an unknown name says what failed
    assert "\n" not in str(err.value)


# docs/extending.md's encoder and logger, as the page shows them
@dataclass
class TwoLayerConfig(Schema):
    """Two ReLU layers over the vector observations, concatenated."""

    width: int = key(64, "width of both layers", ge=1)


class TwoLayerEncoder(nn.Module):
    def __init__(self, info, width: int = 64):
        super().__init__()
        self.entries = list(info.obs_keys)
        inputs = sum(info.obs_shapes[k][-1] for k in self.entries)
        self.net = nn.Sequential(
            nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()
        )
        self.out_features = width

    def forward(self, td):
        return self.net(torch.cat([td.get(k).float() for k in self.entries], -1))


@declare(name="csv_in")
class CsvInConfig(LoggerConfig):
    """CSV scalars in a folder of one's choosing under <run dir>/logs."""

    folder: str = key("scalars", "the folder under <run dir>/logs")


def csv_in(options, log_dir, experiment_name):
    from torchrl.record.loggers import CSVLogger

    return CSVLogger(experiment_name, log_dir=str(log_dir / options["folder"]))


@pytest.mark.slow  # a short run: seconds
def test_a_plugin_encoder_is_chosen_by_name_with_its_keys(tmp_path, scoped_registry):
    """agent.encoder.name picks a registered encoder; its own keys are checked, gpurl's
    spec keys in the agent's block pass by."""
    registry.register("encoder", "two_layer", TwoLayerConfig)(TwoLayerEncoder)
    base = ["agent.encoder.name=two_layer", "+agent.encoder.width=32", "logger=none"]
    check_config(load_config(base))
    with pytest.raises(ConfigError, match="agent.encoder.width must be >= 1, got 0"):
        check_config(load_config([*base, "agent.encoder.width=0"]))
    with pytest.raises(ConfigError, match="agent.encoder.name=bogus is unknown"):
        check_config(load_config(["agent.encoder.name=bogus"]))
    cfg = load_config([*base, "env.eval_envs=1", "agent.hidden=[8]", "trainer.progress=false"])
    text = help_text(cfg, {})
    assert "agent.encoder.width=32" in text and "width of both layers" in text
    trainer = build(cfg, tmp_path)
    encoder = trainer.agent.q.encoder
    assert isinstance(encoder, TwoLayerEncoder) and encoder.out_features == 32
    for _ in range(150):  # past the random warm-up: the encoder learns with the rest
        trainer.iteration()
    assert trainer.progress.update_count > 0


@pytest.mark.slow  # a short run: seconds
def test_a_plugin_logger_is_chosen_by_name_with_its_keys(tmp_path, scoped_registry):
    registry.register("logger", "csv_in", CsvInConfig)(csv_in)
    small = ["env.eval_envs=1", "agent.hidden=[8]", "trainer.progress=false"]
    tiny = ["trainer.total_frames=64", "trainer.log_interval=32", "trainer.eval_interval=64"]
    cfg = load_config(["logger=csv_in", "logger.folder=mine", *small, *tiny])
    assert cfg.logger.folder == "mine"
    build(cfg, tmp_path).train()
    assert list((tmp_path / "logs" / "mine").rglob("*.csv"))  # the scalars, where it said
    with pytest.raises(ConfigError, match="unknown config key 'logger.fodler' for logger=csv_in"):
        check_config(load_config(["logger=csv_in", "+logger.fodler=x"]))


def run(args, cwd, pythonpath):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), str(ROOT)])}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def pip_install_examples(tmp_path) -> Path:
    """examples/ installed by pip into a folder of its own (a copy of the source, so the
    build leaves nothing in the checkout), as `pip install -e examples/` would register
    its entry points."""
    source, site = tmp_path / "examples", tmp_path / "site"
    shutil.copytree(ROOT / "examples", source, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    out = subprocess.run(
        [*pip, "--no-index", "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (site / "catch" / "__init__.py").is_file() and (site / "soft_dqn.py").is_file()
    return site


@pytest.mark.slow  # pip and two processes: about 20 s
def test_the_installed_examples_train_by_name(tmp_path):
    site = pip_install_examples(tmp_path)
    out = run(["-m", "gpurl.train", "env=catch", "agent=soft_dqn", "--help"], tmp_path, [site])
    assert out.returncode == 0, out.stderr
    assert "agent.temperature=0.05" in out.stdout and "env.name=catch" in out.stdout
    args = ["-m", "gpurl.train", "env=catch", "agent=soft_dqn", "agent.temperature=0.1", *SMALL]
    out = run([*args, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, [site])
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(Path(out.stdout.strip().splitlines()[-1]).read_text())
    assert summary["env"] == "catch" and summary["agent"] == "soft_dqn"
    assert summary["config"]["agent"]["temperature"] == 0.1
    assert summary["frames"] >= 1200 and -1.0 <= summary["eval_return"] <= 1.0
    bad = run(["-m", "gpurl.train", "agent=soft_dqn", "agent.temperature=0"], tmp_path, [site])
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        .splitlines()[-1]
        .startswith("gpurl: error: agent.temperature must be > 0, got 0")
    )


@pytest.mark.slow  # processes
def test_bad_plugins_from_the_command_line(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    distribution(site, "broken-pkg", {"broken": "no_such_module_for_gpurl"})
    out = run(["-m", "gpurl.train", "--help"], tmp_path, [site])
    assert out.returncode == 0 and "Left out: plug-in broken (broken-pkg)" in out.stdout
    assert out.stderr.strip().splitlines() == [
        "gpurl: warning: plug-in broken (broken-pkg) failed to import and is left out: "
        "ModuleNotFoundError: No module named 'no_such_module_for_gpurl'"
    ]
    (site / "corridor_again.py").write_text(CORRIDOR_AGAIN)
    distribution(site, "corridor-pkg", {"corridor": "tests.extending.corridor"})
    distribution(site, "other-pkg", {"corridor": "corridor_again"})
    out = run(["-m", "gpurl.train", "env=corridor"], tmp_path, [site])
    lines = [line for line in out.stderr.strip().splitlines() if "warning" not in line]
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("gpurl: error: env 'corridor' is registered twice: by ")
