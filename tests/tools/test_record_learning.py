"""tools/record_learning.py: every (preset, seed) runs once, at most --jobs at a time, and
each finished run's summary becomes a record in OUT; a failed run is reported, not
recorded; --group trains the seeds in one process, --resume continues runs in place. The
training processes are faked: this checks the scheduling and records."""

import json

import pytest

from tools import record_learning


class FakeRun:
    """A finished `python -m gpurl.train` that wrote summary.json (or failed for seed 1)."""

    live = 0
    most = 0

    commands: list = []

    def __init__(self, cmd, cwd=None, env=None):
        FakeRun.commands.append(cmd)
        args = dict(a.split("=", 1) for a in cmd[3:] if "=" in a)
        self.seed = int(args["seed"])
        self.polls = 0
        FakeRun.live += 1
        FakeRun.most = max(FakeRun.most, FakeRun.live)
        self.env = env
        if self.seed != 1:
            from pathlib import Path

            run_dir = Path(args["hydra.run.dir"])
            run_dir.mkdir(parents=True, exist_ok=True)
            n = int(args.get("trainer.num_seeds", 1))
            for seed in range(self.seed, self.seed + n):
                out = run_dir / "seeds" / f"seed_{seed}" if n > 1 else run_dir
                out.mkdir(parents=True, exist_ok=True)
                summary = {"eval_return": 10.0 + seed, "frames": 64, "wall_time_s": 1.0}
                (out / "summary.json").write_text(json.dumps(summary))

    def poll(self):
        self.polls += 1
        if self.polls == 2:  # still running at the first look, done at the second
            FakeRun.live -= 1
        return self.returncode

    @property
    def returncode(self):
        return None if self.polls < 2 else (1 if self.seed == 1 else 0)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    FakeRun.live = FakeRun.most = 0
    FakeRun.commands = []
    monkeypatch.setattr(record_learning.subprocess, "Popen", FakeRun)
    monkeypatch.setattr(record_learning.time, "sleep", lambda s: None)
    monkeypatch.setattr(record_learning, "ROOT", tmp_path)
    return tmp_path


def test_runs_every_seed_at_most_jobs_at_once(fake, capsys):
    rc = record_learning.main(["p", "--seeds", "0", "1", "2", "3", "--jobs", "2", "--out", "o"])
    assert rc == 1  # seed 1 failed
    assert FakeRun.most == 2
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(x["seed"] for x in lines) == [0, 1, 2, 3]
    assert [x for x in lines if x["seed"] == 1][0]["rc"] == 1
    records = sorted(p.name for p in (fake / "o").iterdir())
    assert records == ["p_s0_summary.json", "p_s2_summary.json", "p_s3_summary.json"]
    assert json.loads((fake / "o" / "p_s2_summary.json").read_text())["eval_return"] == 12.0


def test_bad_jobs_is_one_line(fake):
    with pytest.raises(SystemExit):
        record_learning.main(["p", "--jobs", "0"])


def test_group_trains_the_seeds_in_one_process_and_records_each(fake, capsys):
    rc = record_learning.main(["p", "--seeds", "2", "3", "4", "--group", "--out", "o"])
    assert rc == 0
    [cmd] = FakeRun.commands
    assert "seed=2" in cmd and "trainer.num_seeds=3" in cmd
    records = sorted(p.name for p in (fake / "o").iterdir())
    assert records == ["p_s2_summary.json", "p_s3_summary.json", "p_s4_summary.json"]
    assert json.loads((fake / "o" / "p_s4_summary.json").read_text())["eval_return"] == 14.0


def test_group_needs_consecutive_seeds(fake):
    with pytest.raises(SystemExit):
        record_learning.main(["p", "--seeds", "0", "2", "--group"])


def test_resume_keeps_the_run_directory_and_resumes_it(fake):
    run_dir = fake / "runs" / "record" / "p_s0"
    run_dir.mkdir(parents=True)
    (run_dir / "kept").write_text("a checkpoint")
    assert record_learning.main(["p", "--seeds", "0", "--resume", "--out", "o"]) == 0
    assert "trainer.resume=auto" in FakeRun.commands[0]
    assert (run_dir / "kept").exists()
    # without --resume the directory starts empty
    assert record_learning.main(["p", "--seeds", "0", "--out", "o"]) == 0
    assert "trainer.resume=auto" not in FakeRun.commands[1]
    assert not (run_dir / "kept").exists()
