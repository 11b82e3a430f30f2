"""tools/plot_curves.py: presets' evaluation curves over seeds, with their floors."""

import json

from tools import plot_curves


def write_records(tmp_path, preset, agent, env):
    paths = []
    for seed in (0, 1):
        record = {
            "preset": preset,
            "agent": agent,
            "env": env,
            "seed": seed,
            "eval_history": [[1024, 1.0 + seed], [2048, 5.0 + seed]],
        }
        path = tmp_path / f"{preset}_s{seed}.json"
        path.write_text(json.dumps(record))
        paths.append(str(path))
    return paths


def test_draws_every_seed_and_the_floor(tmp_path, capsys):
    records = write_records(tmp_path, "atari_breakout_ppo", "ppo", "envpool")
    out = tmp_path / "curve.png"
    args = [*records, "--out", str(out), "--floor", "0.9", "--frame-factor", "4"]
    assert plot_curves.main(args) == 0
    assert out.stat().st_size > 10_000 and capsys.readouterr().out.strip() == str(out)


def test_floor_records_are_averaged_per_preset_and_policy(tmp_path):
    lines = [
        {"tool": "eval_vmas", "policy": "random", "preset": "a", "seed": 0, "mean_return": -1.0},
        {"tool": "eval_vmas", "policy": "random", "preset": "a", "seed": 1, "mean_return": -2.0},
        {"tool": "eval_vmas", "policy": "heuristic", "preset": "a", "seed": 0, "mean_return": 2.0},
        {"tool": "random_return", "preset": "b", "seed": 0, "mean_return": 0.5},
        {"tool": "eval_vmas", "policy": "trained", "run": "runs/x", "mean_return": 9.0},
    ]
    path = tmp_path / "floors.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    floors = plot_curves.read_floors([str(path)])
    # a record without a policy is random play's; a trained run's record names no preset
    assert floors == {"a": {"random": -1.5, "heuristic": 2.0}, "b": {"random": 0.5}}


def test_one_panel_per_preset(tmp_path, monkeypatch):
    records = write_records(tmp_path, "b", "sac", "vmas")
    records += write_records(tmp_path, "a", "dqn", "vmas")
    panels = []

    def draw(ax, preset, records, floors, args):
        panels.append((preset, [r["seed"] for r in records]))

    monkeypatch.setattr(plot_curves, "draw_preset", draw)
    assert plot_curves.main([*records, "--out", str(tmp_path / "c.png")]) == 0
    assert panels == [("a", [0, 1]), ("b", [0, 1])]  # sorted by preset, then seed
