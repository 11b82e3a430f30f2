"""tools/plot_curves.py: a preset's evaluation curves over seeds, with the random floor."""

import json

from tools import plot_curves


def test_draws_every_seed_and_the_floor(tmp_path, capsys):
    records = []
    for seed in (0, 1):
        record = {
            "preset": "atari_breakout_ppo",
            "agent": "ppo",
            "env": "envpool",
            "seed": seed,
            "eval_history": [[1024, 1.0 + seed], [2048, 5.0 + seed]],
        }
        path = tmp_path / f"s{seed}.json"
        path.write_text(json.dumps(record))
        records.append(str(path))
    out = tmp_path / "curve.png"
    args = [*records, "--out", str(out), "--floor", "0.9", "--frame-factor", "4"]
    assert plot_curves.main(args) == 0
    assert out.stat().st_size > 10_000 and capsys.readouterr().out.strip() == str(out)
