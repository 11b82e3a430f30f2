"""tools/render_minatar.py: a row of frames per game, drawn by the env itself."""

import json

from tools import render_minatar


def test_each_game_gives_a_row_of_the_envs_own_frames(tmp_path, capsys):
    rows = render_minatar.game_frames("breakout", frames=3, every=2, seed=0)
    assert [label for _, label in rows][:2] == ["t=0", "t=2"]
    assert all(image.shape == (160, 160, 3) for image, _ in rows)
    out = tmp_path / "strip.png"
    argv = ["--out", str(out), "--games", "breakout", "freeway", "--frames", "2"]
    assert render_minatar.main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["games"] == ["breakout", "freeway"] and out.read_bytes()[:4] == b"\x89PNG"
