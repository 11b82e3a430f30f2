"""tools/bench_train.py: one record per case with train, env and floor frames/s,
efficiency and memory; the CUDA-graph mode is skipped with a record off CUDA."""

import json

import pytest

from tools import bench_train

FIELDS = {
    "agent",
    "num_envs",
    "mode",
    "train_frames_per_sec",
    "env_frames_per_sec",
    "floor_frames_per_sec",
    "efficiency",
    "peak_mem_before",
    "peak_mem_after",
    "peak_mem_delta",
    "commit",
    "torch_threads",
}


@pytest.mark.slow  # builds and trains a pixel trainer
def test_prints_train_and_floor_records(capsys):
    argv = ["--agents", "ppo", "--num-envs", "16", "--rounds", "1", "--warmup", "1"]
    argv += ["--modes", "eager", "cudagraphs", "--max-mem-delta", str(1 << 40)]
    assert bench_train.main(argv) == 0
    eager, graphs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert FIELDS <= set(eager)
    assert eager["num_envs"] == 16 and eager["mode"] == "eager" and eager["mem_check"]
    assert eager["frames_per_iteration"] == 16 * 4
    # floor time = env time + network time; efficiency = floor time / train time
    (train,), (env,), (net,) = eager["train_s"], eager["env_s"], eager["net_s"]
    assert eager["floor_frames_per_sec"] == pytest.approx(64 / (env + net), rel=1e-2)
    assert eager["efficiency"] == pytest.approx((env + net) / train, rel=1e-2)
    assert graphs["mode"] == "cudagraphs" and "skipped" in graphs  # no CUDA here


@pytest.mark.slow  # builds and trains a VMAS trainer
def test_times_any_on_policy_preset_with_its_own_action_spec(capsys):
    pytest.importorskip("vmas")
    argv = ["--presets", "vmas_navigation_ippo", "--num-envs", "4", "--rollout-steps", "4"]
    argv += ["--rounds", "1", "--warmup", "1", "--modes", "eager"]
    assert bench_train.main(argv) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert FIELDS <= set(record)
    assert record["preset"] == "vmas_navigation_ippo" and record["agent"] == "ppo"
    # frames count env steps (two robots act in each); the env alone steps on random
    # actions drawn from its [envs, robots] action spec
    assert record["frames_per_iteration"] == 4 * 4 and record["env_frames_per_sec"] > 0
