"""docs/extending.md's checklists, followed once: a new env and a new agent, each one
module that declares its keys and registers itself (tests/extending/corridor.py and
reinforce.py), trained together by name through gpurl.train, with nothing else in gpurl
or its configs changed.

The env is a corridor: walk right to its end for a reward of 1. The agent is REINFORCE.
Greedy from scratch the policy goes left (ties pick action 0) and never arrives;
trained, it walks right.
"""

import importlib
import sys

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.schema import CONFIGS, check_config, group_options, help_text, reference
from gpurl.train import build, load_config

RUN = [
    "trainer.rollout_steps=12",
    "trainer.total_frames=3840",  # 20 rollouts of 12 x 16
    "trainer.eval_interval=3840",
    "logger=none",
    "trainer.progress=false",
]


def fresh_import(name: str):
    """Import a module anew, so that its registration runs inside this test's registry."""
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def test_a_new_env_and_agent_take_one_module_each(tmp_path, scoped_registry):
    corridor = fresh_import("tests.extending.corridor")
    reinforce = fresh_import("tests.extending.reinforce")
    # no config file, no registration line: the modules are all there is
    assert not (CONFIGS / "env" / "corridor.yaml").exists()
    assert not (CONFIGS / "agent" / "reinforce.yaml").exists()
    assert scoped_registry.find("env", "corridor").target is corridor.CorridorEnv
    assert scoped_registry.find("agent", "reinforce").config is reinforce.ReinforceConfig

    cfg = load_config(["env=corridor", "agent=reinforce", *RUN])
    assert cfg.env.length == 4 and cfg.env.num_envs == 16 and cfg.agent.hidden == [16]
    trainer = build(cfg, tmp_path / "run")
    assert isinstance(trainer.env, corridor.CorridorEnv)
    assert isinstance(trainer.agent, reinforce.ReinforceAgent)
    assert trainer.evaluate() == 0.0  # greedy from scratch: left, never arrives
    summary = trainer.train()
    assert summary["eval_return"] == 1.0  # greedy after training: right, to the end
    assert summary["frames"] == 3840

    # their keys are checked, listed by --help and in the reference like gpurl's own
    with pytest.raises(ConfigError, match="env.length must be >= 1, got 0") as err:
        check_config(load_config(["env=corridor", "agent=reinforce", "env.length=0"]))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="unknown config key 'agent.lenght'"):
        check_config(load_config(["env=corridor", "agent=reinforce", "+agent.lenght=3"]))
    text = help_text(load_config(["env=corridor", "agent=reinforce"]), {"env": "corridor"})
    assert "env.length=4" in text and "steps from the start to the end" in text
    assert "corridor" in group_options("env") and "reinforce" in group_options("agent")
    rows = {(r.option, r.path) for r in reference()}
    assert ("corridor", "env.length") in rows and ("reinforce", "agent.hidden") in rows


def test_the_same_env_and_agent_by_target_need_no_name(tmp_path, scoped_registry):
    """`_target_` names the classes directly: env=custom and agent=custom, their own keys
    passed on as they are."""
    cfg = load_config(
        [
            "env=custom",
            "env._target_=tests.extending.corridor.CorridorEnv",
            "+env.length=4",
            "env.num_envs=16",
            "env.eval_envs=2",
            "agent=custom",
            "agent._target_=tests.extending.reinforce.ReinforceAgent",
            *[
                f"+agent.{k}={v}"
                for k, v in dict(
                    hidden="[16]",
                    lr=0.1,
                    anneal_lr="false",
                    gamma=0.9,
                    epochs=1,
                    minibatches=1,
                    bootstrap_truncated="false",
                ).items()
            ],
            *RUN,
        ]
    )
    trainer = build(cfg, tmp_path / "run")
    assert type(trainer.env).__name__ == "CorridorEnv"
    assert type(trainer.agent).__name__ == "ReinforceAgent"
    assert trainer.train()["eval_return"] == 1.0


class TinyEncoder(torch.nn.Module):
    """An encoder of one's own: the observation through one linear layer."""

    def __init__(self, info, width: int = 8):
        super().__init__()
        (key,) = info.obs_keys
        self.key, self.out_features = key, width
        self.linear = torch.nn.Linear(info.obs_shapes[key][-1], width)

    def forward(self, td):
        return torch.relu(self.linear(td.get(self.key)))


def not_a_module(info):
    return "features"


def no_width(info):
    return torch.nn.Identity()


def test_an_encoder_by_target_is_handed_the_spec(tmp_path):
    overrides = ["env=cartpole", "env.eval_envs=1", "agent=dqn", "agent.hidden=[16]"]
    overrides += ["logger=none", "trainer.batch_size=8", "trainer.init_random_frames=16"]
    target = [f"+agent.encoder._target_={__name__}.TinyEncoder", "+agent.encoder.width=6"]
    trainer = build(load_config([*overrides, *target]), tmp_path / "ok")
    assert isinstance(trainer.agent.q.encoder, TinyEncoder)
    assert trainer.agent.q.encoder.out_features == 6  # its own keys reach it...
    for _ in range(4):  # ...and the agent's other encoder keys (embed...) do not
        trainer.iteration()
    assert trainer.progress.update_count > 0
    for name, message in (("not_a_module", "not an nn.Module"), ("no_width", "out_features")):
        cfg = load_config([*overrides, f"+agent.encoder._target_={__name__}.{name}"])
        with pytest.raises(ConfigError, match=message) as err:
            build(cfg, tmp_path / name)
        assert "\n" not in str(err.value)


def test_an_agent_target_must_be_an_agent_class(tmp_path):
    cfg = load_config(["agent=custom", f"agent._target_={__name__}.TinyEncoder", "logger=none"])
    with pytest.raises(ConfigError, match="not an OffPolicyAgent or OnPolicyAgent") as err:
        build(cfg, tmp_path)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="agent._target_="):
        build(load_config(["agent=custom", "logger=none"]), tmp_path / "missing")
