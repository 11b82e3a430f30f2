"""gpurl.api: the command line's config from keyword arguments, a run from Python."""

import pytest
from omegaconf import OmegaConf

from gpurl import api
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.errors import ConfigError
from gpurl.schema import check_config
from gpurl.train import load_config, load_trained


def test_keyword_arguments_compose_what_the_command_line_does():
    by_kwargs = api.config(
        env="pendulum",
        agent={"config": "sac", "hidden": [32, 32]},
        trainer={"total_frames": 2000},
        seed=3,
    )
    by_cli = load_config(
        ["env=pendulum", "agent=sac", "agent.hidden=[32,32]", "trainer.total_frames=2000", "seed=3"]
    )
    assert OmegaConf.to_container(by_kwargs) == OmegaConf.to_container(by_cli)
    assert api.config("experiment=ppo_cartpole").agent.name == "ppo"
    assert api.config(experiment="ppo_cartpole").agent.epochs == 10


def test_a_target_may_be_the_callable_itself():
    cfg = api.config(env={"_target_": CartPoleEnv, "num_envs": 3})
    assert cfg.env._target_ == "gpurl.envs.cartpole.CartPoleEnv" and cfg.env.num_envs == 3

    def local_factory():
        return None

    with pytest.raises(ConfigError, match="module's top level") as err:
        api.config(env={"_target_": local_factory})
    assert "\n" not in str(err.value)


def test_a_mistake_that_does_not_compose_is_one_line():
    with pytest.raises(ConfigError) as err:
        api.config(agent="no_such_agent")
    assert "\n" not in str(err.value)


def test_a_bad_value_from_python_is_the_command_lines_one_line_error(tmp_path):
    """config(), build() and train() check the config as the command line's build does
    (gpurl/schema.py): the same one-line ConfigError, and no run directory."""
    with pytest.raises(ConfigError) as by_cli:
        check_config(load_config(["agent.tau=2"]))
    with pytest.raises(ConfigError) as by_kwargs:
        api.config(agent={"tau": 2})
    assert str(by_kwargs.value) == str(by_cli.value)
    assert str(by_cli.value).startswith("agent.tau must be in (0, 1], got 2")
    with pytest.raises(ConfigError, match="trainer.total_frames must be an int"):
        api.build(trainer={"total_frames": 1.5}, run_dir=tmp_path / "kwargs")
    # a config changed after config() is checked again, before its run dir is made
    cfg = api.config(logger="none")
    cfg.trainer.batch_size = 1_000_000
    for start in (api.build, api.train):
        with pytest.raises(ConfigError, match="larger than the replay") as err:
            start(cfg, run_dir=tmp_path / start.__name__)
        assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_run_directory_that_cannot_be_written_is_one_line():
    with pytest.raises(ConfigError, match="run_dir=/proc/gpurl_run cannot be written") as err:
        api.build(logger="none", run_dir="/proc/gpurl_run")
    assert "\n" not in str(err.value)


def test_train_returns_the_summary_and_leaves_a_run_directory(tmp_path):
    summary = api.train(
        env="cartpole",
        agent={"config": "dqn", "hidden": [16]},
        trainer={"total_frames": 256, "init_random_frames": 64, "eval_interval": 256},
        logger="none",
        run_dir=tmp_path / "run",
    )
    assert summary["frames"] >= 256 and summary["agent"] == "dqn"
    assert len(summary["eval_history"]) == 1
    cfg, agent = load_trained(tmp_path / "run")  # the layout tools read
    assert cfg.agent.hidden == [16] and agent.progress.frame_count == summary["frames"]


def test_build_hands_back_the_trainer(tmp_path):
    trainer = api.build(env="cartpole", agent="ppo", logger="none", run_dir=tmp_path / "b")
    trainer.iteration()
    assert trainer.frames == 8 * 128  # one rollout of the default config
