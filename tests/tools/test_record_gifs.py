"""tools/record_gifs.py on a tiny trained CartPole run: the GIF holds the greedy episode
(thinned to --max-frames), the record says what it shows, and the page's gallery is
rewritten from the records, the newest record of each GIF once."""

import json

import pytest

from gpurl import eval as gpurl_eval
from tests.conftest import train_run_dir
from tests.test_trained import TINY  # a DQN run on CartPole of a few seconds
from tools import record_gifs


@pytest.mark.slow  # a tiny run, evaluated and drawn: seconds
def test_a_gif_per_run_and_the_gallery_from_the_records(tmp_path, capsys):
    iio = pytest.importorskip("imageio.v3")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train_run_dir(run_dir, TINY)
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n<!-- gallery:start -->\nold\n<!-- gallery:end -->\nafter\n")
    records = tmp_path / "gifs.jsonl"
    args = [str(run_dir), "--out", str(tmp_path / "img"), "--records", str(records)]
    for _ in range(2):  # twice: the gallery keeps the newest record of the GIF
        assert record_gifs.main([*args, "--max-frames", "4", "--page", str(page)]) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(records.read_text().splitlines()) == 2
    frames = sum(steps + 1 for steps in record["episode_steps"])
    assert frames >= 60 or len(record["episode_steps"]) == record_gifs.MAX_EPISODES
    assert record["stride"] == -(-frames // 4)
    assert record["gif_frames"] == len(range(0, frames, record["stride"])) <= 4
    gif = iio.imread(tmp_path / "img" / "cartpole_dqn.gif")
    assert gif.shape[1:3] == (208, 320) and len(gif) <= record["gif_frames"]
    assert record["env"] == "cartpole" and record["agent"] == "dqn"
    assert record["metrics"] == gpurl_eval.evaluate(run_dir)["metrics"]  # gpurl.eval's
    text = page.read_text()
    assert "old" not in text and text.endswith("<!-- gallery:end -->\nafter\n")
    rows = [line for line in text.splitlines() if line.startswith("| cartpole")]
    assert len(rows) == 1 and "![cartpole](img/cartpole_dqn.gif)" in rows[0]
