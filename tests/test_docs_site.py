"""The documentation site builds with `mkdocs build --strict` (a broken link, anchor,
snippet or API reference fails it), and its nav lists every page under docs/."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # scripts/test.sh builds the site --strict before the tests run, too
def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "index.html").is_file()
    ppo = (tmp_path / "agents" / "ppo.html").read_text()
    assert "clip(ratio, 1 - eps, 1 + eps)" in ppo
    # the API reference rendered from the docstrings
    assert "EnvHooks" in (tmp_path / "api" / "envs.html").read_text()
