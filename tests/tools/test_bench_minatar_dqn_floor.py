"""tools/bench_minatar_dqn_floor.py times gpurl's MinAtar DQN group beside a bare loop."""

import json

from tools import bench_minatar_dqn_floor


def test_the_dqn_floor_record_times_both_sides(capsys):
    bench_minatar_dqn_floor.main(["--seeds", "2", "--iterations", "3", "--rounds", "1"])
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert record["seeds"] == 2 and record["gpurl_ms_per_iteration"] > 0
    assert record["bare_ms_per_iteration"] > 0
    ratio = record["gpurl_ms_per_iteration"] / record["bare_ms_per_iteration"]
    assert abs(record["gpurl_over_bare"] - ratio) < 1e-2
    assert record["hours_5m_frames"]["bare"] > 0
