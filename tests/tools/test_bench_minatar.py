"""tools/bench_minatar.py: a record per installed side, the floors, the NumPy side's
resets and observations, the cap on the timed steps, the one-line skips."""

import json
import sys
import time

import pytest

from tools import bench_minatar

TINY = ["--num-envs", "2", "--steps", "5", "--warmup", "1", "--repeats", "1"]


def _records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.strip().splitlines()]


SIDES = [
    pytest.param(side, marks=pytest.mark.slow) if side == "gpurl-compiled" else side  # compiles
    for side in bench_minatar.DEFAULT_SIDES
]


@pytest.mark.parametrize("side", SIDES)
def test_an_installed_side_yields_a_record(side, tmp_path, capsys):
    if why := bench_minatar.missing(side):
        pytest.skip(why)
    out = tmp_path / "minatar.jsonl"
    argv = ["--games", "breakout", "--sides", side, *TINY, "--out", str(out)]
    assert bench_minatar.main(argv) == 0
    (record,) = _records(capsys.readouterr().out)
    assert json.loads(out.read_text()) == record
    assert (record["game"], record["side"], record["num_envs"]) == ("breakout", side, 2)
    assert record["steps_per_s"] > 0 and record["steps"] == 5 and not record["steps_cut"]
    assert record["settings"]["num_actions"] == 3  # Breakout's minimal action set
    assert record["settings"]["difficulty_ramping"] is None  # Breakout has no ramp
    sticky = 0.0 if side == "gymnax" else 0.1
    assert record["settings"]["sticky_action_prob"] == sticky
    assert all(record["versions"].values()) and record["torch_threads"] == 1
    assert "intra_op_parallelism_threads=1" in record["threads"]["xla_flags"]
    assert (record["compile_seconds"] is not None) == (side in ("gymnax", "gpurl-compiled"))


@pytest.mark.parametrize("side", ["memset", pytest.param("floor", marks=pytest.mark.slow)])
def test_the_floor_sides_write_the_games_observation(side, capsys):
    """The floors are not in the default sides; each records the game's channel count,
    the floor its compile time and sticky draw, memset neither."""
    assert side not in bench_minatar.DEFAULT_SIDES
    argv = ["--games", "seaquest", "--sides", side, *TINY]
    assert bench_minatar.main(argv) == 0
    (record,) = _records(capsys.readouterr().out)
    assert (record["side"], record["settings"]["channels"]) == (side, 10)
    assert record["steps_per_s"] > 0 and record["steps"] == 5
    assert (record["compile_seconds"] is not None) == (side == "floor")
    assert record["settings"]["sticky_action_prob"] == (0.1 if side == "floor" else None)


def test_numpy_side_resets_ended_envs_and_observes(monkeypatch):
    minatar = pytest.importorskip("minatar")
    env_class = minatar.Environment
    calls = {"act": 0, "state": 0, "reset": 0}
    act, state, reset = env_class.act, env_class.state, env_class.reset

    def ending(self, a):  # every step ends its episode, so every step resets
        calls["act"] += 1
        reward, _ = act(self, a)
        return reward, True

    def counted(name, method):
        def wrapper(self):
            calls[name] += 1
            return method(self)

        return wrapper

    monkeypatch.setattr(env_class, "act", ending)
    monkeypatch.setattr(env_class, "state", counted("state", state))
    monkeypatch.setattr(env_class, "reset", counted("reset", reset))
    case = bench_minatar.minatar_case("asterix", num_envs=3, seed=0)
    calls.update(act=0, state=0, reset=0)  # the build's first resets aside
    case.run(4)
    # per env and step: act, the state reached, then the reset and the new episode's state
    assert calls == {"act": 12, "state": 24, "reset": 12}
    assert case.settings["difficulty_ramping"] is True and case.settings["num_actions"] == 5


def test_cap_cuts_the_timed_steps(capsys):
    capped = bench_minatar.capped_steps
    assert capped(500, 0.01, 3, 3.0) == 100  # 3 repeats of 100 steps at 10 ms: 3 s
    assert capped(500, 1e-6, 3, 30.0) == 500  # they fit: not cut
    assert capped(500, 10.0, 3, 1.0) == 1  # at least one step
    assert capped(500, 10.0, 3, 0) == 500  # no cap
    argv = ["--games", "breakout", "--sides", "gpurl", *TINY, "--max-seconds-per-case", "1e-9"]
    assert bench_minatar.main(argv) == 0
    (record,) = _records(capsys.readouterr().out)
    assert record["steps"] == 1 and record["steps_requested"] == 5 and record["steps_cut"]
    assert record["steps_per_s"] > 0


def test_a_one_off_warmup_cost_does_not_cut_the_steps():
    calls = []

    def run(steps):  # the first call costs 0.2 s (a late compile), the others nothing
        if not calls:
            time.sleep(0.2)
        calls.append(steps)

    case = bench_minatar.Case(run, "cpu", settings={}, versions={})
    args = bench_minatar.parse_args(["--steps", "50", "--warmup", "3", "--repeats", "2"])
    args.max_seconds_per_case = 1.0  # the first step's pace would cut 50 to 7
    record = bench_minatar.measure(case, "gpurl", "breakout", 2, args)
    assert record["steps"] == 50 and not record["steps_cut"]
    assert calls == [1, 1, 1, 50, 50]


def test_missing_gymnax_is_skipped_with_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # import gymnax raises ImportError
    argv = ["--games", "breakout", "asterix", "--sides", "gymnax", *TINY, "--num-envs", "2", "4"]
    assert bench_minatar.main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("skipping gymnax: gymnax not importable")


def test_a_game_gymnax_lacks_is_skipped_with_one_line(monkeypatch, capsys):
    gymnax = pytest.importorskip("gymnax")
    games = [g for g in gymnax.registered_envs if g != "Seaquest-MinAtar"]
    monkeypatch.setattr(gymnax, "registered_envs", games)
    argv = ["--games", "seaquest", "--sides", "gymnax", *TINY, "--num-envs", "2", "4"]
    assert bench_minatar.main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("skipping gymnax seaquest: gymnax") and "Seaquest-MinAtar" in line
