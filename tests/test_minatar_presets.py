"""The MinAtar presets (experiment=minatar_<game>_{pqn,dqn,ppo}) compose with their
settings, build their networks on the game's 10 x 10 channels (MinAtar's one-layer CNN;
PPO: gymnax-blines' MLPs on the flattened grid), and train a few iterations at a tiny
budget; learning is left to the reproduction runs (docs/envs/minatar.md)."""

import pytest
import torch

from gpurl.envs.minatar import MinAtarEnv
from gpurl.envs.minatar.env import GAMES
from gpurl.train import build, load_config

PRESETS = [f"minatar_{game}_{agent}" for game in sorted(GAMES) for agent in ("pqn", "dqn")]
# gymnax-blines' PPO: the four games gymnax has (no seaquest)
PRESETS += [f"minatar_{game}_ppo" for game in sorted(GAMES) if game != "seaquest"]
# small budgets: PQN two rollouts of 8 x 16, DQN 64 frames after 32 random ones
SMALL = {
    "pqn": ["env.num_envs=16", "trainer.rollout_steps=8", "agent.minibatches=4",
            "trainer.total_frames=256", "trainer.eval_interval=128"],
    "dqn": ["trainer.total_frames=96", "trainer.init_random_frames=32",
            "trainer.buffer_size=1000", "trainer.eval_interval=96"],
    "ppo": ["env.num_envs=16", "trainer.rollout_steps=8", "agent.minibatches=4",
            "trainer.total_frames=256", "trainer.eval_interval=128"],
}  # fmt: skip


# Breakout's two in the fast suite, the others in the slow one (every preset is composed
# and checked against the schema in the fast suite by tests/test_bad_input.py)
TRAINED = [
    p if p.startswith("minatar_breakout") else pytest.param(p, marks=pytest.mark.slow)
    for p in PRESETS
]


def _small(preset: str, agent: str) -> list[str]:
    return [
        f"experiment={preset}",
        *SMALL[agent],
        "env.eval_envs=2",
        "env.max_episode_steps=50",
        "trainer.log_interval=64",
        f"trainer.checkpoint_interval={96 if agent == 'dqn' else 256}",
        "logger=none",
        "trainer.progress=false",
    ]


@pytest.mark.parametrize("preset", TRAINED)
def test_minatar_preset_composes_with_its_settings(tmp_path, preset):
    game, agent = preset.removeprefix("minatar_").rsplit("_", 1)
    full = load_config([f"experiment={preset}"])
    assert full.env.game == game
    assert full.agent.encoder.cnn == ("flat" if agent == "ppo" else "minatar")
    assert full.compile.env == (agent != "ppo")  # PQN and DQN compile the env's step
    if agent == "ppo":  # gymnax-blines' MinAtar PPO, on gymnax's env settings
        assert full.trainer.total_frames >= 10_000_000 and full.env.num_envs == 64
        assert full.agent.gamma == 0.999 and full.agent.lr == 5e-4
        assert full.env.sticky_prob == 0.0 and full.agent.encoder.cnn_features == 256
    elif agent == "pqn":  # purejaxql's MinAtar settings
        assert full.trainer.total_frames >= 10_000_000 and full.env.num_envs == 128
        assert full.agent.q_lambda == 0.65 and full.agent.lr == 5e-4
    else:  # the MinAtar paper's DQN
        assert full.trainer.total_frames == 5_000_000 and full.trainer.buffer_size == 100_000
        assert full.agent.target_update_interval == 1000 and full.trainer.batch_size == 32
        assert full.trainer.init_random_frames == 5000 and full.env.num_envs == 1


@pytest.mark.parametrize("preset", TRAINED)
def test_minatar_preset_trains_a_few_iterations(tmp_path, preset):
    game, agent = preset.removeprefix("minatar_").rsplit("_", 1)
    trainer = build(load_config(_small(preset, agent)), tmp_path)
    assert isinstance(trainer.env, MinAtarEnv) and trainer.env.rules.name == game
    nets = trainer.agent.modules().values()
    convs = [m for net in nets for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    if agent == "ppo":  # no convolution: each of actor and critic, 2 x 256 on the grid
        assert not convs
        firsts = [m for net in nets for m in net.modules() if isinstance(m, torch.nn.Linear)]
        assert sum(m.in_features == GAMES[game].channels * 100 for m in firsts) == 2
        trainer.train()
        return
    # MinAtar's one layer: 16 3 x 3 filters over the game's channels
    assert {(c.in_channels, c.out_channels, c.kernel_size) for c in convs} == {
        (GAMES[game].channels, 16, (3, 3))
    }
    trainer.train()


def test_a_minatar_preset_trains_seeds_in_one_process(tmp_path):
    """trainer.num_seeds: the CNN stacks (RunConv2d: a convolution for the runs), each
    run is evaluated, and run k's network is a plain one again when unstacked."""
    from gpurl.core.runs import RunConv2d, unstack_module

    cfg = load_config([*_small("minatar_breakout_pqn", "pqn"), "trainer.num_seeds=2"])
    trainer = build(cfg, tmp_path)
    q = trainer.agent.modules()["q"]
    (conv,) = [m for m in q.modules() if isinstance(m, RunConv2d)]
    assert conv.weight.shape == (2, 16, 4, 3, 3)
    summary = trainer.train()
    assert len(summary["eval_returns"]) == 2
    single = unstack_module(q, 1)
    assert not any(isinstance(m, RunConv2d) for m in single.modules())
