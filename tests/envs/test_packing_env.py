"""PackingEnv: specs, rewards, episode ends, partial resets, host reads, baselines."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.packing import orientations as ori
from gpurl.envs.packing import reward as rw
from gpurl.envs.packing.baselines import HeuristicPolicy, RandomPolicy
from gpurl.envs.packing.env import PackingEnv
from gpurl.envs.packing.evaluation import evaluate
from gpurl.envs.packing.features import manager_maps, worker_maps
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads

from ..conftest import devices, requires_cuda

SMALL = dict(resolution=32, pool_size=12, num_objects=6, num_candidates=4, max_steps=10)


def _env(num_envs=3, device="cpu", seed=0, **kw):
    return PackingEnv(num_envs=num_envs, device=device, seed=seed, **{**SMALL, **kw})


@pytest.mark.parametrize("device", devices())
def test_check_env_specs_and_observation_layout(device):
    env = _env(device=device)
    check_env_specs(env)
    td = env.reset()
    assert td["heightmap"].shape == (3, 32, 32)
    assert td["candidate_features"].shape == (3, 4, 8)
    assert td["candidate_mask"].all()
    assert env.action_spec.shape == (3, 4)


def test_reward_terms_on_hand_built_heightmaps():
    sep = 0.01
    hm = torch.zeros(1, 10, 10)
    hm[0, 2:4, 3:8] = 0.05  # a 2 x 5 block, 5 cm high
    vp = torch.tensor([2 * 5 * sep * sep * 0.05 * 0.5])  # the item fills half of it
    assert rw.occupied_volume(hm, sep).item() == pytest.approx(2 * 5 * 1e-4 * 0.05)
    assert rw.compactness(hm, vp, sep).item() == pytest.approx(0.5)
    assert rw.pyramidality(hm, vp, sep).item() == pytest.approx(0.5)
    hm[0, 9, 9] = 0.025  # a far post doubles nothing but the bounding box
    area = 8 * 7 * sep * sep
    assert rw.compactness(hm, vp, sep).item() == pytest.approx(vp.item() / (area * 0.05))
    assert rw.compactness(torch.zeros(1, 4, 4), torch.zeros(1), sep).item() == 0
    w = rw.RewardWeights()
    one = torch.ones(1)
    r = rw.shaped_reward(
        torch.tensor([True]), 0 * one, 0.5 * one, 0.2 * one, 0.1 * one, 0.1 * one, 0.2 * one, 0.5, w
    )
    expected = 1.0 + 0.4 * 0.5 + 0.0 + 0.2 * (0.5 * 0.5 + 0.3 * 0.1) - 0.1 * 0.2
    assert r.item() == pytest.approx(expected)


def _run(env, policy, steps):
    td = env.reset()
    out = []
    for _ in range(steps):
        td = env.step(policy(td))
        out.append(td["next"].clone())
        td = td["next"].exclude("reward", "done", "terminated", "truncated")
    return out


def test_utilisation_gain_sums_to_the_final_utilisation():
    """utilisation_gain alone: each step pays the placed item's share of the box, so an
    episode's rewards add up to utilisation_gain x its final utilisation."""
    weights = {k: 0.0 for k in rw.RewardWeights.__dataclass_fields__} | {"utilisation_gain": 30.0}
    env = _env(num_envs=2, num_objects=3, num_candidates=3, reward_weights=weights)
    steps = _run(env, HeuristicPolicy(env.geometry), 3)
    total = sum(s["reward"].squeeze(-1) for s in steps)
    assert (total > 0).all()
    assert torch.allclose(total, 30.0 * env.episode_metrics()["utilisation"])


def test_heuristic_packs_everything_and_terminates():
    env = _env(num_envs=2, num_objects=3, num_candidates=3)
    steps = _run(env, HeuristicPolicy(env.geometry), 3)
    assert [s["terminated"].squeeze(-1).tolist() for s in steps] == [[False] * 2] * 2 + [[True] * 2]
    assert all((s["reward"] >= 1.0).all() for s in steps)  # every step placed an item
    assert env.packed.all() and not steps[-1]["truncated"].any()
    m = env.episode_metrics()
    assert torch.equal(m["packed"], torch.tensor([3.0, 3.0])) and m["success"].all()
    vol = env.geometry.pool.volume[env.items].sum(1) / 0.256**3
    assert torch.allclose(m["utilisation"], vol)


def test_heuristic_first_placement_is_at_the_origin_of_an_empty_box():
    env = _env(num_envs=2)
    td = HeuristicPolicy(env.geometry)(env.reset())
    pid = td["items"].gather(1, td["candidates"][:, :1]).squeeze(1)
    flat = env.geometry.pool.ht_max[pid]
    assert td["action"][:, 2:].eq(0).all()
    assert torch.equal(flat.gather(1, td["action"][:, 1:2]).squeeze(1), flat.amin(1))


@pytest.mark.parametrize("mode", ["terminate", "noop"])
def test_no_legal_placement_terminates(mode):
    env = _env(num_envs=2, illegal_action=mode)
    td = env.reset()
    env.hm = torch.full_like(env.hm, 0.256 - 1e-3)
    td["heightmap"] = env.hm
    nxt = env.step(HeuristicPolicy(env.geometry)(td))["next"]
    assert nxt["terminated"].all() and (nxt["reward"] < 1.0).all()
    assert not env.packed.any()


def test_truncation_at_max_steps_and_illegal_actions_place_nothing():
    env = _env(num_envs=2, num_objects=12, num_candidates=12, max_steps=3, illegal_action="noop")
    td = env.reset()
    bad = torch.tensor([[0, 0, env.geometry.corners - 1, env.geometry.corners - 1]] * 2)
    flags = []
    for _ in range(3):
        td["action"] = bad  # the far corner: every footprint leaves the box
        td = env.step(td)
        flags.append(td["next", "truncated"].squeeze(-1).tolist())
        td = td["next"].exclude("reward", "done", "terminated", "truncated")
    assert flags == [[False, False], [False, False], [True, True]]
    assert not env.packed.any() and env.hm.eq(0).all()


@pytest.mark.parametrize("mode", ["terminate", "noop"])
def test_illegal_corner_by_mode(mode):
    env = _env(num_envs=2, illegal_action=mode)
    td = env.reset()
    td["action"] = torch.tensor([[0, 0, 0, 0], [0, 0, env.geometry.corners - 1, 0]])
    nxt = env.step(td)["next"]
    assert nxt["reward"][0] >= 1.0 and env.packed[0].sum() == 1  # the origin is legal
    assert nxt["reward"][1] < 1.0 and not env.packed[1].any()
    assert nxt["terminated"].squeeze(-1).tolist() == [False, mode == "terminate"]


def test_partial_reset_leaves_other_envs_untouched():
    env = _env(num_envs=3)
    _run(env, RandomPolicy(env.geometry), 2)
    before = {k: getattr(env, k).clone() for k in ("hm", "items", "packed", "steps")}
    env.reset(TensorDict({"_reset": torch.tensor([[False], [True], [False]])}, [3]))
    for k, v in before.items():
        now = getattr(env, k)
        assert torch.equal(now[[0, 2]], v[[0, 2]]), k
    assert env.hm[1].eq(0).all() and not env.packed[1].any() and env.steps[1] == 0


def test_random_policy_only_places_legally():
    env = _env(num_envs=4, seed=3)
    steps = _run(env, RandomPolicy(env.geometry, seed=1), 3)
    assert all((s["reward"] >= 1.0).all() for s in steps)
    assert torch.equal(env.packed.sum(1), torch.full((4,), 3))


@pytest.mark.parametrize("mode", ["terminate", "noop"])
def test_lean_step_has_no_host_reads(mode):
    env = _env(num_envs=4, illegal_action=mode)
    policy = RandomPolicy(env.geometry)
    obs = env.lean_reset()
    _, obs = env.lean_step(policy(obs)["action"])
    action = policy(obs)["action"]
    with count_host_reads() as reads:
        for _ in range(3):
            _, obs = env.lean_step(action)
    assert reads.count == 0, reads.report()


def test_map_functions_shapes_and_ranges():
    env = _env(num_envs=2)
    td = env.reset()
    pid = td["items"].gather(1, td["candidates"])
    mm = manager_maps(env.geometry, td["heightmap"], pid)
    assert mm.shape == (2, 4, 7, 32, 32) and mm.min() >= 0 and mm.max() <= 1
    assert mm[:, :, 1:6].amax((-2, -1)).gt(0).all()  # every top view shows the item
    maps, legal, z = worker_maps(env.geometry, td["heightmap"], pid[:, 0])
    assert maps.shape == (2, 24, 3, 32, 32) and legal.shape == z.shape == (2, 24, 8, 8)
    assert legal.any()


def test_evaluation_is_reproducible():
    small = dict(num_envs=2, seed=5, num_objects=3, num_candidates=3, max_steps=4)
    a = evaluate(_env(**small), HeuristicPolicy)
    b = evaluate(_env(**small), HeuristicPolicy)
    assert a == b and set(a) >= {"packed", "success", "utilisation", "compactness"}
    assert 0 < a["utilisation"] < 1 and a["packed"] == 3 and a["success"] == 1


def test_make_env_from_the_hydra_config_and_config_errors():
    from pathlib import Path

    from omegaconf import OmegaConf

    import gpurl

    cfg = OmegaConf.load(Path(gpurl.__file__).parent / "configs" / "env" / "packing.yaml")
    cfg = OmegaConf.merge(cfg, {"num_envs": 2, **SMALL})
    env = make_env(cfg)
    assert isinstance(env, PackingEnv) and env.num_envs == 2
    assert env.weights.placed == 1.0 and env.geometry.resolution == 32
    with pytest.raises(ConfigError, match="grid_step"):
        make_env({"name": "packing", "grid_step": 0, **SMALL})
    with pytest.raises(ConfigError, match="reward_weights"):
        make_env({"name": "packing", "reward_weights": {"bogus": 1.0}, **SMALL})


@requires_cuda
def test_cpu_and_cuda_agree():
    envs = [_env(num_envs=3, device=d) for d in ("cpu", "cuda")]
    tds = [e.reset() for e in envs]
    envs[1].items = envs[0].items.cuda()  # the two devices' generators draw differently
    keep = torch.zeros(3, 1, dtype=torch.bool, device="cuda")
    tds[1] = envs[1].reset(TensorDict({"_reset": keep}, [3], device="cuda"))
    pols = [HeuristicPolicy(e.geometry) for e in envs]
    for _ in range(4):
        nxt = [e.step(p(td))["next"] for e, p, td in zip(envs, pols, tds, strict=True)]
        assert torch.allclose(nxt[0]["reward"], nxt[1]["reward"].cpu(), atol=1e-5)
        assert torch.equal(nxt[0]["heightmap"], nxt[1]["heightmap"].cpu())
        tds = [n.exclude("reward", "done", "terminated", "truncated") for n in nxt]


def test_manager_maps_show_the_named_views():
    env = _env(num_envs=1)
    td = env.reset()
    pid = td["items"].gather(1, td["candidates"])
    mm = manager_maps(env.geometry, td["heightmap"], pid)
    pool = env.geometry.pool
    for channel, view in enumerate((ori.FRONT, ori.REAR, ori.LEFT, ori.RIGHT, ori.IDENTITY)):
        expected = (pool.ht[pid[0, 0], view] / 0.256).clamp(0, 1)
        assert torch.allclose(mm[0, 0, 1 + channel].sum(), expected.sum(), atol=1e-4)


def test_baselines_drive_a_torchrl_rollout_with_autoreset():
    env = _env(num_envs=2, num_objects=3, num_candidates=3, max_steps=5)
    ro = env.rollout(5, HeuristicPolicy(env.geometry), break_when_any_done=False)
    assert ro.shape == (2, 5)
    assert ro["next", "done"].squeeze(-1)[:, 2].all()  # 3 items packed in 3 steps
    assert (ro["next", "reward"] >= 1.0).all()  # and the reset episode goes on placing


def test_env_with_mesh_parts(tmp_path):
    trimesh = pytest.importorskip("trimesh")
    trimesh.creation.box(extents=(0.03, 0.02, 0.01)).export(tmp_path / "a.stl")
    trimesh.creation.cylinder(radius=0.012, height=0.03).export(tmp_path / "b.obj")
    paths = [str(tmp_path / "a.stl"), str(tmp_path / "b.obj")]
    env = _env(num_envs=2, pool_size=4, mesh_paths=paths)
    nxt = env.step(HeuristicPolicy(env.geometry)(env.reset()))["next"]
    assert (nxt["reward"] >= 1.0).all() and env.packed.sum() == 2
