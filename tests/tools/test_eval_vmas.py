"""tools/eval_vmas.py: one record per (policy, preset or run, seed) on a VMAS preset's
evaluation envs; the scripted navigation controller reaches the goals, random play
does not. Skipped without the vmas extra."""

import json

import pytest

pytest.importorskip("vmas")

from tools import eval_vmas  # noqa: E402

from ..conftest import train_run_dir  # noqa: E402

SMALL = ["env.eval_envs=16", "env.max_episode_steps=80"]


def records(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.slow  # VMAS episodes of two presets: seconds
@pytest.mark.parametrize("preset", ["vmas_navigation_dqn", "vmas_navigation_sac"])
def test_heuristic_reaches_the_goals_and_random_play_does_not(capsys, preset):
    eval_vmas.main([preset, "--seeds", "1", "--passes", "1", "--", *SMALL])
    random, heuristic = records(capsys)
    assert (random["policy"], heuristic["policy"]) == ("random", "heuristic")
    assert random["seed"] == heuristic["seed"] == 1 and random["eval_envs"] == 16
    assert len(heuristic["pass_returns"]) == 1
    # random play never has both agents on their goals within 80 steps; the controller
    # brings them there in about 40 (each episode ends when both are)
    assert random["success"] == 0.0 and random["mean_length"] == 80
    assert heuristic["success"] >= 0.8 and heuristic["mean_length"] < 60
    assert heuristic["mean_return"] > random["mean_return"] + 1


@pytest.mark.slow  # a VMAS run, then its evaluation: seconds
def test_a_trained_run_is_evaluated_on_its_own_seed(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    overrides = ["experiment=vmas_navigation_sac", "seed=2", "env.num_envs=4", *SMALL]
    overrides += ["trainer.total_frames=64", "trainer.init_random_frames=32"]
    overrides += ["trainer.eval_interval=64", "agent.hidden=[16]", "logger=none"]
    train_run_dir(run, [*overrides, "trainer.progress=false"])
    capsys.readouterr()
    eval_vmas.main(["--runs", str(run), "--passes", "1"])
    (record,) = records(capsys)
    assert record["policy"] == "trained" and record["seed"] == 2
    assert record["continuous_actions"] is True and 0 < record["mean_length"] <= 80
