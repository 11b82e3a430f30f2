"""tools/bench_env.py: one JSON record for any native env; the memory gate."""

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "tools" / "bench_env.py"
_spec = importlib.util.spec_from_file_location("bench_env", _PATH)
bench_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_env)

FIELDS = {
    "config",
    "device",
    "torch",
    "torchrl",
    "torch_num_threads",
    "env_steps_per_sec",
    "ms_per_step",
    "max_mem_alloc_before",
    "max_mem_alloc_after",
    "max_mem_alloc_delta",
}


@pytest.mark.parametrize(
    "argv",
    [
        ["pixels", "--env-kw", "stack_k=2", "--force-resets"],
        ["cartpole"],
        ["pendulum", "--max-mem-delta", "0"],
        ["packing", "--env-kw", "resolution=32", "--env-kw", "pool_size=8"],  # MultiCategorical
        ["marinenav", "--env-kw", "pool_size=16", "--force-resets"],  # a composite action
    ],
)
def test_bench_prints_one_record(argv, capsys):
    rc = bench_env.main(
        [*argv, "--num-envs", "8", "--steps", "4", "--warmup", "2", "--device", "cpu"]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and len(lines) == 1
    record = json.loads(lines[0])
    assert FIELDS <= record.keys()
    assert record["env_steps_per_sec"] > 0 and record["host_reads_per_step"] == 0
    assert record["max_mem_alloc_delta"] is None  # CPU: no allocator statistics
    assert record["config"]["path"] == "lean_step"
    assert record["config"]["force_resets"] == ("--force-resets" in argv)


def test_max_mem_delta_gate(monkeypatch, capsys):
    def grown(args):
        return {"max_mem_alloc_delta": 512}

    monkeypatch.setattr(bench_env, "run", grown)
    assert bench_env.main(["pixels", "--max-mem-delta", "0"]) == 1
    assert bench_env.main(["pixels", "--max-mem-delta", "1024"]) == 0
    assert bench_env.main(["pixels"]) == 0
