"""env=envpool (gpurl/envs/envpool.py): Atari through envpool. The specs and EnvInfo, the
preprocessing as gpurl defines it (a lost life ends an episode and the game goes on,
clipped rewards for training beside the unclipped score), the full-game evaluation,
and PPO and PQN training a few iterations. Skipped where the envpool extra is missing,
except the one-line error that says how to install it."""

import sys

import pytest
import torch
from torchrl.data import Bounded, Categorical
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env, make_eval_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError
from gpurl.policies.networks import make_encoder, pixel_range
from gpurl.train import build, load_config


@pytest.fixture
def envpool():
    return pytest.importorskip("envpool")


def atari(*overrides, n=2):
    cfg = load_config(["env=envpool", f"env.num_envs={n}", *overrides])
    return make_env(cfg.env, seed=0)


def cycling(n_actions):
    """A deterministic policy: action t % n_actions at step t, every env."""
    state = {"t": 0}

    def act(td):
        td.set("action", torch.full(td.batch_size, state["t"] % n_actions))
        state["t"] += 1
        return td

    return act


def test_specs_and_env_info(envpool):
    env = atari(n=3)
    check_env_specs(env)
    pixels = env.observation_spec["pixels"]
    assert isinstance(pixels, Bounded) and pixels.dtype == torch.uint8
    assert pixels.shape == (3, 4, 84, 84)
    assert pixel_range(pixels) == (0.0, 255.0)  # the CNN divides by 255
    action = env.action_spec
    assert isinstance(action, Categorical) and action.space.n == 4  # Breakout's minimal set
    info = env_info(env)
    assert info.obs_keys == ("pixels",)  # info/score, lives, game_over are not inputs
    assert info.obs_shapes["pixels"] == (4, 84, 84) and info.n_actions == 4
    assert make_encoder(info).out_features == 512  # the Nature-DQN CNN
    assert env.max_episode_steps == 27000


def test_frames_stack_the_last_four(envpool):
    env = atari(n=1)
    td = env.rollout(6, cycling(4), break_when_any_done=False)
    frames = td["next", "pixels"][0]
    # each observation's first three frames are the previous observation's last three
    assert torch.equal(frames[1:, :3], frames[:-1, 1:])
    assert frames.float().std() > 0


@pytest.mark.slow
def test_a_lost_life_ends_an_episode_and_the_game_goes_on(envpool):
    env = atari(n=2)
    td = env.rollout(400, break_when_any_done=False)
    done = td["next", "done"][..., 0]
    over = td["next", "info", "game_over"][..., 0]
    lives = td["next", "info", "lives"][..., 0]
    after = td["info", "lives"][..., 0]  # the lives of the observation acted on next
    life_ends = (done & ~over).nonzero().tolist()
    game_ends = over.nonzero().tolist()
    assert life_ends and game_ends  # random Breakout loses all five lives in ~120 steps
    for e, t in life_ends:
        assert td["next", "terminated"][e, t, 0]
        if t + 1 < done.shape[1]:
            assert after[e, t + 1] == lives[e, t] > 0  # the next life of the same game
    for e, t in game_ends:
        assert lives[e, t] == 0 and done[e, t]
        if t + 1 < done.shape[1]:
            assert after[e, t + 1] == 5  # a new game


@pytest.mark.slow
def test_training_reward_is_clipped_and_the_score_is_not(envpool):
    # Space Invaders pays 5 to 30 points an invader
    env = atari("env.game=SpaceInvaders-v5", n=2)
    td = env.rollout(200, break_when_any_done=False)
    reward, score = td["next", "reward"], td["next", "info", "score"]
    assert score.max() > 1 and set(reward.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert torch.equal(reward, torch.sign(score))
    raw = atari("env.game=SpaceInvaders-v5", "env.reward_clip=false", n=2)
    td = raw.rollout(200, break_when_any_done=False)
    assert torch.equal(td["next", "reward"], td["next", "info", "score"])


@pytest.mark.slow
def test_evaluation_scores_each_envs_first_full_game(envpool):
    cfg = load_config(["env=envpool", "env.eval_envs=2"])
    policy = cycling(4)
    metrics = make_eval_env(cfg.env, seed=0).evaluation_protocol(policy)
    assert metrics["games_finished"] == 1.0
    # the same games by hand: same seed, same actions, score summed to each game's end
    env = make_eval_env(cfg.env, seed=0)
    td = env.rollout(600, cycling(4), break_when_any_done=False)
    over = td["next", "info", "game_over"][..., 0]
    alive = (over.long().cumsum(1) - over.long()) == 0
    games = (td["next", "info", "score"][..., 0] * alive).sum(1)
    assert over.any(1).all() and metrics["return"] == pytest.approx(games.mean().item())
    lives_lost = (td["next", "done"][..., 0] & alive).sum(1)
    assert (lives_lost == 5).all()  # the game ran over all five lives


@pytest.mark.slow
def test_training_logs_the_score_of_finished_games(envpool):
    env = atari(n=2)
    assert env.read_stats() is None
    td = env.rollout(400, break_when_any_done=False)
    over = td["next", "info", "game_over"][..., 0]
    stats = env.read_stats()
    assert stats["games"] == over.sum().item() > 0
    assert env.read_stats() is None  # read once


def test_a_forced_reset_starts_a_new_game(envpool):
    env = atari(n=2)
    td = env.rollout(30, break_when_any_done=False)  # lives lost, no game over yet
    assert td["next", "info", "lives"][:, -1].min() < 5
    reset = torch.tensor([[True], [False]])
    out = env.reset(td[:, -1]["next"].clone().set("_reset", reset))
    assert out["info", "lives"][0, 0] == 5


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["ppo", "pqn"])
def test_ppo_and_pqn_train_a_few_iterations(envpool, tmp_path, agent):
    cfg = load_config(
        [
            "env=envpool",
            "env.num_envs=2",
            "env.eval_envs=1",
            "env.max_episode_steps=40",
            f"agent={agent}",
            "++agent.encoder.cnn_features=32",
            "agent.hidden=[]",
            "agent.minibatches=2",
            "agent.epochs=1",
            "trainer.rollout_steps=8",
            "trainer.total_frames=32",
            "trainer.eval_interval=32",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    summary = trainer.train()
    assert summary["frames"] == 32 and trainer.progress.update_count == 4  # 2 rollouts x 2
    assert summary["eval_metrics"]["games_finished"] in (0.0, 1.0)  # capped at 40 steps


def test_missing_envpool_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[envpool\]'") as err:
        atari()
    assert "\n" not in str(err.value)


def test_an_unknown_game_is_one_line(envpool):
    with pytest.raises(ConfigError, match="did you mean Breakout-v5"):
        atari("env.game=Breakuot-v5")
    with pytest.raises(ConfigError, match="not an envpool Atari game"):
        atari("env.game=CartPole-v1")  # an envpool task, not a game


def test_close_releases_the_pool(envpool):
    env = atari(n=1)
    env.rollout(3)
    env.close()
    assert env.is_closed
