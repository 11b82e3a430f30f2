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
