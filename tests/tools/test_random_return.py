"""tools/random_return.py: one record per seed, with the returns of random play."""

import json

from tools import random_return


def test_prints_a_record_of_random_play_returns(capsys):
    random_return.main(["pqn_cartpole", "--seeds", "3", "--passes", "2"])
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["seed"] == 3 and record["eval_envs"] == 10
    assert len(record["pass_returns"]) == 2
    # random play on CartPole lasts about 22 steps: far below the 500 a policy earns
    assert 8 < record["mean_return"] < 60
