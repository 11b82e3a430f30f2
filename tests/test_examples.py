"""examples/ run as their README says: an env package and an agent outside gpurl,
trained through `_target_` on the command line and from Python."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["trainer.total_frames=1200", "trainer.eval_interval=600", "trainer.progress=false"]


def run(args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "examples"), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow  # three processes that train: about a minute
def test_the_examples_train_as_their_readme_says(tmp_path):
    catch = ["env=custom", "env._target_=catch.CatchEnv", "env.name=catch"]
    runs = {
        "dqn": ["agent=dqn"],
        "soft_dqn": [
            "agent=dqn",
            "+agent._target_=soft_dqn.SoftDQNAgent",
            "agent.name=soft_dqn",
            "+agent.temperature=0.05",
        ],
    }
    for label, agent in runs.items():
        stdout = run(
            ["-m", "gpurl.train", *catch, *agent, *SMALL, f"hydra.run.dir={tmp_path / label}"],
            tmp_path,
        )
        summary = json.loads(Path(stdout.strip().splitlines()[-1]).read_text())
        assert summary["agent"] == label and summary["env"] == "catch"
        assert summary["frames"] >= 1200 and -1.0 <= summary["eval_return"] <= 1.0
    stdout = run([str(ROOT / "examples" / "train_catch.py"), "--frames", "1200"], tmp_path)
    lines = [line for line in stdout.splitlines() if "final greedy return" in line]
    assert [line.split(":")[0] for line in lines] == ["dqn", "soft_dqn"]
