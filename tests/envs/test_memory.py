"""env=memory: the cue shows at the start only, the question after `delay` blank steps,
and only the answer to it is rewarded: remembering the cue scores 1, a policy that sees
one observation at a time scores chance."""

import pytest
import torch

from gpurl.envs.memory import MemoryEnv
from gpurl.errors import ConfigError
from gpurl.train import build, load_config


def test_the_cue_shows_once_and_the_question_after_the_delay():
    env = MemoryEnv(4, seed=0, delay=3, cues=3)
    obs = env.lean_reset()["observation"]
    cue = env.env_state.cue.clone()
    assert torch.equal(obs[:, :3], torch.nn.functional.one_hot(cue, 3).float())
    assert torch.equal(obs[:, 3], torch.zeros(4))
    wrong = (cue + 1) % 3
    for t in range(1, 4):  # the delay: blank, and no reward whatever the action
        nxt, obs = env.lean_step(cue if t % 2 else wrong)
        assert torch.equal(nxt["reward"], torch.zeros(4, 1)) and not nxt["done"].any()
        expected = torch.zeros(4, 4)
        expected[:, 3] = float(t == 3)  # the question at t = delay
        assert torch.equal(obs["observation"], expected)
    answer = torch.where(torch.arange(4) < 2, cue, wrong)  # two right, two wrong
    nxt, obs = env.lean_step(answer)
    assert torch.equal(nxt["reward"][:, 0], torch.tensor([1.0, 1.0, 0.0, 0.0]))
    assert nxt["terminated"].all() and not nxt["truncated"].any()
    assert torch.equal(obs["observation"][:, :3].sum(-1), torch.ones(4))  # new cues shown


def test_memory_scores_one_and_one_observation_at_a_time_scores_chance():
    env = MemoryEnv(2000, seed=1, delay=5, cues=2)
    obs = env.lean_reset()["observation"]
    remembered = obs[:, :2].argmax(-1)  # a policy with memory: the cue it saw
    for _ in range(5):
        nxt, obs = env.lean_step(torch.zeros(2000, dtype=torch.int64))
    nxt, _ = env.lean_step(remembered)
    assert nxt["reward"].mean() == 1.0
    # without memory the question looks the same whatever the cue: any answer is chance
    for _ in range(5):
        env.lean_step(torch.zeros(2000, dtype=torch.int64))
    nxt, _ = env.lean_step(torch.zeros(2000, dtype=torch.int64))
    assert abs(nxt["reward"].mean().item() - 0.5) < 0.04  # 2,000 draws: sd 0.011


def test_frames_show_the_cue_then_the_question():
    env = MemoryEnv(2, seed=0, delay=2)
    env.lean_reset()
    height, width = MemoryEnv.FRAME
    centre = (height // 2 - 6, width // 2)
    first = env.render_frames()
    assert first.shape == (2, height, width, 3)
    colours = torch.tensor(MemoryEnv.CUE_COLOURS, dtype=torch.uint8)
    assert torch.equal(first[:, centre[0], centre[1]], colours[env.env_state.cue])
    env.lean_step(torch.zeros(2, dtype=torch.int64))
    assert (env.render_frames()[:, centre[0], centre[1]] == 60).all()  # blank
    env.lean_step(torch.zeros(2, dtype=torch.int64))
    assert (env.render_frames()[:, centre[0], centre[1]] == 255).all()  # the question


@pytest.mark.slow  # a short run: seconds
def test_it_trains_by_name_and_bad_keys_are_one_line(tmp_path):
    tiny = ["agent=ppo", "env.num_envs=4", "trainer.rollout_steps=8", "agent.minibatches=2"]
    tiny += ["trainer.total_frames=64", "trainer.eval_interval=64", "env.eval_envs=8"]
    tiny += ["logger=none", "trainer.progress=false"]
    summary = build(load_config(["env=memory", "env.delay=4", *tiny]), tmp_path).train()
    assert 0.0 <= summary["eval_return"] <= 1.0
    for bad in ("env.delay=-1", "env.cues=1"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]) as err:
            build(load_config(["env=memory", bad]), tmp_path / "bad")
        assert "\n" not in str(err.value)
