"""What a long run meets: kill -9, damaged checkpoints, NaNs, a full disk, bad actions.
Each stops with one clear line or recovers, and no good checkpoint is lost."""

import errno
import json
import logging
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from gpurl.envs import make_env
from gpurl.errors import ActionOutOfRangeError, CheckpointWriteError, ConfigError, NonFiniteError
from gpurl.train import build, load_config
from gpurl.trainers import checkpoint as ckpt
from gpurl.trainers.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint

TINY = [
    "env=cartpole",
    "agent=dqn",
    "agent.hidden=[16,16]",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.frames_per_batch=8",
    "trainer.init_random_frames=16",
    "trainer.batch_size=8",
    "trainer.buffer_size=1000",
    "trainer.eval_interval=1000000",
    "trainer.progress=false",
    "logger=none",
]


def tiny_trainer(run_dir, *overrides):
    return build(load_config([*TINY, *overrides]), run_dir)


def state(frames):
    return {"frames": frames, "agent": {"w": torch.full((64,), float(frames))}}


def warnings_of(caplog):
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- damaged checkpoints ---------------------------------------------------------------------


def test_a_save_keeps_the_previous_checkpoint_and_both_digests(tmp_path):
    last = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(state(1), last)
    save_checkpoint(state(2), last)
    prev = tmp_path / "checkpoints" / "prev.pt"
    assert sorted(p.name for p in last.parent.iterdir()) == [
        "last.pt",
        "last.pt.sha256",
        "prev.pt",
        "prev.pt.sha256",
    ]
    for path in (last, prev):
        assert ckpt.digest_path(path).read_text() == ckpt.sha256_file(path) + "\n"
    assert load_checkpoint(tmp_path, "cpu")["frames"] == 2
    assert load_checkpoint(prev, "cpu")["frames"] == 1


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "delete"])
def test_a_damaged_last_checkpoint_falls_back_to_the_previous_with_one_line(
    tmp_path, caplog, damage
):
    last = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(state(1), last)
    save_checkpoint(state(2), last)
    data = bytearray(last.read_bytes())
    if damage == "corrupt":  # one flipped byte in the tensor data: torch alone would load it
        data[len(data) // 2] ^= 0xFF
        last.write_bytes(bytes(data))
    elif damage == "truncate":
        last.write_bytes(bytes(data[: len(data) // 2]))
    else:
        last.unlink()
    with caplog.at_level(logging.WARNING):
        loaded, used = read_checkpoint(tmp_path, "cpu")
    assert loaded["frames"] == 1 and used.name == "prev.pt"
    assert torch.equal(loaded["agent"]["w"], state(1)["agent"]["w"])
    (record,) = warnings_of(caplog)
    message = record.getMessage()
    assert "\n" not in message and str(last) in message and str(used) in message
    assert ("missing" if damage == "delete" else "sha256") in message


def test_both_checkpoints_damaged_is_one_clear_config_error(tmp_path):
    last = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(state(1), last)
    save_checkpoint(state(2), last)
    for path in (last, ckpt.previous_path(last)):
        path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ConfigError, match="no usable checkpoint") as err:
        load_checkpoint(tmp_path, "cpu")
    assert "\n" not in str(err.value) and "prev.pt" in str(err.value)


@pytest.mark.parametrize("renames", [1, 2, 3])
def test_a_save_killed_between_its_renames_leaves_a_usable_checkpoint(
    tmp_path, monkeypatch, renames
):
    """kill -9 inside the rotation (simulated: os.replace stops working after `renames`
    calls): the previous checkpoint still loads, verified."""
    last = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(state(1), last)
    save_checkpoint(state(2), last)
    real, calls = ckpt.os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) > renames:
            raise KeyboardInterrupt  # the process dies here
        real(src, dst)

    monkeypatch.setattr(ckpt.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(state(3), last)
    monkeypatch.setattr(ckpt.os, "replace", real)
    assert load_checkpoint(tmp_path, "cpu")["frames"] == 2


def test_a_checkpoint_without_digest_still_loads(tmp_path):
    """Checkpoints written before digests existed load unverified."""
    path = tmp_path / "checkpoints" / "last.pt"
    path.parent.mkdir()
    torch.save(state(5), path)
    assert load_checkpoint(tmp_path, "cpu")["frames"] == 5


@pytest.mark.parametrize("how", ["explicit", "auto"])
def test_resume_from_a_run_whose_last_checkpoint_is_corrupt(tmp_path, caplog, how):
    """trainer.resume=<run dir> and trainer.resume=auto (the run continued in its own
    directory, as a requeued job) alike take prev.pt, with one warning line."""
    first = tiny_trainer(
        tmp_path / "first",
        "trainer.total_frames=64",
        "trainer.log_interval=32",
        "trainer.checkpoint_interval=32",
    )
    first.train()
    last = first.checkpoint_path
    assert torch.load(last, weights_only=True)["frames"] == 64
    data = bytearray(last.read_bytes())
    data[-200] ^= 0xFF
    last.write_bytes(bytes(data))
    resume, run_dir = {
        "explicit": (tmp_path / "first", tmp_path / "resumed"),
        "auto": ("auto", tmp_path / "first"),
    }[how]
    with caplog.at_level(logging.WARNING):
        resumed = tiny_trainer(run_dir, "trainer.total_frames=64", f"trainer.resume={resume}")
    assert resumed.frames == 32 == int(resumed.progress.frames)
    assert resumed.last_checkpoint == (last.with_name("prev.pt"), 32)
    assert len(warnings_of(caplog)) == 1


# -- NaN and inf -----------------------------------------------------------------------------


def test_a_nan_parameter_stops_the_run_before_it_reaches_a_checkpoint(tmp_path):
    """No log between checkpoints here: the check before writing the checkpoint stops it,
    and the last good checkpoint is not overwritten."""
    trainer = tiny_trainer(
        tmp_path,
        "trainer.total_frames=256",
        "trainer.log_interval=1000000",
        "trainer.checkpoint_interval=32",
    )
    iteration = trainer.iteration

    def poisoned():
        iteration()
        if trainer.frames == 40:
            next(trainer.agent.modules()["q"].parameters()).data[0] = float("nan")

    trainer.iteration = poisoned
    with pytest.raises(NonFiniteError) as err:
        trainer.train()
    message = str(err.value)
    assert "\n" not in message
    updates = int(trainer.progress.updates)
    assert f"frames 64, updates {updates}" in message and "parameter q." in message
    assert f"{trainer.checkpoint_path} (frames 32)" in message
    saved, used = read_checkpoint(trainer.checkpoint_path, "cpu")
    assert used == trainer.checkpoint_path and saved["frames"] == 32
    for tensor in saved["agent"]["modules"]["q"].values():
        assert torch.isfinite(tensor).all()


def test_a_nan_loss_stops_the_run_at_the_next_log(tmp_path, monkeypatch):
    trainer = tiny_trainer(
        tmp_path,
        "trainer.total_frames=256",
        "trainer.log_interval=16",
        "trainer.checkpoint_interval=32",
    )
    agent, update = trainer.agent, trainer.agent.update

    def nan_update(batch, progress):
        out = update(batch, progress)
        if trainer.frames >= 72:
            out["loss"] = out["loss"] * float("nan")
        return out

    monkeypatch.setattr(agent, "update", nan_update)
    with pytest.raises(NonFiniteError, match=r"at frames 80, updates \d+ .*loss=nan") as err:
        trainer.train()
    assert "\n" not in str(err.value) and "(frames 64)" in str(err.value)
    assert load_checkpoint(trainer.checkpoint_path, "cpu")["frames"] == 64


def test_the_finite_check_reads_nothing_in_the_hot_loop(tmp_path):
    """The NaN guard adds no host read to iteration(): the metric sums are the flag."""
    from gpurl.utils.host_reads import count_host_reads

    trainer = tiny_trainer(tmp_path, "trainer.total_frames=256")
    for _ in range(3):
        trainer.iteration()
    with count_host_reads() as reads:
        for _ in range(3):
            trainer.iteration()
    assert reads.count == 0, reads.report()
    trainer.check_finite()  # finite: no error


# -- a full disk -----------------------------------------------------------------------------


def test_a_full_disk_at_checkpoint_time_keeps_the_earlier_checkpoint(tmp_path, monkeypatch):
    """The run stops with one line; last.pt and its digest stay as they were."""
    trainer = tiny_trainer(tmp_path, "trainer.total_frames=256")
    for _ in range(3):
        trainer.iteration()
    path = trainer.save()
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    for _ in range(2):
        trainer.iteration()

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(CheckpointWriteError) as err:
        trainer.save()
    message = str(err.value)
    assert "\n" not in message and "No space left on device" in message
    assert f"{path} (frames 24)" in message and "trainer.resume=" in message
    after = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    assert after == before  # no partial file left, nothing earlier touched
    monkeypatch.undo()
    assert load_checkpoint(path, "cpu")["frames"] == 24


# -- out-of-range actions --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, good, bad, shown",
    [
        ("cartpole", [0, 1], [0, 5], "5"),
        ("pendulum", [[0.5], [-2.0]], [[0.5], [3.0]], "3.0"),
    ],
)
def test_out_of_range_action_with_validation_is_one_line(name, good, bad, shown):
    env = make_env({"name": name, "num_envs": 2, "validate_actions": True})
    env.lean_reset()
    env.lean_step(torch.tensor(good))
    with pytest.raises(ActionOutOfRangeError) as err:
        env.lean_step(torch.tensor(bad))
    message = str(err.value)
    assert "\n" not in message and shown in message
    assert "env.validate_actions=false" in message and "clip" in message
    td = env.reset()  # the TorchRL face checks too
    with pytest.raises(ActionOutOfRangeError):
        env.step(td.set("action", torch.tensor(bad)))


def test_action_validation_is_off_by_default_and_set_by_config(tmp_path):
    env = make_env({"name": "cartpole", "num_envs": 2})
    env.lean_reset()
    env.lean_step(torch.tensor([0, 5]))  # unchecked: the hot path reads nothing
    trainer = tiny_trainer(tmp_path, "trainer.total_frames=64", "env.validate_actions=true")
    assert trainer.env.validate_actions and trainer.eval_env.validate_actions
    trainer.iteration()  # the policy's actions pass
    assert trainer.frames == 8


# -- kill -9 and resume, from the command line -----------------------------------------------

CLI = [
    *TINY,
    "trainer.log_interval=32",
    "trainer.checkpoint_interval=64",
    "threads=1",
]


def counters(path):
    saved = torch.load(path, weights_only=True)
    progress = {k: int(v) for k, v in saved["progress"].items() if k != "runs"}
    return saved, progress


@pytest.mark.slow  # subprocesses: seconds each (CI runs slow tests)
def test_kill_9_then_resume_continues_the_counters(tmp_path):
    run_dir, resumed_dir = tmp_path / "killed", tmp_path / "resumed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpurl.train", *CLI, "trainer.total_frames=1000000"]
        + [f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = run_dir / "checkpoints" / "last.pt"
    try:
        deadline = time.time() + 600
        while not (last.is_file() and torch.load(last, weights_only=True)["frames"] >= 128):
            assert proc.poll() is None, proc.stderr.read()
            assert time.time() < deadline, "no checkpoint in time"
            time.sleep(0.2)
        time.sleep(random.uniform(0, 1))  # a random moment, a save in flight or not
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    saved, used = read_checkpoint(run_dir, "cpu")  # verified, prev.pt if last.pt was cut
    progress = {k: int(v) for k, v in saved["progress"].items() if k != "runs"}
    frames = saved["frames"]
    assert frames >= 128 and frames % 64 == 0 and progress["frames"] == frames
    assert progress["updates"] > 0 and progress["episodes"] > 0

    total = frames + 64
    out = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *CLI, f"trainer.total_frames={total}"]
        + [f"trainer.resume={run_dir}", f"hydra.run.dir={resumed_dir}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads((resumed_dir / "summary.json").read_text())
    assert summary["frames"] == total
    final, after = counters(resumed_dir / "checkpoints" / "last.pt")
    assert final["frames"] == after["frames"] == total
    assert after["updates"] == progress["updates"] + 64  # utd 1: one update per frame
    assert after["episodes"] >= progress["episodes"]
    assert final["progress"]["update_count"] == after["updates"]
    # the progress record continues: the killed run's training history is its prefix
    history = saved["train_history"]
    assert history and final["train_history"][: len(history)] == history


@pytest.mark.slow  # subprocesses: seconds each (CI runs slow tests)
def test_a_diverging_run_stops_with_one_line_and_keeps_its_directory(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, "-m", "gpurl.train", *CLI, "trainer.total_frames=2000"]
        + ["agent.lr=1e30", f"hydra.run.dir={run_dir}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("gpurl: error")]
    assert "NaN or inf at frames" in line and "lower agent.lr" in line
    assert (run_dir / "error.txt").read_text() == line + "\n"
    assert (run_dir / ".hydra" / "config.yaml").is_file()
