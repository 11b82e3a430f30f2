"""The packing tools on a tiny trained hrl_dqn run: eval_packing --checkpoint evaluates
the learned packer beside the baselines on the run's env settings, render_packing draws
it, and bench_seed_packing runs its episode end to end (smoke-sized)."""

import json

import pytest

from gpurl.train import load_trained
from tools import bench_seed_packing, eval_packing, render_packing

from ..conftest import SMALL_PACKING, requires_cuda, train_run_dir

pytestmark = pytest.mark.slow  # trains a run and drives three tools: ~30 s


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    train_run_dir(
        run_dir,
        [
            *SMALL_PACKING,
            "env.eval_envs=4",
            "trainer.init_random_frames=8",
            "trainer.utd=0.5",
            "trainer.total_frames=32",
            "trainer.eval_interval=32",
        ],
    )
    return run_dir


def test_eval_packing_puts_the_learned_packer_beside_the_baselines(tiny_run, capsys):
    eval_packing.main(["--checkpoint", str(tiny_run), "--episodes", "4", "--kernel", "eager"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in records] == ["random", "heuristic", "learned"]
    for r in records:  # the run's env settings, one record per policy
        assert r["config"]["resolution"] == 16 and r["config"]["num_objects"] == 6
        assert 0 < r["utilisation"] < 1 and 0 < r["packed"] <= 6
        assert {"compactness", "pyramidality", "max_height"} <= set(r)
    cfg, agent = load_trained(tiny_run)
    assert agent.name == "hrl_dqn" and agent.progress.update_count > 0
    # each learned level beside the other level's heuristic rule
    split = ["--policies", "learned_manager,learned_worker"]
    eval_packing.main(
        ["--checkpoint", str(tiny_run), "--episodes", "4", "--kernel", "eager", *split]
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in records] == ["learned_manager", "learned_worker", "learned"]
    assert all(0 < r["utilisation"] < 1 for r in records)


def test_render_packing_draws_the_learned_packer(tiny_run, tmp_path, capsys):
    out = tmp_path / "packed.png"
    render_packing.main(["--checkpoint", str(tiny_run), "--out", str(out)])
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out.stat().st_size > 10_000 and record["policy"] == "learned"
    assert record["placed_outlines"] == record["packed"] > 0
    # side by side on the same episode: one panel and one record per policy
    both = tmp_path / "both.png"
    render_packing.main(
        ["--checkpoint", str(tiny_run), "--policies", "learned", "heuristic", "--out", str(both)]
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()[-2:]]
    assert [r["policy"] for r in records] == ["learned", "heuristic"]
    assert both.stat().st_size > out.stat().st_size
    assert all(r["placed_outlines"] == r["packed"] > 0 for r in records)
    with pytest.raises(SystemExit):  # a learned panel needs a run
        render_packing.main(["--policies", "learned", "--out", str(both)])


def test_bench_seed_packing_times_an_episode(capsys):
    args = ["--resolution", "32", "--small", "--repeats", "1", "--kernel", "eager"]
    args += ["--gemm-size", "256"]
    assert bench_seed_packing.main(args) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    steps = record["steps"]
    assert 1 <= record["placements"] <= steps <= 10
    # per step: 24 acting maps, 24 online bootstrap maps and 1 target map; K = 20
    # candidates acting, 20 online bootstrap and 1 target
    assert record["unet_maps"] == 49 * steps and record["manager_candidates"] == 41 * steps
    assert record["unet_gflop_per_map"] > 0 and record["manager_gflop_per_candidate"] > 0
    assert record["gemm_gflops"] > 0 and record["arith_floor_sec"] > 0
    assert record["config"]["epsilon"] == 0.9 and record["config"]["bootstrap"]
    assert record["elapsed_sec"] >= record["act_sec"] + record["env_sec"] > 0
    assert record["bootstrap_sec"] > 0 and record["unet_floor_sec"] > 0
    assert "profile" not in record
    assert record["phase_timing"] == "host, a sync after each phase"  # the CPU's only way
    assert bench_seed_packing.main([*args, "--max-elapsed-sec", "0", "--profile"]) == 1
    profiled = json.loads(capsys.readouterr().out.splitlines()[-1])["profile"]
    assert profiled["profiled_wall_s"] > 0 and len(profiled["top_host"]) == 12
    # the U-Net's and the manager's convolutions are among the operators timed
    assert any("convolution" in row["name"] for row in profiled["top_host"])
    assert profiled["device_kernel_s"] is None  # the CPU: no device columns


@requires_cuda
def test_bench_seed_packing_times_cuda_phases_by_events(capsys):
    """On CUDA the phases are timed by events (no sync between them); --phase-sync
    keeps the older host-timed phases. Both episodes place items and time every phase."""
    args = ["--device", "cuda", "--resolution", "32", "--small", "--repeats", "1"]
    args += ["--kernel", "eager", "--gemm-size", "256"]
    for extra, timing in (([], "cuda events"), (["--phase-sync"], "host, a sync after each phase")):
        assert bench_seed_packing.main([*args, *extra]) == 0
        record = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert record["phase_timing"] == timing and record["placements"] >= 1
        assert record["act_sec"] > 0 and record["env_sec"] > 0 and record["bootstrap_sec"] > 0
