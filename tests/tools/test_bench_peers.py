"""tools/bench_peers.py: training time without evaluations, time to a threshold, the
BenchMARL experiment built from a gpurl preset, skipping what is absent, the SB3 side,
and the published figures it quotes."""

from __future__ import annotations

import json

import pytest
import yaml

from gpurl.api import config, train
from tools import bench_peers


def test_training_time_leaves_out_earlier_evaluations():
    log = [
        {"frames": 100, "wall_s": 2.0, "eval_s": 0.5, "return": 10.0},
        {"frames": 200, "wall_s": 4.5, "eval_s": 1.0, "return": 480.0},
        {"frames": 300, "wall_s": 7.5, "eval_s": 1.0, "return": 500.0},
    ]
    assert bench_peers.training_times(log) == [2.0, 4.0, 6.0]
    history = [[e["frames"], e["return"], t] for e, t in zip(log, [2.0, 4.0, 6.0], strict=True)]
    assert bench_peers.first_reaching(history, 475.0) == {
        "frames_to_threshold": 200,
        "train_s_to_threshold": 4.0,
    }
    assert bench_peers.first_reaching(history, 600.0)["frames_to_threshold"] is None
    assert bench_peers.first_reaching(history, None)["train_s_to_threshold"] is None


def test_a_run_logs_how_long_each_evaluation_took(tmp_path):
    summary = train(
        experiment="dqn_cartpole",
        run_dir=tmp_path,
        trainer={
            "total_frames": 400,
            "init_random_frames": 100,
            "eval_interval": 200,
            "progress": False,
        },
    )
    log = summary["eval_log"]
    assert [e["frames"] for e in log] == [200, 400]
    assert all(e["eval_s"] > 0 for e in log)
    times = bench_peers.training_times(log)
    assert times[0] == log[0]["wall_s"]
    assert times[1] == pytest.approx(log[1]["wall_s"] - log[0]["eval_s"], abs=0.01)


def test_benchmarl_runs_the_presets_scenario_nets_and_update_count(tmp_path):
    cfg = config(experiment="vmas_navigation_dqn")
    spec, frames = bench_peers.benchmarl_spec("iql", cfg, 3, 6400, tmp_path)
    exp = spec["experiment_config"]
    # batches of 100 steps x 32 envs, evaluations every 9600 frames (closest to 10,000)
    assert exp["off_policy_collected_frames_per_batch"] == 3200
    assert exp["evaluation_interval"] == 9600 and frames == 9600
    assert exp["max_n_frames"] == frames
    # gpurl: 0.25 x (9600 - 3200) updates; BenchMARL: that total over its 3 batches
    assert exp["off_policy_n_optimizer_steps"] * 3 == pytest.approx(1600, abs=2)
    assert spec["scenario_config"] == {"n_agents": 2, "shared_rew": False, "max_steps": 100}
    assert spec["hidden"] == [256, 256] and spec["activation"] == "relu"
    assert exp["prefer_continuous_actions"] is False
    assert exp["evaluation_episodes"] == 128 and exp["gamma"] == 0.9
    assert (exp["exploration_eps_init"], exp["exploration_anneal_frames"]) == (1.0, 30000)
    assert spec["algorithm_config"] == {"loss_function": "smooth_l1"}  # gpurl's huber
    assert spec["seed"] == 3
    json.dumps(spec)  # it goes to the other venv as one JSON argument

    sac, _ = bench_peers.benchmarl_spec(
        "isac", config(experiment="vmas_navigation_sac"), 0, 6400, tmp_path
    )
    assert sac["experiment_config"]["prefer_continuous_actions"] is True
    assert sac["experiment_config"]["clip_grad_val"] is None  # gpurl's SAC: no clipping


def test_benchmarl_ppo_makes_gpurls_updates_with_gpurls_loss_weights(tmp_path):
    cfg = config(experiment="vmas_navigation_ippo")
    spec, frames = bench_peers.benchmarl_spec("ippo", cfg, 0, 38400, tmp_path)
    exp, algo = spec["experiment_config"], spec["algorithm_config"]
    batch = exp["on_policy_collected_frames_per_batch"]
    assert batch == 100 * 32 and frames == 38400
    # BenchMARL's Experiment makes n_minibatch_iters passes over the batch, each of
    # batch / minibatch_size minibatches: gpurl's epochs x minibatches updates per batch
    passes, per_pass = exp["on_policy_n_minibatch_iters"], batch // exp["on_policy_minibatch_size"]
    assert (passes, per_pass) == (cfg.agent.epochs, cfg.agent.minibatches)
    # TorchRL's l2 critic loss is (V - R)^2, gpurl's 0.5 (V - R)^2: half the coefficient
    assert algo["critic_coef"] == cfg.agent.value_coef / 2
    assert exp["adam_eps"] == 1e-5 and exp["lr"] == cfg.agent.lr
    assert algo["lmbda"] == cfg.agent.gae_lambda and algo["clip_epsilon"] == 0.2


def test_benchmarl_samples_and_trains_on_the_device_asked_for(tmp_path):
    cfg = config(experiment="vmas_navigation_ippo")
    spec, _ = bench_peers.benchmarl_spec("ippo", cfg, 0, 38400, tmp_path, "cuda")
    exp = spec["experiment_config"]
    assert (exp["sampling_device"], exp["train_device"], exp["buffer_device"]) == ("cuda",) * 3
    spec, _ = bench_peers.benchmarl_spec("ippo", cfg, 0, 38400, tmp_path)
    assert spec["experiment_config"]["train_device"] == "cpu"


def test_a_named_benchmarl_interpreter_runs_with_its_own_packages_only(tmp_path, monkeypatch):
    # a GPU machine has no network: BenchMARL's packages sit in a folder of their own,
    # and gpurl's (torchrl 0.14 on PYTHONPATH) must not reach its process
    site = tmp_path / "site-benchmarl"
    monkeypatch.setenv("BENCHMARL_PYTHON", "/usr/bin/python3")
    monkeypatch.setenv("BENCHMARL_PYTHONPATH", str(site))
    monkeypatch.setenv("PYTHONPATH", "/tmp/site-gpurl")
    python, note = bench_peers.benchmarl_python(install=False)
    assert python == bench_peers.Path("/usr/bin/python3") and str(site) in note["interpreter"]
    seen = {}

    def fake_run(cmd, cwd, env, capture_output, text):
        seen.update(cmd=cmd, path=env.get("PYTHONPATH"))
        out = 'RESULT {"frames": 1}'
        return bench_peers.subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(bench_peers.subprocess, "run", fake_run)
    stub = tmp_path / "stub"
    assert bench_peers.run_benchmarl(python, {"algorithm": "ippo"}, stub) == {"frames": 1}
    assert seen["cmd"][0] == "/usr/bin/python3"
    assert seen["path"] == f"{stub}{bench_peers.os.pathsep}{site}"


def test_settings_given_with_set_reach_both_sides(tmp_path, monkeypatch):
    # a device comparison at many envs: --set env.num_envs=256 changes gpurl's run and
    # the BenchMARL experiment built from the same config
    seen = {}

    def fake_gpurl(preset, seed, overrides, run_dir):
        seen["gpurl"] = overrides
        log = [{"frames": 25600, "return": 1.0, "wall_s": 2.0, "eval_s": 0.1}]
        versions = {"torch": "t", "torchrl": "r", "tensordict": "d"}
        return {"frames": 25600, "eval_log": log, "eval_return": 1.0, "wall_time_s": 3.0,
                "process_s": 4.0, "agent": "ppo", **versions}  # fmt: skip

    def fake_benchmarl(python, spec, extra_path):
        seen["benchmarl"] = spec
        return {"frames": 25600, "eval_history": [[25600, 1.0, 2.0]], "train_s": 2.0,
                "wall_s": 3.0, "versions": {}}  # fmt: skip

    monkeypatch.setattr(bench_peers, "run_gpurl", fake_gpurl)
    monkeypatch.setattr(bench_peers, "run_benchmarl", fake_benchmarl)
    monkeypatch.setattr(bench_peers, "benchmarl_python", lambda install: ("python3", {}))
    argv = ["vmas", "--algos", "ippo", "--frames", "25600", "--no-install",
            "--out", str(tmp_path), "--set", "env.num_envs=256"]  # fmt: skip
    assert bench_peers.main(argv) == 0
    assert seen["gpurl"][0] == "env.num_envs=256"
    exp = seen["benchmarl"]["experiment_config"]
    assert exp["on_policy_n_envs_per_worker"] == 256
    assert exp["on_policy_collected_frames_per_batch"] == 100 * 256


def test_absent_peer_and_absent_preset_are_skipped_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_peers, "BENCHMARL_VENV", tmp_path / "no-venv")
    monkeypatch.setattr(bench_peers, "PRESETS", tmp_path)  # no preset at all
    out = tmp_path / "out"
    rc = bench_peers.main(["vmas", "--algos", "ippo", "--no-install", "--out", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert lines[0].startswith("skip BenchMARL: no BenchMARL venv")
    assert lines[1] == (
        "skip ippo: gpurl preset vmas_navigation_ippo does not exist in this checkout"
    )
    assert lines[2].startswith("0 records")


def tiny_sb3_dqn(monkeypatch):
    """SB3's zoo DQN on CartPole at 600 steps, a few updates: a run of seconds."""
    pytest.importorskip("stable_baselines3")
    zoo = dict(bench_peers.ZOO[("cartpole", "dqn")])
    zoo["n_timesteps"] = 600
    zoo["kwargs"] = {**zoo["kwargs"], "learning_starts": 100, "train_freq": 50, "gradient_steps": 5}
    monkeypatch.setitem(bench_peers.ZOO, ("cartpole", "dqn"), zoo)


def test_sb3_side_records_evaluations_and_the_threshold(monkeypatch):
    tiny_sb3_dqn(monkeypatch)
    record = bench_peers.run_sb3("cartpole", "dqn", 0, eval_interval=250, stop=False)
    frames = [h[0] for h in record["eval_history"]]
    assert frames == [250, 500, 600]  # every 250 steps, then the final one
    assert record["eval_return"] == record["eval_history"][-1][1]
    assert record["threshold"] == 475.0 and record["frames"] == 600
    assert 0 < record["train_s"] <= record["wall_time_s"]


def test_sb3_side_evaluates_on_schedule_where_the_task_has_no_threshold(monkeypatch):
    """The MuJoCo tasks have no threshold; their SB3 runs still keep a curve."""
    tiny_sb3_dqn(monkeypatch)
    monkeypatch.setitem(
        bench_peers.TASKS, "cartpole", {**bench_peers.TASKS["cartpole"], "threshold": None}
    )
    record = bench_peers.run_sb3("cartpole", "dqn", 0, eval_interval=250, stop=True)
    assert [h[0] for h in record["eval_history"]] == [250, 500, 600]
    assert record["threshold"] is None and record["frames"] == 600


def test_sb3_recurrent_ppo_runs_on_cartpole_without_velocities(monkeypatch):
    """sb3-contrib's RecurrentPPO, the zoo's CartPoleNoVel-v1 settings at a tiny budget:
    its observations normalised by VecNormalize, evaluated through the running stats."""
    pytest.importorskip("sb3_contrib")
    zoo = dict(bench_peers.ZOO[("cartpole_masked", "ppo_lstm")])
    zoo["n_timesteps"] = 512
    zoo["kwargs"] = {**zoo["kwargs"], "n_epochs": 1}
    monkeypatch.setitem(bench_peers.ZOO, ("cartpole_masked", "ppo_lstm"), zoo)
    record = bench_peers.run_sb3("cartpole_masked", "ppo_lstm", 0, eval_interval=256, stop=False)
    assert [h[0] for h in record["eval_history"]] == [256, 512]
    assert record["threshold"] == 475.0 and record["eval_return"] > 0
    assert record["zoo"]["normalize"] and record["zoo"]["policy"] == "MlpLstmPolicy"


def test_hidden_entries_are_zero_in_every_observation():
    gym = pytest.importorskip("gymnasium")
    env = bench_peers.hide_entries(gym.make("CartPole-v1"), [1, 3])
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        assert obs[1] == 0 and obs[3] == 0 and obs[2] != 0
        obs, *_ = env.step(0)


def test_published_figures_name_their_source():
    published = yaml.safe_load(bench_peers.PUBLISHED.read_text())
    impls = {p["impl"] for p in published["breakout"]}
    assert impls == {"cleanrl", "purejaxql"}
    for entry in published["breakout"]:
        assert entry["source"].startswith("https://github.com/")
        assert entry["figure"] and entry["steps"] > 0


def test_vmas_notes_say_what_gpurls_preset_does_at_the_step_limit():
    ppo = config(experiment="vmas_navigation_ippo").agent
    note = bench_peers.vmas_notes("ippo", ppo)
    assert "so does gpurl's preset (agent.bootstrap_truncated=false)" in note
    assert "nor does gpurl's" in note  # the preset trains on raw advantages, as BenchMARL
    dqn = bench_peers.vmas_notes("iql", config(experiment="vmas_navigation_dqn").agent)
    assert "bootstraps through it" in dqn and "utd x" in dqn
