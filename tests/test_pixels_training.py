"""On-policy training on env=pixels (issue 13): the rollout storage against a plain loop,
the env's success and length stats in the logs without host reads, held-out evaluation
worlds, the evaluation protocol, and (CUDA) memory flat after warm-up."""

import pytest
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.envs import make_env, make_eval_env
from gpurl.envs.pixels import PixelsEnv
from gpurl.envs.pixels.env import WORLD_IDS
from gpurl.policies import LOG_PROB, VALUE
from gpurl.train import build, load_config
from gpurl.utils.host_reads import count_host_reads

from .conftest import requires_cuda


def small(tmp_path, preset="pixels_ppo", device="cpu", extra=()):
    """The preset's env and networks (the tile CNN), 4 envs x 8 steps, short episodes."""
    cfg = load_config(
        [
            f"experiment={preset}",
            f"device={device}",
            "env.num_envs=4",
            "env.eval_envs=3",
            "env.max_steps=5",
            "trainer.rollout_steps=8",
            "agent.minibatches=2",
            "logger=none",
            "trainer.progress=false",
            *extra,
        ]
    )
    return cfg, build(cfg, tmp_path)


# the fast suite keeps PPO's case (its 2-minute budget); PQN's Nature CNN runs slow
@pytest.mark.parametrize(
    "preset", ["pixels_ppo", pytest.param("pixels_pqn", marks=pytest.mark.slow)]
)
def test_rollout_storage_equals_a_plain_loop(tmp_path, preset):
    """Two rollouts through the LeanCollector's [T, N] buffer hold exactly what a plain
    Python loop over policy + env.step, storing into lists, sees: the frames acted on
    (uint8), actions, log-probs, values, rewards and flags; no next frames are stored
    and the one bootstrap observation is the loop's last."""
    cfg, tr = small(tmp_path, preset)
    ref_env = make_env(cfg.env, device="cpu", seed=int(cfg.seed))  # the trainer's worlds
    policy = tr.acting
    keys = ["pixels", "action", VALUE] + ([LOG_PROB] if preset == "pixels_ppo" else [])
    next_keys = ["reward", "terminated", "truncated", "done"]
    obs = ref_env.lean_reset()
    for _ in range(2):
        rng = torch.get_rng_state()
        batch = tr.collector.rollout()
        torch.set_rng_state(rng)  # the policy samples the same actions again
        stored = {k: [] for k in keys + next_keys}
        with set_exploration_type(ExplorationType.RANDOM), torch.no_grad():
            for _ in range(tr.steps):
                td = policy(obs.clone())
                for k in keys:
                    stored[k].append(td.get(k).clone())
                nxt, obs = ref_env.lean_step(td.get("action"))
                for k in next_keys:
                    stored[k].append(nxt.get(k).clone())
        for k in keys:
            torch.testing.assert_close(batch.get(k), torch.stack(stored[k]), rtol=0, atol=0)
        for k in next_keys:
            torch.testing.assert_close(batch["next", k], torch.stack(stored[k]), rtol=0, atol=0)
        assert batch.get("pixels").dtype == torch.uint8
        assert batch.get("pixels").shape == (tr.steps, 4, cfg.env.stack_k, 72, 80)
        assert "pixels" not in batch["next"].keys()  # the bootstrap observation only
        torch.testing.assert_close(tr.collector.obs["pixels"], obs["pixels"], rtol=0, atol=0)
        assert batch["next", "done"].any()  # episodes of 5 steps ended inside the rollout


def test_env_stats_reach_the_logs_without_host_reads(tmp_path):
    """info_mode=stats: success and episode length accumulate on the device as the env
    steps; training iterations read nothing; the log reads them once and they equal
    what the rollouts' flags say."""
    cfg, tr = small(tmp_path, extra=["env.max_steps=3"])
    assert cfg.env.info_mode == "stats"
    tr.iteration()  # warm-up: buffers allocated
    tr.env.read_stats()  # start counting from here
    tr.tracker.read()
    goals = episodes = 0
    with count_host_reads() as reads:
        for _ in range(3):
            tr.iteration()
            nxt = tr.collector.buffer["next"]
            goals, episodes = goals + nxt["terminated"].sum(), episodes + nxt["done"].sum()
    assert reads.count == 0, reads.report()
    stats = tr.env.read_stats()
    tracked = tr.tracker.read()
    assert stats["episodes"] == episodes.item() == tracked["episodes"]
    assert stats["success"] == pytest.approx(goals.item() / episodes.item())
    assert stats["length"] == pytest.approx(tracked["length"])
    assert tr.env.read_stats() is None  # nothing ended since


def test_evaluation_uses_held_out_worlds(tmp_path):
    cfg, tr = small(tmp_path)
    assert tr.eval_env.held_out and not tr.env.held_out
    train_ids, eval_ids = tr.env.world_ids, tr.eval_env.world_ids
    # the preset's pool of 4,096 worlds: ids seed .. seed + 4095, drawn at each reset
    assert tr.env.num_worlds == 4096 and ((train_ids >= 0) & (train_ids < 4096)).all()
    assert tr.env.pool.ids.tolist() == list(range(4096))
    # held-out ids count down from 2**32 - 1: above every training id of any seed below
    # 2**31 - num_envs, whatever num_envs (16,384 envs of seed 0 end at 16,383)
    assert eval_ids.min() >= 2**31
    assert (WORLD_IDS - 1 - eval_ids).tolist() == [10_000, 10_001, 10_002]
    assert make_eval_env(cfg.env, seed=1).world_ids.tolist() == [
        WORLD_IDS - 1 - 10_001 - i for i in range(3)
    ]
    # and the worlds themselves differ from the training ones of the same index
    assert not torch.equal(tr.eval_env.tiles[0], tr.env.tiles[0])


def test_evaluation_protocol_reports_success_and_length():
    """Success = the goal reached before max_steps, against a plain loop."""
    kw = dict(num_envs=6, seed=3, map_height=8, map_width=8, wall_prob=0.1, reward="reach")
    kw |= dict(shaping=0.1, max_steps=12)
    env, ref = PixelsEnv(**kw), PixelsEnv(**kw)

    def right_then_down(td):  # a fixed policy: RIGHT, RIGHT, DOWN, ...
        t = right_then_down.t = getattr(right_then_down, "t", -1) + 1
        td.set("action", torch.full(td.batch_size, 7 if t % 3 < 2 else 5))
        return td

    metrics = env.evaluation_protocol(right_then_down)
    right_then_down.t = -1
    obs = ref.lean_reset()
    ret, length, reached = [0.0] * 6, [0] * 6, [False] * 6
    ended = [False] * 6
    for _ in range(12):
        nxt, obs = ref.lean_step(right_then_down(obs)["action"])
        for i in range(6):
            if not ended[i]:
                ret[i] += nxt["reward"][i].item()
                length[i] += 1
                reached[i] = nxt["terminated"][i].item()
                ended[i] = nxt["done"][i].item()
    assert metrics["return"] == pytest.approx(sum(ret) / 6, abs=1e-5)
    assert metrics["success"] == pytest.approx(sum(reached) / 6)
    assert metrics["length"] == pytest.approx(sum(length) / 6)
    assert 0 < metrics["success"] < 1  # the check sees both outcomes
    right_then_down.t = -1
    returns = PixelsEnv(**kw).play_episodes(right_then_down)["return"]
    assert returns.mean().item() == pytest.approx(metrics["return"], abs=1e-5)


@requires_cuda
@pytest.mark.parametrize("preset", ["pixels_ppo", "pixels_pqn"])
def test_training_memory_is_flat_after_warm_up_on_cuda(tmp_path, preset):
    _, tr = small(tmp_path, preset, device="cuda", extra=["env.num_envs=64"])
    for _ in range(2):
        tr.iteration()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    tr.iteration()  # one iteration sets the peak that every later one must stay under
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    peak = torch.cuda.max_memory_allocated()
    for _ in range(5):
        tr.iteration()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.max_memory_allocated() == peak
