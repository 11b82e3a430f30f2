"""A run stopped by a signal (core/signals.py) and continued by trainer.resume=auto: the
first SIGTERM, SIGINT or SIGUSR1 ends the run after the iteration under way, with a
checkpoint, summary.json (stopped: signal) and one line, exit 128 + the signal's number;
a second exits at once; the same command with trainer.resume=auto then ends where an
uninterrupted run ends, with the same evaluations, bitwise on the CPU."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpurl.core.signals import StopSignals, exit_code
from gpurl.train import build, load_config, train_or_exit
from gpurl.trainers.off_policy import OffPolicyTrainer
from tools.common import pythonpath

ROOT = Path(__file__).resolve().parents[1]

# DQN on CartPole, small enough for a few seconds a run
ARGS = [
    "env=cartpole",
    "env.num_envs=4",
    "agent.hidden=[32,32]",
    "trainer.batch_size=32",
    "trainer.init_random_frames=64",
    "trainer.total_frames=2000",
    "trainer.log_interval=100",
    "trainer.eval_interval=500",
    "trainer.checkpoint_interval=400",
    "trainer.progress=false",
    "logger=none",
    "seed=3",
    "trainer.resume=auto",
]


CHECKPOINT_FILES = ("last.pt", "last.pt.sha256", "prev.pt", "prev.pt.sha256")


def test_exit_codes_are_128_plus_the_signal():
    assert exit_code("SIGTERM") == 128 + signal.SIGTERM
    assert exit_code("SIGINT") == 130 and exit_code("SIGUSR1") == 128 + signal.SIGUSR1


def test_handlers_live_while_entered_then_restored():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop.handle
        assert signal.getsignal(signal.SIGUSR1) == stop.handle
        os.kill(os.getpid(), signal.SIGUSR1)  # a real signal, handled in this thread
        assert stop.signal == "SIGUSR1"
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGUSR1"])
def test_a_signal_ends_the_run_after_its_iteration_with_checkpoint_summary_and_one_line(
    tmp_path, monkeypatch, capsys, name
):
    """In this process, through train_or_exit (what Hydra's main calls): the signal
    arrives inside the 20th iteration; that iteration completes, then the checkpoint, the
    summary and one line, exit 128 + N."""
    monkeypatch.setattr("gpurl.train.gpurl_commit", lambda: None)
    real, calls = OffPolicyTrainer.iteration, []

    def iteration(self):
        calls.append(self.frames)
        if len(calls) == 20:
            os.kill(os.getpid(), getattr(signal, name))
        real(self)

    monkeypatch.setattr(OffPolicyTrainer, "iteration", iteration)
    run_dir = tmp_path / "run"
    cfg = load_config([a for a in ARGS if "resume" not in a])
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        train_or_exit(cfg, run_dir)
    assert stop.value.code == exit_code(name)
    assert len(calls) == 20  # no iteration after the one the signal came in
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] == "signal" and summary["signal"] == name
    assert summary["frames"] == 80  # 20 iterations of 4 envs
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert saved["frames"] == 80
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"gpurl: stopped by {name} at frames 80: checkpoint and summary in {run_dir}; "
        f"continue with trainer.resume=auto hydra.run.dir={run_dir}"
    ]
    assert signal.getsignal(signal.SIGTERM) == before  # pytest's handlers are back


def test_resume_auto_starts_afresh_then_continues_its_own_directory(tmp_path):
    """No checkpoint in the run directory: a fresh run. A checkpoint there: that run,
    continued (a requeued job's second start)."""
    run_dir = tmp_path / "run"
    cfg = load_config([*ARGS, "trainer.total_frames=200", "trainer.checkpoint_interval=100"])
    first = build(cfg, run_dir)
    assert first.frames == 0 and first.last_checkpoint is None
    first.stop.signal = "SIGTERM"  # what the handler records: stop after one iteration
    summary = first.train()
    assert summary["frames"] == 4 and summary["stopped"] == "signal"
    again = build(cfg, run_dir)
    assert again.frames == 4 and again.last_checkpoint[1] == 4
    summary = again.train()
    assert summary["frames"] == 200 and summary["stopped"] == "total_frames"


# -- a real process, stopped and requeued -------------------------------------------------


def start(run_dir: Path, script=("-m", "gpurl.train"), extra=()) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *script, *ARGS, *extra, f"hydra.run.dir={run_dir}"],
        cwd=run_dir.parent,
        env={**os.environ, "PYTHONPATH": pythonpath(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_checkpoint(run_dir: Path, proc: subprocess.Popen, min_frames: int) -> None:
    """Until the run has written a checkpoint of at least `min_frames` (mid-training)."""
    import time

    path = run_dir / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.is_file() and torch.load(path, weights_only=True)["frames"] >= min_frames:
            return
        time.sleep(0.2)
    raise TimeoutError("no checkpoint in time")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    proc = start(run_dir)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads((run_dir / "summary.json").read_text())


def history(summary: dict) -> list[tuple[int, float]]:
    return [tuple(x) for x in summary["eval_history"]]


@pytest.mark.slow  # two processes of a few seconds each, and the uninterrupted one
@pytest.mark.parametrize("name", ["SIGTERM", "SIGUSR1"])
def test_a_signalled_run_requeued_with_the_same_command_equals_the_uninterrupted_one(
    tmp_path, uninterrupted, name
):
    run_dir = tmp_path / "run"
    proc = start(run_dir)
    wait_for_checkpoint(run_dir, proc, 400)
    proc.send_signal(getattr(signal, name))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exit_code(name), err
    assert err.strip().splitlines()[-1].startswith(f"gpurl: stopped by {name} at frames ")
    stopped = json.loads((run_dir / "summary.json").read_text())
    assert stopped["stopped"] == "signal" and stopped["signal"] == name
    assert 400 <= stopped["frames"] < 2000
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert saved["frames"] == stopped["frames"]  # the stop's own checkpoint

    again = start(run_dir)  # the requeued job: the same command
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["stopped"] == "total_frames"
    assert resumed["frames"] == uninterrupted["frames"] == 2000
    assert history(resumed) == history(uninterrupted)  # bitwise: floats compared with ==
    assert resumed["eval_metrics"] == uninterrupted["eval_metrics"]


@pytest.mark.slow
def test_a_second_signal_during_the_checkpoint_exits_at_once_and_the_requeue_recovers(
    tmp_path, uninterrupted
):
    """The second SIGTERM lands after the stop's last.pt.tmp is written, before its digest
    and renames (tests/signal_worker.py): the process exits at once, 143, the previous
    checkpoint intact; the same command then ends as the uninterrupted run."""
    run_dir = tmp_path / "run"
    proc = start(run_dir, script=(str(ROOT / "tests" / "signal_worker.py"),))
    wait_for_checkpoint(run_dir, proc, 400)
    before = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["frames"]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == exit_code("SIGTERM"), err
    assert err.strip().splitlines()[-1] == (
        "gpurl: SIGTERM while stopping for SIGTERM: exited at once; the last complete "
        "checkpoint is kept"
    )
    assert not (run_dir / "summary.json").exists()
    # the write it cut short took its temporary file with it
    names = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"last.pt", "last.pt.sha256"} <= names <= {*CHECKPOINT_FILES}  # no .tmp left
    kept = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert kept["frames"] % 400 == 0 and kept["frames"] >= before  # a periodic one

    again = start(run_dir)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    resumed = json.loads((run_dir / "summary.json").read_text())
    assert resumed["frames"] == 2000 and history(resumed) == history(uninterrupted)
