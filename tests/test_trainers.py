import math

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.core.progress import Progress
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.foreign import first_episode_returns
from gpurl.envs.info import env_info
from gpurl.policies import PolicyWrapper, QNetwork, SpecEncoder, make_exploration
from gpurl.trainers.collector import LeanCollector
from gpurl.trainers.metrics import EpisodeTracker, MetricSums, final_train_return


def rollout(rewards, dones):
    r = torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
    d = torch.tensor(dones).unsqueeze(-1)
    return TensorDict({"next": {"reward": r, "done": d}}, batch_size=r.shape[:2])


def test_first_episode_returns_stop_at_each_envs_first_done():
    td = rollout([[1, 2, 3, 4], [1, 1, 1, 1]], [[False, True, False, True], [False] * 4])
    assert first_episode_returns(td).tolist() == [3.0, 4.0]


def time_major(td):
    return td.transpose(0, 1).contiguous()


def test_episode_tracker_counts_finished_episodes_across_batches():
    tracker = EpisodeTracker(2, "cpu")
    a = rollout([[1, 1, 1], [2, 2, 2]], [[False, True, False], [False, False, False]])
    b = rollout([[1, 1, 1], [2, 2, 2]], [[False, False, True], [True, False, False]])
    tracker.update(time_major(a))
    tracker.update(time_major(b))
    stats = tracker.read()
    # env 0: episodes of 2 and 4 steps (returns 2, 4); env 1: one of 4 steps (return 8)
    assert stats == {
        "episodes": 3,
        "return": 14 / 3,
        "length": 10 / 3,
        "run_returns": [14 / 3],
        "run_episodes": [3],
    }
    assert tracker.read() is None  # read resets


def test_episode_tracker_counts_each_runs_episodes():
    tracker = EpisodeTracker(2, "cpu", runs=2)  # env 0 is run 0's, env 1 run 1's
    tracker.update(time_major(rollout([[1, 1, 1], [2, 2, 2]], [[True, False, True], [False] * 3])))
    stats = tracker.read()
    # run 0: episodes of 1 and 2 steps (returns 1, 2); run 1: none yet
    assert stats["run_episodes"] == [2, 0] and stats["run_returns"][0] == 1.5
    assert math.isnan(stats["run_returns"][1])


def test_final_train_return_takes_whole_intervals_back_to_the_episode_count():
    # (frames, mean return, episodes) per log interval
    history = [(10, 0.0, 80), (20, 1.0, 60), (30, 2.0, 30), (40, 4.0, 50)]
    # newest first: 50 + 30 = 80 < 100, then + 60 = 140: the last three intervals
    assert final_train_return(history) == {
        "return": (4.0 * 50 + 2.0 * 30 + 1.0 * 60) / 140,
        "episodes": 140,
        "since_frames": 20,
    }
    assert final_train_return(history, episodes=50) == {
        "return": 4.0,
        "episodes": 50,
        "since_frames": 40,
    }
    assert final_train_return(history[:1]) is None  # fewer than 100 episodes
    # entries from before counts were kept end the walk: the figure is not made up
    assert final_train_return([(10, 1.0), (20, 2.0, 60)]) is None


def test_metric_sums_average_each_key_over_its_own_count():
    sums = MetricSums()
    sums.add(TensorDict(loss=torch.tensor(1.0)))
    sums.add(TensorDict(loss=torch.tensor(3.0), actor=torch.tensor(5.0)))
    assert sums.read() == {"loss": 2.0, "actor": 5.0}
    assert sums.read() == {}


def test_metric_sums_of_repeated_keys_match_one_add_per_key():
    """The same keys again are added in one foreach call; a new key set, a checkpoint
    load and a read each fall back to per-key adds, with the same sums and counts."""
    rows = [dict(loss=1.0, kl=0.5), dict(loss=2.0, kl=1.5), dict(loss=4.0, kl=0.0)]
    sums = MetricSums()
    for row in rows:
        sums.add(TensorDict({k: torch.tensor(v) for k, v in row.items()}))
    assert sums.peek() == {"loss": 7 / 3, "kl": 2 / 3}
    first = sums.sums["loss"]
    sums.add(TensorDict(loss=torch.tensor(3.0)))  # fewer keys: per key, the same tensors
    assert sums.sums["loss"] is first and sums.counts == {"loss": 4, "kl": 3}
    restored = MetricSums()
    restored.load_state_dict(sums.state_dict())
    restored.add(TensorDict(loss=torch.tensor(10.0)))
    restored.add(TensorDict(loss=torch.tensor(10.0)))
    assert restored.read() == {"loss": 30 / 6, "kl": 2 / 3}
    assert sums.read() == {"loss": 10 / 4, "kl": 2 / 3}  # the restored copy shares nothing


class PushRight(torch.nn.Module):
    kind = "q"

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([0.0, 1.0]))

    def forward(self, td):
        return self.bias.expand(*td["observation"].shape[:-1], 2)


def test_evaluate_counts_one_greedy_episode_per_env():
    env = CartPoleEnv(num_envs=5, seed=3)
    policy = PolicyWrapper(PushRight(), env_info(env), Progress())
    returns = env.play_episodes(policy)["return"]
    # replay the same starts step by step: pushing right always tips the pole in ~10 steps
    replay = CartPoleEnv(num_envs=5, seed=3)
    replay.lean_reset()
    lengths = torch.zeros(5)
    alive = torch.ones(5, dtype=torch.bool)
    for _ in range(500):
        nxt, _ = replay.lean_step(torch.ones(5, dtype=torch.long))
        lengths += alive.float()
        alive &= ~nxt["done"].squeeze(-1)
    assert torch.equal(returns, lengths) and (returns < 30).all()


def test_lean_collector_batches_are_consecutive_time_major_transitions():
    env = CartPoleEnv(num_envs=3)
    info, progress = env_info(env), Progress()
    q = QNetwork(SpecEncoder(info), 2, (8,))
    policy = PolicyWrapper(q, info, progress, make_exploration({}, info))
    collector = LeanCollector(env, policy, info, frames_per_batch=12, progress=progress)
    with set_exploration_type(ExplorationType.RANDOM):
        first = collector.rollout().clone()  # the buffer is reused: keep a copy
        buffer = collector.buffer
        second = collector.rollout()
    assert collector.buffer is buffer  # preallocated once, filled in place
    assert first.shape == (4, 3) and first["action"].shape == (4, 3)
    assert progress.frames == 24  # the collector advances the frame clock as it steps
    for batch in (first, second):
        not_done = ~batch["next", "done"][:-1, :, 0]
        # the next observation of a step is the observation of the following step
        # unless the episode ended in between (then the env was reset)
        same = (batch["next", "observation"][:-1] == batch["observation"][1:]).all(-1)
        assert same[not_done].all()
    boundary_same = (first["next", "observation"][-1] == second["observation"][0]).all(-1)
    assert boundary_same[~first["next", "done"][-1, :, 0]].all()


def test_collector_stores_next_observations_only_when_asked():
    env = CartPoleEnv(num_envs=2)
    info, progress = env_info(env), Progress()
    policy = PolicyWrapper(QNetwork(SpecEncoder(info), 2, (8,)), info, progress)
    collector = LeanCollector(env, policy, info, 4, progress, next_obs=False)
    batch = collector.rollout()
    assert ("next", "observation") not in batch.keys(True)
    assert {"reward", "terminated", "truncated", "done"} <= set(batch["next"].keys())


class CurriculumProbe(CartPoleEnv):
    """CartPole that records the global steps a trainer hands to envs with a curriculum."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def set_global_step(self, step):
        self.seen.append(step)


def test_trainer_hands_its_frame_count_to_envs_with_a_curriculum(tmp_path, scoped_registry):
    from gpurl.envs.cartpole import CartPoleConfig
    from gpurl.train import build, load_config

    scoped_registry.register("env", "curriculum_probe", CartPoleConfig)(CurriculumProbe)
    cfg = load_config(
        [
            "env=cartpole",
            "env.name=curriculum_probe",
            "env.num_envs=4",
            "env.eval_envs=2",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=8",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    for _ in range(3):
        trainer.iteration()
    # before each batch: the frames collected so far (host ints, nothing read back)
    assert trainer.env.seen == [0, 8, 16]
    assert all(type(s) is int for s in trainer.env.seen)


@pytest.mark.parametrize("seeds", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_stop_at_return_ends_the_run_at_the_first_evaluation_reaching_it(seeds, tmp_path):
    """CartPole's return is >= 1, so a target of 1 is reached at the first evaluation:
    the run ends there, with its checkpoint, and says so; an unreachable target trains
    to total_frames."""
    from gpurl.train import build, load_config

    def train(target, run_dir):
        cfg = load_config(
            [
                "env=cartpole",
                "agent=dqn",
                "agent.hidden=[8]",
                "env.num_envs=4",
                "trainer.total_frames=600",
                "trainer.eval_interval=200",
                "trainer.init_random_frames=100",
                "trainer.progress=false",
                f"trainer.num_seeds={seeds}",
                f"trainer.stop_at_return={target}",
                "logger=none",
            ]
        )
        trainer = build(cfg, run_dir)
        return trainer, trainer.train()

    trainer, summary = train(1.0, tmp_path / "solved")
    assert summary["frames"] == 200 and summary["stopped_at_return"] is True
    assert [f for f, _ in summary["eval_history"]] == [200]
    assert trainer.checkpoint_path.is_file()
    trainer, summary = train(1e9, tmp_path / "unsolved")
    assert summary["frames"] == 600 and summary["stopped_at_return"] is False
    assert len(summary["eval_history"]) == 3
