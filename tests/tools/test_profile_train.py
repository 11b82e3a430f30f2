"""tools/profile_train.py: an off-policy preset warmed up past its random frames, timed,
then profiled, in one record (on the CPU: the host table, no device columns)."""

import json

from tools import profile_train


def test_an_off_policy_preset_is_profiled_after_its_first_update(tmp_path, capsys):
    out = tmp_path / "profile.jsonl"
    args = [
        "dqn_cartpole",
        "--iterations", "3",
        "--warmup", "1",
        "--top", "10",
        "--out", str(out),
        "--set", "env.num_envs=4", "trainer.init_random_frames=32", "trainer.batch_size=16",
    ]  # fmt: skip
    assert profile_train.main(args) == 0
    record = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == record
    # the random frames (8 iterations of 4) and one more before the first update, then 1
    assert record["warmup_iterations"] >= 9
    assert record["frames"] == 3 * 4 and record["frames_per_sec"] > 0
    assert record["profiled_wall_s"] > 0 and record["host_self_s"] > 0
    top = record["top_host"]
    assert len(top) == 10 and all(r["calls"] >= 1 for r in top)
    times = [r["self_host_ms"] for r in top]
    assert times == sorted(times, reverse=True)
    # the update ran under the profiler: its matrix products are among the ten costliest
    # ops (not always the top four: three iterations on a loaded machine vary)
    assert any(r["name"] in ("aten::mm", "aten::addmm") for r in top)
    assert record["device"] == "cpu" and record["device_kernel_s"] is None
    assert record["launches_per_iteration"] is None and record["top_device"] is None


def test_fewer_iterations_can_be_profiled_than_timed(tmp_path, capsys):
    """--profile-iterations 1: three iterations timed, one profiled (an update's matrix
    products counted once), and the unprofiled frames/s on stderr before the profile."""
    out = tmp_path / "profile.jsonl"
    common = [
        "dqn_cartpole", "--iterations", "3", "--warmup", "0", "--top", "50",
        "--set", "env.num_envs=4", "trainer.init_random_frames=8", "trainer.batch_size=8",
    ]  # fmt: skip
    assert profile_train.main([*common, "--profile-iterations", "1", "--out", str(out)]) == 0
    one = json.loads(out.read_text())
    err = capsys.readouterr().err
    assert f"dqn_cartpole: {one['frames_per_sec']:,.1f} frames/s unprofiled" in err
    assert one["iterations"] == 3 and one["profiled_iterations"] == 1 and one["frames"] == 12
    assert profile_train.main([*common, "--out", str(tmp_path / "all.jsonl")]) == 0
    every = json.loads((tmp_path / "all.jsonl").read_text())
    assert every["profiled_iterations"] == 3

    def calls(record, name):
        return sum(r["calls"] for r in record["top_host"] if r["name"] == name)

    # one update an iteration (utd x 4 frames): a third of the optimiser steps profiled
    steps_one, steps_all = calls(one, "aten::_fused_adam_"), calls(every, "aten::_fused_adam_")
    assert steps_one >= 1 and steps_all == 3 * steps_one
