"""The six MarineNav presets (experiment=marinenav_{iqn,acqin,rainbow,dqn,ddpg,sac})
compose with the project's config loader and build their agent on the MarineNav env of
their action kind, with the settings docs/results.md#marinenav reports them by: the shared
curriculum and budget, and IQN's and AC-IQN's risk-averse greedy acting. A tiny env
and replay keep the six builds to a few seconds; training is left to the other tests."""

import pytest
import torch

from gpurl.core import registry
from gpurl.envs.marinenav import MarineNavContinuousEnv
from gpurl.train import build, load_config
from gpurl.trainers.evaluation import greedy

# preset -> (agent name, continuous actions)
PRESETS = {
    "marinenav_iqn": ("iqn", False),
    "marinenav_acqin": ("acqin", True),
    "marinenav_rainbow": ("rainbow", False),
    "marinenav_dqn": ("dqn", False),
    "marinenav_ddpg": ("ddpg", True),
    "marinenav_sac": ("sac", True),
}


@pytest.mark.parametrize("preset", PRESETS)
def test_marinenav_preset_builds_its_agent(tmp_path, preset):
    name, continuous = PRESETS[preset]
    cfg = load_config(
        [
            f"experiment={preset}",
            "env.num_envs=2",
            "trainer.buffer_size=1000",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    # what every preset shares (_marinenav_budget.yaml)
    assert cfg.trainer.total_frames == 750_000 and cfg.trainer.eval_interval == 50_000
    assert [(s.robots, s.obstacles) for s in cfg.env.curriculum] == [
        (3, 0),
        (4, 0),
        (5, 0),
        (5, 2),
        (5, 3),
        (5, 4),
    ]
    assert cfg.agent.n_step == 3 and cfg.trainer.batch_size == 256

    trainer = build(cfg, tmp_path)
    agent = trainer.agent
    assert type(agent) is registry.find("agent", name).target and cfg.agent.name == name
    assert isinstance(trainer.env, MarineNavContinuousEnv) == continuous
    assert trainer.env.num_envs == 2 and trainer.eval_env.num_envs == 60  # the fixed set

    if name == "iqn":  # greedy acting on CVaR_0.25 of the return
        assert agent.z.eval_cvar == 0.25
    if name == "acqin":  # the actor climbs CVaR_0.25; greedy: 5 x 5 grid by CVaR_0.1
        assert cfg.agent.actor_cvar == 0.25
        assert agent.search.grid.shape == (25, 2)
        assert agent.search.taus.max() < 0.1

    # the greedy policy acts for every robot slot of the env
    td = greedy(agent.policy)(trainer.env.reset())
    action = td.get(("agents", "action"))
    robots = trainer.env.max_robots
    if continuous:
        assert action.shape == (2, robots, 2) and bool((action.abs() <= 1).all())
    else:
        assert action.shape == (2, robots) and bool(((action >= 0) & (action < 25)).all())
    assert torch.is_floating_point(action) == continuous
