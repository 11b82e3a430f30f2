"""tools/soak.py: the growth verdict on synthetic memory series (fast), and the tool end to
end on a tiny DQN CartPole run, flat and with a leak injected from outside the trainer
(slow)."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools import soak
from tools.common import pythonpath

MIB = soak.MIB
ROOT = Path(__file__).resolve().parents[2]


def series(total, level_at, n=600, noise_mib=2.0, seed=0):
    """n samples evenly over [0, total] frames: level_at(frames) in bytes plus noise."""
    rng = random.Random(seed)
    frames = [int(total * i / (n - 1)) for i in range(n)]
    values = [level_at(f) + rng.uniform(-noise_mib, noise_mib) * MIB for f in frames]
    return frames, values


def verdict(frames, values, warmup, total, tol_mib=32.0, tol_pct=2.0):
    g = soak.growth(frames, values, warmup, total)
    return soak.judge(g, tol_mib, tol_pct)[0], g


def test_flat_with_noise_passes():
    total, warmup = 1_000_000, 200_000
    frames, values = series(total, lambda f: 400 * MIB, noise_mib=8.0)
    grew, g = verdict(frames, values, warmup, total)
    assert not grew
    assert abs(g["growth"]) < 4 * MIB


def test_linear_leak_fails():
    # 100 MiB per million frames: 53 MiB between the medians of the first and last thirds
    total, warmup = 1_000_000, 200_000
    frames, values = series(total, lambda f: 400 * MIB + 100 * MIB * f / 1e6)
    grew, g = verdict(frames, values, warmup, total)
    assert grew
    assert 45 * MIB < g["growth"] < 60 * MIB
    slope = soak.slope_per_million(frames, values, warmup, total)
    assert 95 * MIB < slope < 105 * MIB


def test_growth_during_warmup_only_passes():
    # the replay filling: 300 MiB over the first 200k frames, then flat
    total, warmup = 1_000_000, 200_000
    frames, values = series(total, lambda f: 300 * MIB + 300 * MIB * min(f, warmup) / warmup)
    grew, g = verdict(frames, values, warmup, total)
    assert not grew
    # ... which a comparison from the start of the run would have called growth
    assert soak.judge(soak.growth(frames, values, 0, total), 32.0, 2.0)[0]


def test_short_spikes_in_last_third_pass():
    # an evaluation or checkpoint lifting RSS by 200 MiB for a few samples
    total, warmup = 1_000_000, 200_000
    frames, values = series(
        total, lambda f: 400 * MIB + (200 * MIB if 900_000 < f < 910_000 else 0)
    )
    assert not verdict(frames, values, warmup, total)[0]


def test_percent_tolerance_applies_when_larger():
    total, warmup = 1_000_000, 200_000
    frames, values = series(total, lambda f: 4000 * MIB + 100 * MIB * f / 1e6, noise_mib=0)
    assert not verdict(frames, values, warmup, total, tol_mib=32, tol_pct=2)[0]  # 80 MiB
    assert verdict(frames, values, warmup, total, tol_mib=32, tol_pct=0.5)[0]  # 32 MiB


def test_too_few_samples_is_none():
    frames, values = [0, 500, 1000], [1.0, 1.0, 1.0]
    assert soak.growth(frames, values, 100, 1000) is None


def test_warmup_covers_replay_eval_and_checkpoint():
    cfg = SimpleNamespace(eval_interval=2500, checkpoint_interval=10_000)
    env = SimpleNamespace(batch_size=SimpleNamespace(numel=lambda: 64))
    trainer = SimpleNamespace(
        cfg=cfg, env=env, buffer=SimpleNamespace(rows=3125), frames_per_batch=64
    )
    frames, rules = soak.warmup_frames(trainer, 1_000_000, 0.1)
    assert rules == {
        "flag": 100_000,
        "replay_full": 200_000,  # 3125 rows of 64 envs
        "first_eval": 2500,
        "first_checkpoint": 10_000,
    }
    assert frames == 200_000
    frames, _ = soak.warmup_frames(trainer, 1_000_000, 250_001)  # rounded up to a batch
    assert frames == 250_048


def test_rss_is_read():
    assert soak.rss_bytes() > 10 * MIB


# -- end to end ---------------------------------------------------------------------------------
TINY = [
    "experiment=dqn_cartpole",
    "trainer.total_frames=12000",
    "env.num_envs=32",
    "trainer.utd=0.0625",
    "trainer.buffer_size=2000",
    "trainer.eval_interval=2000",
    "trainer.checkpoint_interval=4000",
    "trainer.log_interval=2000",
    "trainer.progress=false",
    "logger=none",
]

# Appends 512 KiB of written memory to a list every iteration (about 190 MiB over the
# tiny run): the leak lives in this wrapper, nowhere in gpurl or the tool.
LEAK = """
import sys, torch
from gpurl.trainers.off_policy import OffPolicyTrainer
from tools import soak
kept, iteration = [], OffPolicyTrainer.iteration
def leaking(self):
    iteration(self)
    kept.append(torch.ones(128 * 1024))
OffPolicyTrainer.iteration = leaking
sys.exit(soak.main(sys.argv[1:]))
"""


def run_soak(tmp_path, *extra, leak=False):
    out = tmp_path / "soak.jsonl"
    args = [*TINY, "--interval", "0.05", "--out", str(out), "--plot", str(tmp_path / "soak.png")]
    cmd = [sys.executable, "-c", LEAK] if leak else [sys.executable, "tools/soak.py"]
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT)}
    proc = subprocess.run(
        [*cmd, *args, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return proc, records


@pytest.mark.slow
def test_tiny_run_is_flat(tmp_path):
    proc, records = run_soak(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "soak: PASS: memory flat" in proc.stdout
    (r,) = records
    assert r["verdict"] == "flat" and r["frames"] == 12000
    assert r["warmup_frames"] == 4000  # the first checkpoint, the latest of the rules
    assert r["rss_warmup_end_mib"] > 0 and r["rss_peak_mib"] >= r["rss_final_mib"] > 0
    assert abs(r["rss_growth_mib"]) <= r["rss_tolerance_mib"]
    assert r["samples"] > 20 and r["device"] == "cpu" and "commit" in r
    assert (tmp_path / "soak.png").stat().st_size > 0


@pytest.mark.slow
def test_injected_leak_fails(tmp_path):
    proc, records = run_soak(tmp_path, leak=True)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "soak: FAIL: memory grows" in proc.stdout
    (r,) = records
    assert r["verdict"] == "growth"
    assert r["rss_growth_mib"] > r["rss_tolerance_mib"]
