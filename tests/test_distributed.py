"""Data-parallel training under torchrun on the CPU (gloo): gradient equivalence, rank 0
alone writing, frames counted over ranks, resume on another world size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests import ddp_worker

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
TINY_DQN = [
    "agent.hidden=[16,16]",
    "trainer.init_random_frames=200",
    "trainer.batch_size=32",
    "trainer.eval_interval=400",
    "trainer.log_interval=200",
    "trainer.checkpoint_interval=400",
    "trainer.progress=false",
    "env.eval_envs=2",
]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """A subprocess in tmp_path, its temporary files under tmp_path/tmp (to check that
    the ranks leave none), importing this checkout's gpurl."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"), PYTHONPATH=str(ROOT))
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # torchrun starts two processes: ~15 s per agent
@pytest.mark.parametrize(
    "overrides",
    [
        ["agent=dqn", "agent.hidden=[32,32]", "agent.max_grad_norm=1.0"],
        ["env=pendulum", "agent=ddpg", "agent.hidden=[32,32]"],
        # the recurrent core's weights averaged too: ranks replay halves of the sequences
        ["agent=ppo", "agent.recurrent=lstm", "agent.recurrent_hidden=16", "agent.hidden=[32]"],
    ],
    ids=["dqn", "ddpg", "recurrent_ppo"],
)
def test_two_ranks_with_half_the_batch_make_the_one_rank_update(tmp_path, overrides):
    out = tmp_path / "ranks.pt"
    run = _run(tmp_path, *TORCHRUN, str(ROOT / "tests" / "ddp_worker.py"), str(out), *overrides)
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = torch.load(out)
    whole = ddp_worker.updated_parameters(overrides)
    assert ranks.keys() == whole.keys()
    for key, value in whole.items():
        torch.testing.assert_close(ranks[key], value, rtol=1e-5, atol=1e-6, msg=key)
    # the updates moved the networks: equal because averaged, not because untouched
    half = ddp_worker.updated_parameters(overrides, slice(0, ddp_worker.BATCH // 2))
    assert any(not torch.allclose(half[k], whole[k]) for k in whole)


@pytest.mark.slow  # three torchrun / train subprocesses: ~60 s
def test_torchrun_run_writes_once_counts_all_frames_and_resumes_on_one_rank(tmp_path):
    run_dir = tmp_path / "run"
    train = [*TORCHRUN, "-m", "gpurl.train", *TINY_DQN, f"hydra.run.dir={run_dir}"]
    first = _run(tmp_path, *train, "trainer.total_frames=800")
    assert first.returncode == 0, first.stderr[-3000:]
    # one run directory, written by rank 0 alone; the other rank's scratch is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "tmp"]
    assert not list((tmp_path / "tmp").glob("gpurl-rank*"))
    assert first.stdout.strip().splitlines()[-1] == str(run_dir / "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["world_size"] == 2
    assert summary["frames"] == 800  # both ranks' frames: 8 envs each, 16 frames a step
    assert [f for f, _ in summary["eval_history"]] == [400, 800]
    state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    assert int(state["progress"]["frames"]) == 800  # schedules saw the whole run's frames
    # utd 1 per frame of the whole run, from the first step at >= 200 frames (208, which
    # pays for its own 16 frames): 800 - 208 + 16, on each rank, as one process would
    assert int(state["progress"]["updates"]) == 800 - 208 + 16

    # continue the same run on one process: counters and history carry over
    resumed = _run(
        tmp_path,
        *[sys.executable, "-m", "gpurl.train", *TINY_DQN, "trainer.total_frames=1200"],
        *[f"trainer.resume={run_dir}", f"hydra.run.dir={tmp_path / 'resumed'}"],
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert after["world_size"] == 1 and after["frames"] == 1200
    assert [f for f, _ in after["eval_history"]] == [400, 800, 1200]

    # a global minibatch the ranks cannot split: one line, exit 2
    odd = _run(
        tmp_path,
        *[*train, "trainer.total_frames=800", "trainer.batch_size=33"],
        f"hydra.run.dir={tmp_path / 'odd'}",
    )
    assert odd.returncode != 0
    errors = [line for line in odd.stderr.splitlines() if line.startswith("gpurl: error:")]
    assert len(errors) == 1 and "batch_size=33" in errors[0], odd.stderr[-2000:]


@pytest.mark.slow  # two torchrun runs: ~40 s
def test_torchrun_stops_every_rank_on_a_signal_and_resume_auto_continues(tmp_path):
    """SIGTERM to torchrun, which forwards it to every rank: the ranks agree at the next
    log, rank 0 writes the checkpoint and summary at the frames where all stopped, and
    the same command with trainer.resume=auto continues on both ranks."""
    import signal
    import time

    run_dir = tmp_path / "run"
    command = [
        *TORCHRUN,
        *["-m", "gpurl.train", *TINY_DQN, "logger=none", "trainer.total_frames=1600"],
        *["trainer.resume=auto", f"hydra.run.dir={run_dir}"],
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    ckpt = run_dir / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not ckpt.is_file() and time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    stops = [line for line in err.splitlines() if line.startswith("gpurl: stopped by SIGTERM")]
    assert len(stops) == 1, err[-3000:]  # rank 0's line, once
    stopped = json.loads((run_dir / "summary.json").read_text())
    assert stopped["stopped"] == "signal" and stopped["signal"] == "SIGTERM"
    assert 400 <= stopped["frames"] < 1600 and stopped["frames"] % 200 < 16  # at a log
    assert torch.load(ckpt, weights_only=True)["frames"] == stopped["frames"]

    again = _run(tmp_path, *command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "trainer.resume=auto: continuing from" in again.stderr
    done = json.loads((run_dir / "summary.json").read_text())
    assert done["frames"] == 1600 and done["world_size"] == 2
    assert [f for f, _ in done["eval_history"]] == [400, 800, 1200, 1600]
