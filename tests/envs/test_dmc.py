"""env=dmc (gpurl/envs/dmc.py): DeepMind Control tasks from their state. The specs and
EnvInfo, the action repeat and the time limit, seeding, and SAC training a few
iterations. Skipped where the dmc extra is missing, except the one-line error that
says how to install it."""

import sys

import pytest
import torch
from torchrl.data import Bounded
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError
from gpurl.train import build, load_config


@pytest.fixture
def dm_control():
    return pytest.importorskip("dm_control")


def dmc(*overrides, n=2, seed=0):
    cfg = load_config(["env=dmc", f"env.num_envs={n}", *overrides])
    return make_env(cfg.env, seed=seed)


def test_specs_and_env_info(dm_control):
    env = dmc("env.domain=walker", "env.task=stand", n=3)
    check_env_specs(env)
    obs = env.observation_spec["observation"]
    # walker's orientations (14), height (1) and velocity (9) in one float32 vector
    assert obs.shape == (3, 24) and obs.dtype == torch.float32
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == (3, 6)
    assert action.dtype == torch.float32
    info = env_info(env)
    assert info.obs_keys == ("observation",) and info.action_kind() == "continuous"
    low, high = info.action_bounds
    assert torch.equal(low, -torch.ones(6)) and torch.equal(high, torch.ones(6))


def test_action_repeat_and_the_time_limit(dm_control):
    env = dmc("env.frame_skip=8", n=2)
    assert env.max_episode_steps == 125  # 1000 control steps / 8
    td = env.rollout(130, break_when_any_done=False)
    done = td["next", "done"][..., 0]
    assert done[:, 124].all() and done.sum() == 2  # truncated at 125 actions, once each
    assert td["next", "truncated"][:, 124].all() and not td["next", "terminated"].any()
    # rewards are in 0..1 per control step, summed over the 8 repeats
    reward = td["next", "reward"]
    assert reward.min() >= 0 and reward.max() <= 8 and reward.max() > 1


def test_copies_are_seeded_apart_and_reproducibly(dm_control):
    first = dmc(n=2, seed=3).reset()["observation"]
    again = dmc(n=2, seed=3).reset()["observation"]
    assert torch.equal(first, again) and not torch.equal(first[0], first[1])


@pytest.mark.slow
def test_sac_trains_a_few_iterations(dm_control, tmp_path):
    cfg = load_config(
        [
            "env=dmc",
            "env.frame_skip=8",
            "env.eval_envs=1",
            "agent=sac",
            "agent.hidden=[32,32]",
            "trainer.total_frames=64",
            "trainer.init_random_frames=16",
            "trainer.batch_size=16",
            "trainer.eval_interval=64",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    summary = trainer.train()
    assert summary["frames"] == 64 and trainer.progress.update_count > 0
    assert 0 <= summary["eval_return"] <= 1000


def test_missing_dm_control_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "dm_control", None)  # the import raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[dmc\]'") as err:
        dmc()
    assert "\n" not in str(err.value)


def test_an_unknown_task_is_one_line(dm_control):
    with pytest.raises(ConfigError, match="not a DeepMind Control task"):
        dmc("env.task=fly")
