"""The README: what it must hold (the two commands, the generated headline table's
markers, links that resolve, at most 150 lines), and every quickstart command of the
README and of the docs' Getting started page runs, as written, with a tiny frame budget
appended (those marked slow: one process per command)."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"


def code_block_commands(path: Path, heading: str) -> list[str]:
    """The `python -m gpurl.train` lines of the section under `heading`."""
    text = path.read_text()
    block = text.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [re.sub(r"\s+#.*$", "", line.strip()) for line in block.splitlines()]
    return [line for line in lines if line.startswith("python -m gpurl.train")]


def quickstart_commands() -> list[str]:
    readme = code_block_commands(README, "## Quickstart")
    more = code_block_commands(GETTING_STARTED, "## More commands")
    return list(dict.fromkeys(readme + more))


def test_readme_is_short_and_holds_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert "    bash scripts/train.sh" in text
    assert "    bash scripts/test.sh" in text


def test_readme_keeps_the_headline_markers_in_order():
    text = README.read_text()
    start, end = "<!-- headline:start -->", "<!-- headline:end -->"
    assert text.count(start) == 1 and text.count(end) == 1
    assert text.index(start) < text.index(end)


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs pages"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_quickstart_lists_commands_of_both_pages():
    commands = quickstart_commands()
    assert len(code_block_commands(README, "## Quickstart")) >= 8
    assert len(commands) > len(code_block_commands(README, "## Quickstart"))


def tiny(args: list[str], tmp_path: Path) -> list[str]:
    marine = any("marinenav" in a for a in args)
    on_policy_presets = ("experiment=ppo", "experiment=a2c", "experiment=pqn", "experiment=pixels")
    on_policy_presets += ("experiment=atari",)
    on_policy_agents = ("agent=ppo", "agent=a2c", "agent=pqn")
    minatar = [a for a in args if a.startswith("experiment=minatar_")]
    on_policy = any(a.startswith(on_policy_presets) or a in on_policy_agents for a in args)
    on_policy = on_policy or any(a.endswith(("_pqn", "_ppo")) for a in minatar)
    if minatar:  # 128 envs x 32 steps a rollout: 16 envs keep one rollout within 2,048
        args = [*args, "env.num_envs=16", "env.max_episode_steps=50"]
    # at least one batch or rollout, which the schema asks of every budget: one step of
    # every env off-policy; one rollout of the largest on-policy run here (pqn_cartpole,
    # pixels_ppo: 2,048 frames; envpool's 8 games x 128 steps: 1,024)
    envs = [int(a.split("=")[1]) for a in args if a.startswith("env.num_envs=")]
    budget = ["trainer.total_frames=" + ("2048" if on_policy else str(max([64, *envs])))]
    budget += [] if on_policy else ["trainer.init_random_frames=32", "trainer.batch_size=16"]
    budget += ["env.max_episode_steps=20"] if marine else ["env.eval_envs=2"]
    budget += ["trainer.progress=false"]
    args = [re.sub(r"trainer\.total_frames=\d+", "", a) for a in args]
    args = [a for a in args if a]
    if "-m" in args:
        return args + budget + [f"hydra.sweep.dir={tmp_path / 'multirun'}"]
    return args + budget + [f"hydra.run.dir={tmp_path / 'run'}"]


@pytest.mark.slow
@pytest.mark.parametrize("command", quickstart_commands())
def test_readme_quickstart_command_runs(tmp_path, command):
    args = shlex.split(command)[3:]  # after `python -m gpurl.train`
    resume = [a for a in args if a.startswith("trainer.resume=")]
    if resume:  # the README's run directory is an example: make one to resume from
        first = [a for a in args if not a.startswith("trainer.resume=")]
        prior = subprocess.run(
            [sys.executable, "-m", "gpurl.train", *tiny(first, tmp_path / "prior")],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert prior.returncode == 0, prior.stderr[-2000:]
        args = first + [f"trainer.resume={tmp_path / 'prior' / 'run'}"]
        args = [a.replace("total_frames=64", "total_frames=128") for a in tiny(args, tmp_path)]
    else:
        args = tiny(args, tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *args], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "summary.json" in out.stdout or "-m" in args


def used_run_commands() -> list[list[str]]:
    """The README's commands that use a finished run (eval, export, the exported
    program), split as a shell would."""
    block = README.read_text().split("A finished run, used", 1)[1].split("\n\n", 2)[1]
    return [shlex.split(line.strip()) for line in block.splitlines() if line.strip()]


@pytest.mark.slow  # a run, then three processes
def test_readme_commands_that_use_a_finished_run_run(tmp_path):
    """Train the default run (a tiny budget), then the README's eval, export and
    exported-program lines on it, as written but for the run directory's name."""
    commands = used_run_commands()
    assert [c[:3] for c in commands[:2]] == [
        ["python", "-m", "gpurl.eval"],
        ["python", "-m", "gpurl.export"],
    ]
    assert commands[2][:2] == ["python", "examples/run_exported.py"]
    first = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *tiny([], tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    example = commands[0][3]  # the README's example run directory
    run_dir = str(tmp_path / "run")
    for command in commands:
        args = [a.replace(example, run_dir) for a in command[1:]]
        out = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=ROOT
        )
        assert out.returncode == 0, (command, out.stderr[-2000:])
    assert (tmp_path / "run" / "eval.json").is_file()
    assert (tmp_path / "run" / "video" / "episode.mp4").is_file()
    assert "gpurl imported: False" in out.stdout
