"""gpurl.status: progress.json as a run writes it, and the state, pace and time left
read from it."""

import json
import os
import socket
import time

from gpurl import status
from gpurl.train import load_config, run

SMALL = [
    "experiment=dqn_cartpole",
    "trainer.progress=false",
    "logger=none",
    "env.eval_envs=2",
    "agent.hidden=[16,16]",
    "trainer.total_frames=1200",
    "trainer.log_interval=400",
    "trainer.eval_interval=600",
    "trainer.init_random_frames=200",
]


def test_a_run_writes_its_progress_and_reads_as_ended(tmp_path, capsys):
    # acting at random all along: over 100 episodes (about 22 frames each) by the last log
    run(load_config([*SMALL, "trainer.total_frames=3200", "agent.epsilon_end=1.0"]), tmp_path / "a")
    progress = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert progress["frames"] == progress["total_frames"] == 3200
    assert progress["eval_frames"] == 3200 and progress["frames_per_s"] > 0
    assert progress["pid"] == os.getpid() and progress["host"] == socket.gethostname()
    # the last 100 or more training episodes at the last log: the summary's figure
    final = json.loads((tmp_path / "a" / "summary.json").read_text())["final_train_return"]
    assert final["episodes"] >= 100
    assert progress["train_return"] == final["return"]
    assert progress["train_return_episodes"] == final["episodes"]
    (record,) = [status.run_status(d) for d in status.find_runs([tmp_path])]
    assert record["train_return"] == final["return"]
    assert record["state"] == "ended" and record["seconds_left"] is None
    assert status.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| ended |" in out and "3,200 / 3,200 (100%)" in out
    assert "last 100 training episodes" in out and f"| {final['return']:.1f} " in out


def write(run_dir, progress, summary=None, age=0.0):
    run_dir.mkdir(parents=True)
    (run_dir / "progress.json").write_text(json.dumps(progress))
    if summary is not None:  # written `age` seconds before the progress file
        path = run_dir / "summary.json"
        path.write_text(json.dumps(summary))
        then = time.time() - age
        os.utime(path, (then, then))


def test_states_and_time_left(tmp_path):
    now = time.time()
    base = {"total_frames": 10_000, "frames": 4_000, "frames_per_s": 100.0, "updated_unix": now}
    write(tmp_path / "live", {**base, "pid": os.getpid()})
    write(tmp_path / "gone", {**base, "pid": 2**22 + 12345})  # above pid_max's default
    stopped = {"stopped": "signal", "signal": "SIGTERM"}
    write(tmp_path / "stopped", {**base, "pid": 1}, stopped)
    # resumed after that stop: the progress file is newer than the old summary
    write(tmp_path / "resumed", {**base, "pid": os.getpid()}, stopped, age=60)
    write(tmp_path / "done", {**base, "frames": 10_000}, {"stopped": "total_frames"})
    write(tmp_path / "node", {**base, "pid": os.getpid(), "host": "node-17"})
    # a summary caught half written counts as none yet; a broken progress file is said
    write(tmp_path / "writing", {**base, "pid": os.getpid()})
    (tmp_path / "writing" / "summary.json").write_text('{"stopped": "tot')
    write(tmp_path / "broken", {})
    (tmp_path / "broken" / "progress.json").write_text("{")
    records = {r.name: status.run_status(r, now) for r in status.find_runs([tmp_path])}
    assert records["live"]["state"] == "running" and records["live"]["seconds_left"] == 60
    assert records["gone"]["state"] == "not running"
    assert records["stopped"]["state"] == "stopped (SIGTERM)"
    assert records["resumed"]["state"] == "running"
    assert records["done"]["state"] == "ended"
    assert records["node"]["state"] == "on node-17" and records["node"]["seconds_left"] is None
    assert records["writing"]["state"] == "running"
    assert records["broken"]["state"] == "unreadable progress.json"


def test_json_lines_and_a_missing_path(tmp_path, capsys):
    write(tmp_path / "r", {"total_frames": 100, "frames": 50, "pid": 0, "eval_frames": 40,
                           "eval_return": 1.5, "run_eval_returns": [1.0, 2.0]})  # fmt: skip
    assert status.main([str(tmp_path), "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["run_eval_returns"] == [1.0, 2.0] and record["state"] == "not running"
    assert status.main([str(tmp_path / "nope")]) == 2
    assert "no such path" in capsys.readouterr().err
