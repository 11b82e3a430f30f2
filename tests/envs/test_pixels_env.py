"""PixelsEnv: specs, frame stack, resets, goal counter, truncation, info modes, host reads."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.pixels import PixelsEnv
from gpurl.envs.pixels.atlas import player_sprite, tile_atlas
from gpurl.envs.pixels.movement import NOOP, move_player
from gpurl.envs.pixels.render import render_reference, world_image
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads
from tests.conftest import requires_cuda


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stack_k": 4, "info_mode": "full", "goal_stack": True},
        {"stack_k": 2, "restore": "masked", "reward": "reach", "info_mode": "none"},
    ],
)
def test_specs_pass_and_shapes(kw):
    env = make_env({"name": "pixels", **kw}, num_envs=3)
    check_env_specs(env)
    td = env.rollout(6, break_when_any_done=False)
    k = kw.get("stack_k", 1)
    assert td["pixels"].shape == (3, 6, k, 72, 80) and td["pixels"].dtype == torch.uint8
    assert td["pixels"].max() <= 3 and env.action_spec.n == 8


def _frames_at(env, pos, world=None):
    shades, opaque = player_sprite()
    return render_reference(env.tiles, pos, tile_atlas(), shades, opaque, world)


def _start_frames(env):
    return _frames_at(env, env.cache["pos"])


@pytest.mark.parametrize("k,restore", [(1, "lazy"), (4, "lazy"), (4, "masked")])
def test_frame_stack_matches_a_plain_reference_through_resets(k, restore):
    n = 6
    env = PixelsEnv(num_envs=n, seed=3, stack_k=k, restore=restore, max_steps=5)
    one = PixelsEnv(num_envs=n, seed=3, stack_k=1, max_steps=5)  # the k = 1 fast path
    start = _start_frames(env).unsqueeze(1)
    world = world_image(env.tiles, tile_atlas())
    ref = start.repeat(1, k, 1, 1)  # the obvious stack: shift left, append
    obs, obs1 = env.lean_reset(), one.lean_reset()
    assert torch.equal(obs["pixels"], ref)
    gen = torch.Generator().manual_seed(k)
    resets = 0
    for t in range(14):
        action = torch.randint(0, 8, (n,), generator=gen)
        # where the player ends up before any autoreset (movement has its own tests)
        moved = move_player(env.pos, action, env.blocked, env.held_frames)
        frame = _frames_at(env, moved, world)
        nxt, obs = env.lean_step(action)
        nxt1, obs1 = one.lean_step(action)
        ref = torch.cat((ref[:, 1:], frame.unsqueeze(1)), 1)
        assert torch.equal(nxt["pixels"], ref)
        assert torch.equal(nxt1["pixels"][:, 0], ref[:, -1])
        done = nxt["done"].view(n, 1, 1, 1)
        ref = torch.where(done, start, ref)
        assert torch.equal(obs["pixels"], ref)
        assert torch.equal(obs1["pixels"][:, 0], ref[:, -1])
        if t % 5 == 4:  # a partial reset through TorchRL's "_reset"
            mask = torch.randint(0, 2, (n, 1), generator=gen).bool()
            out = env.reset(TensorDict({"_reset": mask}, batch_size=[n]))
            one.reset(TensorDict({"_reset": mask}, batch_size=[n]))
            ref = torch.where(mask.view(n, 1, 1, 1), start, ref)
            # TorchRL's reset returns the reset rows merged into the input; the env's own
            # observation holds all rows
            assert torch.equal(out["pixels"][mask.view(n)], ref[mask.view(n)])
            assert torch.equal(env._observation()["pixels"], ref)
        resets += int(nxt["done"].sum())
    assert resets >= 2 * n  # every env went through autoresets (max_steps=5)


def test_returned_observations_are_never_mutated_later():
    env = PixelsEnv(num_envs=4, stack_k=3)
    obs = env.lean_reset()
    kept = []
    for _ in range(6):
        nxt, obs = env.lean_step(torch.full((4,), 7))
        kept.append((nxt["pixels"], nxt["pixels"].clone(), obs["pixels"], obs["pixels"].clone()))
    for a, a0, b, b0 in kept:
        assert torch.equal(a, a0) and torch.equal(b, b0)
        assert a.data_ptr() != env.stack.ring.data_ptr()


def test_partial_reset_leaves_other_envs_untouched():
    n = 6
    env = PixelsEnv(num_envs=n, stack_k=2, info_mode="full")
    env.reset()
    for a in (7, 5, 7, 6):
        env.step(TensorDict({"action": torch.full((n,), a)}, batch_size=[n]))
    before = {k: getattr(env, k).clone() for k in ("pos", "steps", "counter", "metric")}
    pixels = env._observation()["pixels"].clone()
    mask = torch.tensor([True, False, True, False, False, True])
    out = env.reset(TensorDict({"_reset": mask.unsqueeze(-1)}, batch_size=[n]))
    for k, v in before.items():
        assert torch.equal(getattr(env, k)[~mask], v[~mask]), k
    assert torch.equal(env.pos[mask], env.cache["pos"][mask])
    assert (env.steps[mask] == 0).all() and (env.counter[mask] == 0).all()
    now = env._observation()
    assert torch.equal(now["pixels"][~mask], pixels[~mask])
    start = _start_frames(env)[mask].unsqueeze(1).expand(-1, 2, -1, -1)
    assert torch.equal(now["pixels"][mask], start) and torch.equal(out["pixels"][mask], start)
    assert torch.equal(now["info"]["reset_mask"].squeeze(-1), mask)


def test_world_pool_draws_a_new_world_at_each_reset():
    """num_worlds = P: env i plays pool world j as the fixed-world env built with the same
    seed plays its env j (tiles, moves, start state and frame); envs that do not reset
    keep their world; every pool world comes up; held-out envs ignore the pool."""
    n, pool = 4, 5
    kw = dict(stack_k=2, reward="reach", shaping=0.1, map_height=8, map_width=8, max_steps=6)
    env = PixelsEnv(num_envs=n, seed=3, num_worlds=pool, **kw)
    fixed = PixelsEnv(num_envs=pool, seed=3, **kw)
    start_pixels = fixed.lean_reset()["pixels"]  # [pool, 2, 72, 80]: each world's start
    seen = set()
    env.lean_reset()
    for t in range(30):
        world, pos = env.world.clone(), env.pos.clone()
        seen.update(world.tolist())
        assert torch.equal(env.world_ids, 3 + world) and torch.equal(env.tiles, fixed.tiles[world])
        action = torch.tensor([4 + (t + i) % 4 for i in range(n)])
        nxt, obs = env.lean_step(action)
        done = nxt["done"][:, 0]
        moved = move_player(pos, action, fixed.blocked[world], env.held_frames)
        assert torch.equal(env.pos[~done], moved[~done])
        assert torch.equal(env.world[~done], world[~done])  # no reset: same world
        new = env.world[done]  # a reset env starts its new world from its start state
        assert torch.equal(env.pos[done], fixed.cache["pos"][new])
        assert torch.equal(obs["pixels"][done], start_pixels[new])
    assert seen == set(range(pool))
    held = PixelsEnv(num_envs=n, seed=3, num_worlds=pool, held_out=True, **kw)
    assert held.pool is None and held.world_ids.tolist() == [2**32 - 1 - 3 - i for i in range(n)]


def test_world_pool_resumes_exactly():
    kw = dict(
        num_envs=3, seed=1, num_worlds=7, reward="reach", map_height=8, map_width=8, max_steps=3
    )
    env = PixelsEnv(**kw)
    env.lean_reset()
    actions = [torch.tensor([4 + (t + i) % 4 for i in range(3)]) for t in range(12)]
    for a in actions[:5]:
        env.lean_step(a)
    copy = PixelsEnv(**kw)
    copy.lean_reset()
    copy.load_env_state_dict(env.env_state_dict())
    for a in actions[5:]:
        (n1, o1), (n2, o2) = env.lean_step(a), copy.lean_step(a)
        assert torch.equal(n1["reward"], n2["reward"]) and torch.equal(o1["pixels"], o2["pixels"])
        assert torch.equal(env.world, copy.world)


def test_goal_counter_bonus_and_autoreset():
    env = PixelsEnv(num_envs=2, k_consecutive=3, info_mode="full")
    env.lean_reset()
    start_dist = env.metric.clone()
    env.pos = torch.stack((env.goal_pos[0], env.pos[1]))  # put env 0 on its goal
    noop = torch.full((2,), NOOP)
    rewards = []
    for step in range(3):
        nxt, obs = env.lean_step(noop)
        rewards.append(nxt["reward"].squeeze(-1))
        assert nxt["info", "dist"][0].item() == 0.0
        assert nxt["terminated"][0].item() == (step == 2)
        assert not nxt["done"][1].item()
    assert rewards[0][0].item() == pytest.approx(-0.01 + start_dist[0].item())
    assert rewards[1][0].item() == pytest.approx(-0.01)
    assert rewards[2][0].item() == pytest.approx(-0.01 + 10.0)
    assert rewards[2][1].item() == pytest.approx(-0.01)  # NOOP far from the goal: no progress
    assert torch.equal(env.pos[0], env.cache["pos"][0]) and env.counter[0].item() == 0
    assert obs["info", "reset_mask"].squeeze(-1).tolist() == [True, False]


def test_goal_template_counter_drops_when_leaving():
    from gpurl.envs.pixels.reward import goal_template_reward

    counter = torch.zeros(1, dtype=torch.int64)
    prev = torch.ones(1)
    seen = []
    for d in (0.01, 0.01, 0.2, 0.01, 0.01, 0.01):
        dist = torch.tensor([d])
        reward, counter, done = goal_template_reward(dist, prev, counter, -0.01, 1.0, 10.0, 0.05, 3)
        seen.append((counter.item(), done.item()))
        prev = dist
    assert seen == [(1, False), (2, False), (0, False), (1, False), (2, False), (3, True)]


def test_reach_reward_and_truncation():
    env = PixelsEnv(num_envs=2, reward="reach", shaping=0.5, max_steps=4)
    env.lean_reset()
    env.pos = torch.stack((env.goal_pos[0], env.pos[1]))
    nxt, _ = env.lean_step(torch.full((2,), NOOP))
    assert nxt["terminated"].squeeze(-1).tolist() == [True, False]
    assert nxt["reward"][0].item() > 9.0
    for step in range(2, 5):
        nxt, _ = env.lean_step(torch.full((2,), NOOP))
        assert nxt["truncated"][1].item() == (step == 4)
        assert not nxt["terminated"][1].item()
        assert nxt["reward"][1].item() == pytest.approx(-0.01)
    assert env.steps.tolist() == [3, 0]


def test_info_modes():
    kw = dict(num_envs=5, seed=1, max_steps=3)
    envs = {m: PixelsEnv(info_mode=m, **kw) for m in ("full", "stats", "none")}
    obs = {m: e.lean_reset() for m, e in envs.items()}
    assert "info" in obs["full"].keys() and "info" not in obs["stats"].keys()
    assert "info" not in obs["none"].keys()
    for _ in range(3):
        out = {m: e.lean_step(torch.full((5,), 7))[0] for m, e in envs.items()}
    dist = out["full"]["info", "dist"].squeeze(-1)
    stats = envs["stats"].stats
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in stats.values())
    assert stats["dist_mean"].item() == pytest.approx(dist.mean().item())
    assert stats["dist_min"].item() == pytest.approx(dist.min().item())
    assert stats["episodes_done"].item() == 5 and stats["total_episodes"].item() == 5
    assert envs["none"].stats == {} and envs["full"].stats == {}
    assert torch.equal(out["none"]["reward"], out["full"]["reward"])


@pytest.mark.parametrize(
    "kw", [{}, {"stack_k": 4, "restore": "masked", "info_mode": "full"}, {"num_worlds": 16}]
)
def test_lean_step_reads_nothing_on_the_host(kw):
    env = PixelsEnv(num_envs=8, max_steps=5, **kw)
    env.lean_reset()
    action = env.action_spec.rand()
    with count_host_reads() as reads:
        for _ in range(12):
            nxt, obs = env.lean_step(action)
    assert reads.count == 0, reads.report()


def test_force_reset_resets_every_env_every_step():
    env = PixelsEnv(num_envs=3)
    env.force_reset = True
    env.lean_reset()
    for _ in range(3):
        nxt, obs = env.lean_step(torch.full((3,), 7))
        assert nxt["done"].all() and (env.steps == 0).all()
        assert torch.equal(env.pos, env.cache["pos"])


def test_bad_options_raise_config_errors():
    with pytest.raises(ConfigError, match="stack_k"):
        make_env({"name": "pixels", "stack_k": 0})
    with pytest.raises(ConfigError, match="info_mode"):
        make_env({"name": "pixels", "info_mode": "verbose"})
    with pytest.raises(ConfigError, match="bad option"):
        make_env({"name": "pixels", "colour": 1})
    with pytest.raises(ConfigError, match="num_worlds"):
        make_env({"name": "pixels", "num_worlds": -1})


@requires_cuda
def test_cpu_and_cuda_agree():
    envs = [PixelsEnv(num_envs=16, device=d, stack_k=2, max_steps=9) for d in ("cpu", "cuda")]
    first, second = (e.lean_reset() for e in envs)
    assert torch.equal(first["pixels"], second["pixels"].cpu())
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        action = torch.randint(0, 8, (16,), generator=gen)
        a, b = (e.lean_step(action.to(e.device)) for e in envs)
        for key in ("pixels", "reward", "done"):
            # float reductions run in another order on the GPU: rewards agree to 1e-6
            assert torch.allclose(a[0][key].float(), b[0][key].cpu().float(), atol=1e-6), key
        assert torch.equal(a[1]["pixels"], b[1]["pixels"].cpu())


@requires_cuda
def test_cuda_peak_memory_is_flat_after_warmup():
    env = PixelsEnv(num_envs=512, device="cuda", stack_k=4, max_steps=20)
    env.lean_reset()
    action = torch.zeros(512, dtype=torch.int64, device="cuda")
    for _ in range(30):
        nxt, obs = env.lean_step(action.random_(0, 8))
    torch.cuda.synchronize()
    before = torch.cuda.max_memory_allocated()
    for _ in range(200):
        nxt, obs = env.lean_step(action.random_(0, 8))
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() == before


def test_hydra_config_builds_the_env():
    from pathlib import Path

    from omegaconf import OmegaConf

    import gpurl

    cfg = OmegaConf.load(Path(gpurl.__file__).parent / "configs" / "env" / "pixels.yaml")
    env = make_env(OmegaConf.to_container(cfg), num_envs=2)
    assert isinstance(env, PixelsEnv) and env.batch_size == (2,)
    assert env.max_episode_steps == cfg.max_steps and env.info_mode == cfg.info_mode


@requires_cuda
def test_cuda_step_never_syncs():
    env = PixelsEnv(num_envs=64, device="cuda", stack_k=2, max_steps=5, info_mode="full")
    env.lean_reset()
    action = torch.zeros(64, dtype=torch.int64, device="cuda")
    env.lean_step(action)  # first call builds the per-device constants
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            nxt, obs = env.lean_step(action.random_(0, 8))
    finally:
        torch.cuda.set_sync_debug_mode(0)


@pytest.mark.parametrize("kw", [{"stack_k": 2, "goal_stack": True}, {"release_after_frames": 5}])
def test_goal_distance_is_the_pixel_distance_to_the_goal_template(kw):
    from gpurl.envs.pixels.reward import frame_distance

    env = PixelsEnv(num_envs=8, seed=2, info_mode="full", **kw)
    env.lean_reset()
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        nxt, _ = env.lean_step(torch.randint(0, 8, (8,), generator=gen))
        pixels = nxt["pixels"]
        if env.goal_stack:
            goal = env.goal_frame.unsqueeze(1).expand_as(pixels)
        else:
            pixels, goal = pixels[:, -1], env.goal_frame
        expected = (pixels.float() - goal.float()).abs().flatten(1).mean(1) / 3
        assert torch.allclose(nxt["info", "dist"].squeeze(-1), expected, atol=1e-6)
        assert torch.allclose(frame_distance(pixels, goal), expected, atol=1e-6)
    assert not env._aligned or env.goal_stack
