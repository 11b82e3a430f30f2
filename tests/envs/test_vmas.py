"""env=vmas (envs/vmas.py): VMAS navigation as a gpurl multi-robot env. Its specs and
EnvInfo, the root reward and the per-agent flags by hand, gpurl's step limit as
truncation, one-line mistakes, DQN and SAC training through build(), and where the
host reads of a training iteration come from. Skipped without the vmas extra, but for
the missing-extra message itself."""

import importlib.util
import sys

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Bounded, Categorical
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.foreign import ForeignEnv
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError
from gpurl.train import build, load_config
from gpurl.utils.host_reads import count_host_reads

requires_vmas = pytest.mark.skipif(
    importlib.util.find_spec("vmas") is None, reason="needs the vmas extra"
)


def vmas_env(n_envs=4, steps=100, continuous=True, **options):
    cfg = {
        "name": "vmas",
        "_target_": "gpurl.envs.vmas.make_vmas_env",
        "num_envs": n_envs,
        "scenario": "navigation",
        "max_episode_steps": steps,
        "continuous_actions": continuous,
        "n_agents": 2,
        **options,
    }
    return make_env(cfg, seed=0)


def test_without_vmas_the_error_names_the_extra(monkeypatch):
    from gpurl.envs.vmas import make_vmas_env

    monkeypatch.setitem(sys.modules, "vmas", None)  # `import vmas` raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[vmas\]'") as err:
        make_vmas_env(num_envs=2)
    assert "\n" not in str(err.value)


@requires_vmas
@pytest.mark.parametrize("continuous", [False, True])
def test_specs_and_env_info_name_the_group(continuous):
    env = vmas_env(continuous=continuous)
    assert isinstance(env, ForeignEnv) and env.batch_size == (4,)
    check_env_specs(env)
    info = env_info(env)
    agents = ("agents", "observation")
    assert info.obs_keys == (agents,) and info.obs_shapes[agents] == (18,)  # 6 + 12 lidar
    assert info.action_key == ("agents", "action") and info.group_shape == (2,)
    assert info.reward_key == ("agents", "reward")
    assert info.terminated_key == ("agents", "terminated")
    assert info.truncated_key == ("agents", "truncated")
    assert info.done_key == ("agents", "done")
    assert info.valid_key is None  # every agent acts every step
    if continuous:
        assert isinstance(info.action_spec, Bounded) and info.action_dim == 2
        low, high = info.action_bounds
        assert low.tolist() == [-1.0, -1.0] and high.tolist() == [1.0, 1.0]
    else:
        assert isinstance(info.action_spec, Categorical) and info.n_actions == 9


@requires_vmas
def test_root_reward_is_the_sum_and_flags_are_broadcast_per_agent():
    env = vmas_env(n_envs=3, steps=3, shared_rew=False)
    td = env.rollout(7, break_when_any_done=False)  # [3 envs, 7 steps]
    nxt = td["next"]
    torch.testing.assert_close(nxt["reward"], nxt["agents", "reward"].sum(-2))
    # the agents' own rewards differ (shared_rew=false): the root is not one of them
    assert not torch.equal(nxt["agents", "reward"][..., 0, :], nxt["agents", "reward"][..., 1, :])
    # three steps per episode: truncated at steps 3 and 6, not terminated by the limit
    expected = torch.tensor([False, False, True, False, False, True, False])
    assert torch.equal(nxt["truncated"].squeeze(-1), expected.expand(3, 7))
    assert not nxt["terminated"].any()
    assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])
    for flag in ("terminated", "truncated", "done"):
        assert nxt["agents", flag].shape == (3, 7, 2, 1)
        assert torch.equal(nxt["agents", flag], nxt[flag].unsqueeze(-2).expand(3, 7, 2, 1))


@requires_vmas
def test_group_flags_by_hand():
    """GroupFlags on made-up steps: env 0 terminates, env 1 reaches the limit of 2 steps
    (truncated, not terminated), and a partial reset restarts env 1's count alone."""
    from gpurl.envs.vmas import GroupFlags

    flags = GroupFlags(max_steps=2)

    def step(terminated, rewards):
        td = TensorDict(
            {
                "terminated": torch.tensor(terminated).reshape(2, 1),
                "agents": TensorDict(
                    {"reward": torch.tensor(rewards).reshape(2, 2, 1)}, batch_size=(2, 2)
                ),
            },
            batch_size=(2,),
        )
        return flags._step(TensorDict({}, batch_size=(2,)), td)

    reset = TensorDict(
        {"terminated": torch.zeros(2, 1, dtype=torch.bool), "agents": TensorDict({}, (2, 2))},
        batch_size=(2,),
    )
    out = flags._reset(None, reset.clone())
    assert not out["done"].any() and out["agents", "done"].shape == (2, 2, 1)
    first = step([False, False], [[1.0, 2.0], [3.0, 4.0]])
    assert first["reward"].squeeze(-1).tolist() == [3.0, 7.0]
    assert not first["done"].any()
    second = step([True, False], [[0.5, 0.5], [-1.0, 0.0]])
    assert second["reward"].squeeze(-1).tolist() == [1.0, -1.0]
    assert second["terminated"].squeeze(-1).tolist() == [True, False]
    assert second["truncated"].squeeze(-1).tolist() == [False, True]  # env 0 terminated first
    assert second["done"].squeeze(-1).tolist() == [True, True]
    assert second["agents", "terminated"].squeeze(-1).tolist() == [[True, True], [False, False]]
    assert second["agents", "truncated"].squeeze(-1).tolist() == [[False, False], [True, True]]
    assert second["agents", "done"].all()
    # reset env 1 only: its count restarts, env 0's goes on (3 >= 2: truncated)
    flags._reset(TensorDict({"_reset": torch.tensor([[False], [True]])}, (2,)), reset.clone())
    third = step([False, False], [[0.0, 0.0], [0.0, 0.0]])
    assert third["truncated"].squeeze(-1).tolist() == [True, False]


@requires_vmas
@pytest.mark.parametrize(
    "options, message",
    [
        ({"scenario": "no_such_scenario"}, "not found"),
        ({"n_agentz": 3}, "not used by the scenario"),
        ({"max_episode_steps": 0}, "max_episode_steps"),
    ],
)
def test_mistakes_are_one_line(options, message):
    with pytest.raises(ConfigError, match=message) as err:
        vmas_env(**options)
    assert "\n" not in str(err.value)


def tiny_run(tmp_path, agent, continuous, extra=()):
    cfg = load_config(
        [
            "env=vmas",
            "+env.n_agents=2",
            f"env.continuous_actions={str(continuous).lower()}",
            "env.num_envs=4",
            "env.eval_envs=4",
            "env.max_episode_steps=10",
            f"agent={agent}",
            "agent.hidden=[32]",
            "trainer.total_frames=160",
            "trainer.init_random_frames=40",
            "trainer.batch_size=16",
            "trainer.eval_interval=80",
            "logger=none",
            "trainer.progress=false",
            *extra,
        ]
    )
    return build(cfg, tmp_path)


@pytest.mark.slow
@requires_vmas
@pytest.mark.parametrize("agent, continuous", [("dqn", False), ("sac", True)])
def test_dqn_and_sac_train_a_few_iterations(tmp_path, agent, continuous):
    from gpurl.trainers.collector import LeanCollector

    trainer = tiny_run(tmp_path, agent, continuous)
    # on the CPU, gpurl's collector through ForeignEnv's adapter (env.collector=auto)
    assert isinstance(trainer.collector, LeanCollector)
    summary = trainer.train()
    # 40 steps of 4 envs; utd 1 from the iteration that reaches frame 40: 31 iterations
    # of 4 frames
    assert summary["frames"] == 160 and trainer.progress.update_count == 31 * 4
    assert len(summary["eval_history"]) == 2
    # the replay holds one stream per (env, agent): 2 agents x 4 envs
    assert trainer.buffer.streams == 8 and len(trainer.buffer) == 160 * 2


@requires_vmas
def test_host_reads_of_an_iteration_are_vmas_and_torchrl_alone(tmp_path):
    """VMAS through TorchRL is not free of host reads: VMAS's step branches on tensors
    (its action checks, gravity and collision tests) and TorchRL's collector asks
    whether any env is done. gpurl's own part of the iteration (policy, tracker,
    replay, update) adds none."""
    trainer = tiny_run(tmp_path, "dqn", False, ["trainer.frames_per_batch=8"])
    for _ in range(12):  # past the warm-up: updates run
        trainer.iteration()
    with count_host_reads() as reads:
        for _ in range(5):
            trainer.iteration()
    assert reads.count > 0
    sites = [site.split(" at ")[1] for site in reads.sites]
    foreign = [s for s in sites if "/vmas/" in s or "/torchrl/" in s]
    assert foreign == sites, reads.report()
