"""Every tool starts the way the docs run it, `python tools/NAME.py`, with nothing on
PYTHONPATH: three tools imported `tools.common` without putting the checkout's root on
sys.path and failed outside the test runner (which puts it there)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(
    p.name for p in (ROOT / "tools").glob("*.py") if p.name not in {"__init__.py", "common.py"}
)

pytestmark = pytest.mark.slow  # one interpreter per tool: ~1-2 s each


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_help_runs_from_a_plain_shell(tool, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage" in out.stdout.lower()
