"""tools/random_return.py: one record per seed, with the returns of random play."""

import json

import pytest

from tools import random_return


def test_prints_a_record_of_random_play_returns(capsys):
    random_return.main(["pqn_cartpole", "--seeds", "3", "--passes", "2"])
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["seed"] == 3 and record["eval_envs"] == 10
    assert len(record["pass_returns"]) == 2
    # random play on CartPole lasts about 22 steps: far below the 500 a policy earns
    assert 8 < record["mean_return"] < 60


@pytest.mark.slow  # Pendulum episodes of a random policy: seconds
def test_continuous_actions_are_drawn_within_the_bounds(capsys):
    pytest.importorskip("dm_control")
    random_return.main(["dmc_cartpole_swingup_sac", "--seeds", "0", "--passes", "1"])
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["eval_envs"] == 5
    # random swinging earns a little (the pole passes the top now and then), far below
    # the ~850 of a swung-up, balanced pole
    assert 0 < record["mean_return"] < 300
