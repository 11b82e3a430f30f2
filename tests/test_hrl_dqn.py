"""The packing agent (agents/hrl_dqn.py): Q at the exact cell, the joint masked argmax,
Double DQN targets at both levels, maps rebuilt at sample time, the schedules, the
candidate mask, and a training iteration with no host reads."""

import math

import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.agents import make_agent
from gpurl.agents.hrl_dqn import (
    bf16_supported,
    corner_cells,
    decode,
    heuristic_slot,
    joint_argmax,
    manager_q,
    worker_q,
    worker_q_at,
)
from gpurl.core.progress import Progress
from gpurl.envs.info import env_info
from gpurl.envs.packing.baselines import HeuristicPolicy
from gpurl.envs.packing.env import PackingEnv
from gpurl.envs.packing.features import MANAGER_SCALARS, orientation_maps, worker_maps
from gpurl.errors import ConfigError
from gpurl.policies.packing import WORKER_INPUTS, WorkerUNet
from gpurl.train import build, load_config
from gpurl.trainers.collector import make_collector
from gpurl.trainers.replay import DeviceReplay
from tools.common import training_batch

from .conftest import SMALL_PACKING, assert_iterations_read_nothing

SMALL_ENV = dict(resolution=16, grid_step=2, pool_size=8, num_objects=6, num_candidates=4)


def agent_cfg(**over):
    cfg = OmegaConf.load("gpurl/configs/agent/hrl_dqn.yaml")
    cfg.manager = dict(channels=[8], blocks=[1], stem=8, scalar_features=8, hidden=[16])
    cfg.worker = dict(channels=[4, 8], corner_features=True)
    cfg.manager_chunk, cfg.worker_chunk = 3, 5  # chunks that do not divide K or 24
    for k, v in over.items():
        cfg[k] = v
    return cfg


def make(num_envs=4, seed=0, random_frames=0, **over):
    torch.manual_seed(seed)
    env = PackingEnv(num_envs=num_envs, seed=seed, box_size=(0.08, 0.08, 0.08), **SMALL_ENV)
    progress = Progress()
    agent = make_agent(agent_cfg(**over), env_info(env), progress, random_frames)
    # the worker's output layers start at 0 (so Q does): give them values, so the tests
    # below compare real numbers, and keep the target net equal to the online one
    with torch.no_grad():
        for p in agent.worker.parameters():
            if not p.any():
                p.normal_(0.0, 0.3)
    agent.worker_target.load_state_dict(agent.worker.state_dict())
    return env, agent, progress


def played(env, agent, steps=3):
    """An observation a few placements into the episodes (non-flat heightmaps)."""
    td = env.lean_reset()
    for _ in range(steps):
        _, td = env.lean_step(agent.policy(td)["action"])
    return td


# -- the worker's Q -------------------------------------------------------------------------
def test_worker_q_starts_at_zero():
    """Fresh worker: every output layer is 0, so Q_w is 0 for every placement (a random
    initial slope of the state term fed "higher is better" back through the bootstrap)."""
    torch.manual_seed(0)
    for channels in ([4, 8], []):
        net = WorkerUNet(channels, corner_features=True)
        maps = torch.rand(2, 3, WORKER_INPUTS, 8, 8)
        assert not net.scores(maps).any()
        assert not net.corner_term(torch.rand(5), torch.rand(5), torch.rand(5)).any()
        assert not net.state_term(torch.rand(5, MANAGER_SCALARS)).any()


def test_corner_cells_read_the_exact_cell():
    r, g = 16, 3
    scores = torch.arange(r * r, dtype=torch.float32).view(1, r, r)
    cells = corner_cells(scores, g)
    assert cells.shape == (1, 6, 6)  # corners 0, 3, ..., 15
    for i in range(6):
        for j in range(6):
            assert cells[0, i, j] == scores[0, 3 * i, 3 * j]


@pytest.mark.parametrize("channels", [[4, 8], []], ids=["unet", "placement_term_only"])
def test_worker_trains_on_the_value_it_acts_on(channels):
    """Q_w over every placement (acting) equals Q_w of one placement (training), for every
    corner, orientation and env: one value, at the exact cell."""
    env, agent, _ = make(worker=dict(channels=channels, corner_features=True))
    td = played(env, agent)
    geom = agent.geom
    pid = td["items"].gather(1, td["candidates"][:, :1]).squeeze(1)
    with torch.no_grad():
        q, legal = worker_q(agent.worker, geom, td["heightmap"], pid, agent.worker_chunk)
        assert q.shape == (4, 24, geom.corners, geom.corners)
        g = geom.corners
        for ori, ix, iy in [(0, 0, 0), (5, 3, 7), (23, g - 1, g - 1), (11, g - 1, 0)]:
            full = torch.full((4,), ori), torch.full((4,), ix), torch.full((4,), iy)
            one = worker_q_at(agent.worker, geom, td["heightmap"], pid, *full)
            torch.testing.assert_close(one, q[:, ori, ix, iy], rtol=1e-5, atol=1e-5)
    # the legal mask is the env's own
    _, env_legal, _ = worker_maps(geom, td["heightmap"], pid)
    assert torch.equal(legal, env_legal)


def test_greedy_policy_is_the_greedy_slot_then_the_greedy_placement():
    """The two levels tools/eval_packing.py splits (greedy_slot, greedy_placement) make up
    the greedy policy exactly; and the heuristic places the manager's slot the way it
    places its own slot 0."""
    env, agent, _ = make()
    td = played(env, agent)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        full = agent.policy(td.clone())["action"]
        slot = agent.policy.greedy_slot(td)
        assert torch.equal(agent.policy.greedy_placement(td.clone(), slot)["action"], full)
    heuristic = HeuristicPolicy(agent.geom)
    zero = torch.zeros_like(slot)
    assert torch.equal(heuristic.place(td.clone(), zero)["action"], heuristic(td.clone())["action"])
    placed = heuristic.place(td.clone(), slot)["action"]
    assert torch.equal(placed[:, 0], slot)


def test_joint_masked_argmax_over_orientations_and_corners():
    g = 3
    q = torch.zeros(2, 24, g, g)
    legal = torch.zeros(2, 24, g, g, dtype=torch.bool)
    q[0, 7, 2, 1] = 9.0  # the best, but illegal
    q[0, 20, 0, 2] = 5.0
    legal[0, 20, 0, 2] = legal[0, 3, 1, 1] = True
    q[1] = -10.0  # every legal value negative: the largest legal one wins over 0s
    q[1, 2, 1, 0], q[1, 4, 2, 2] = -1.0, -3.0
    legal[1, 2, 1, 0] = legal[1, 4, 2, 2] = True
    ori, ix, iy = joint_argmax(q, legal)
    assert ori.tolist() == [20, 2] and ix.tolist() == [0, 1] and iy.tolist() == [2, 0]
    flat = torch.tensor([20 * g * g + 0 * g + 2])
    assert [t.item() for t in decode(flat, g)] == [20, 0, 2]


# -- Double DQN targets ---------------------------------------------------------------------
def sampled_batch(env, agent, progress, steps=6, batch_size=16):
    info = env_info(env)
    collector = make_collector(env, agent.policy, info, steps * env.num_envs, progress)
    replay = DeviceReplay(
        agent.replay_spec(), info, agent.policy.in_keys, 1000, batch_size, env.device
    )
    rollout = collector.rollout()
    replay.extend(rollout)
    return rollout, replay, replay.sample(progress)


def test_targets_at_both_levels_with_the_next_state_masks():
    env, agent, progress = make()
    _, _, batch = sampled_batch(env, agent, progress)
    with torch.no_grad():  # targets differ from online networks
        for p in (*agent.manager_target.parameters(), *agent.worker_target.parameters()):
            p.add_(0.3 * torch.randn_like(p))
    t_m, t_w = agent.targets(batch)
    geom, nxt = agent.geom, batch["next"]
    hm, mask = nxt["heightmap"], nxt["candidate_mask"]
    pool_c = nxt["items"].gather(1, nxt["candidates"])
    with torch.no_grad():
        feats = nxt["candidate_features"]
        on_m = manager_q(agent.manager, geom, hm, pool_c, feats, 100)
        tg_m = manager_q(agent.manager_target, geom, hm, pool_c, feats, 100)
        ref_m, ref_w = [], []
        for i in range(hm.shape[0]):
            legal_slots = mask[i].nonzero().flatten()
            if len(legal_slots) == 0:
                ref_m.append(0.0)
                ref_w.append(0.0)
                continue
            a = legal_slots[on_m[i, legal_slots].argmax()]
            ref_m.append(float(tg_m[i, a]))
            pid = pool_c[i, a].view(1)
            on_w, legal = worker_q(agent.worker, geom, hm[i : i + 1], pid, 24)
            tg_w, _ = worker_q(agent.worker_target, geom, hm[i : i + 1], pid, 24)
            if not legal.any():
                ref_w.append(0.0)
                continue
            flat = on_w.flatten()[legal.flatten()].argmax()
            ref_w.append(float(tg_w.flatten()[legal.flatten()][flat]))
    ref_m, ref_w = torch.tensor(ref_m), torch.tensor(ref_w)
    expect_m = batch["reward"] + batch["discount"] * ref_m
    expect_w = batch["reward"] + batch["discount"] * ref_w
    torch.testing.assert_close(t_m, expect_m, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(t_w, expect_w, rtol=1e-5, atol=1e-5)


def test_manager_learns_on_the_taken_slot_alone():
    """The manager's loss runs the ResNet over the taken candidate only: its Q, its
    gradients and the update's q_manager equal those of the full pass over all K."""
    env, agent, progress = make()
    _, _, batch = sampled_batch(env, agent, progress)
    geom, hm, feats = agent.geom, batch["heightmap"], batch["candidate_features"]
    pool_c = batch["items"].gather(1, batch["candidates"])
    slot = batch["action"][:, 0].long()
    pid = pool_c.gather(1, slot[:, None])
    params = list(agent.manager.parameters())

    def q_and_grads(q):
        grads = torch.autograd.grad(q.sum(), params)
        return q.detach(), grads

    full, g_full = q_and_grads(
        manager_q(agent.manager, geom, hm, pool_c, feats, 3)[torch.arange(len(slot)), slot]
    )
    picked = feats[torch.arange(len(slot)), slot][:, None]
    one, g_one = q_and_grads(manager_q(agent.manager, geom, hm, pid, picked, 1)[:, 0])
    torch.testing.assert_close(one, full, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_one, g_full, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    metrics = agent.update(batch, agent.progress)
    torch.testing.assert_close(metrics["q_manager"], full.mean(), rtol=1e-5, atol=1e-5)


def test_terminal_transitions_bootstrap_nothing():
    env, agent, progress = make()
    _, _, batch = sampled_batch(env, agent, progress)
    batch["discount"].zero_()
    t_m, t_w = agent.targets(batch)
    assert torch.equal(t_m, batch["reward"]) and torch.equal(t_w, batch["reward"])


# -- replay: the compact state and maps rebuilt at sample time -------------------------------
def test_replay_keeps_the_compact_state_and_rebuilds_the_acting_maps():
    env, agent, progress = make(num_envs=2)
    rollout, replay, _ = sampled_batch(env, agent, progress, steps=5, batch_size=8)
    assert replay.data[("obs", "heightmap")].dtype == torch.float16
    assert ("obs", "maps") not in replay.data  # no R x R map stacks stored
    stored = sum(v.numel() * v.element_size() for v in replay.data.values()) / replay.capacity
    maps = 24 * 3 * 16 * 16 * 4 + 4 * 7 * 16 * 16 * 4  # a state's worker + manager maps, fp32
    assert stored < maps / 10  # a transition (state and next state) is under a tenth of one
    geom = agent.geom
    # every stored row, sampled back: the maps equal those the policy saw when acting
    # (from the float16 heightmap: the acting heightmap rounded as stored)
    index = torch.arange(10)
    row, stream = index // 2, index % 2
    batch = replay.sample(progress)  # a sample is in the env's dtypes
    assert batch["heightmap"].dtype == torch.float32
    for r, s in zip(row.tolist(), stream.tolist(), strict=True):
        hm_act = rollout["heightmap"][r, s : s + 1]
        hm_back = replay._restore(("heightmap",), replay.data[("obs", "heightmap")][r, s : s + 1])
        torch.testing.assert_close(hm_back, hm_act.half().float())
        torch.testing.assert_close(hm_back, hm_act, atol=1e-4, rtol=1e-3)
        slot, ori = rollout["action"][r, s, 0], rollout["action"][r, s, 1]
        cand = replay.data[("obs", "candidates")][r, s]
        items = replay.data[("obs", "items")][r, s]
        pid = items[cand[slot]].view(1)
        acted = orientation_maps(geom, hm_act.half().float(), pid, ori.view(1, 1))
        rebuilt = orientation_maps(geom, hm_back, pid, ori.view(1, 1))
        assert torch.equal(acted, rebuilt)
        assert torch.equal(cand, rollout["candidates"][r, s])


def test_replay_state_keeps_the_env_dtypes():
    env, agent, progress = make(num_envs=2)
    _, replay, _ = sampled_batch(env, agent, progress, steps=3, batch_size=4)
    fresh = DeviceReplay(agent.replay_spec(), env_info(env), agent.policy.in_keys, 1000, 4, "cpu")
    fresh.load_state_dict(replay.state_dict())
    assert fresh.sample(progress)["heightmap"].dtype == torch.float32


# -- schedules, stages, candidate mask ------------------------------------------------------
def test_epsilon_stage_and_target_schedules_follow_episode_rounds():
    env, agent, progress = make(num_envs=1, random_frames=5)
    sched = agent.schedule
    assert float(sched.epsilon(progress)) == 1.0  # random frames first
    progress.frames.fill_(5)
    for ep in (0, 60, 150):
        progress.episodes.fill_(ep)
        assert float(sched.epsilon(progress)) == pytest.approx(0.1 + 0.8 * math.exp(-ep / 60))
    progress.episodes.fill_(99)
    assert not sched.stage2(progress) and not sched.manager_turn(progress)
    turns = []
    for ep in range(100, 108):
        progress.episodes.fill_(ep)
        assert sched.stage2(progress)
        turns.append(bool(sched.manager_turn(progress)))
    assert turns == [True, False, False, False, True, False, False, False]
    progress.episodes.fill_(14)
    assert float(sched.target_round(progress)) == 2.0
    # with 4 envs an episode round is 4 episodes
    _, agent4, progress4 = make(num_envs=4)
    progress4.episodes.fill_(400)
    assert agent4.schedule.stage2(progress4)
    progress4.episodes.fill_(399)
    assert not agent4.schedule.stage2(progress4)


def same(a, b) -> bool:
    """Every parameter equal: a, b are modules or lists of tensors."""
    a = list(a.parameters()) if hasattr(a, "parameters") else a
    b = list(b.parameters()) if hasattr(b, "parameters") else b
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_stage_one_trains_the_worker_only_then_both_with_the_lower_lr():
    env, agent, progress = make()
    _, _, batch = sampled_batch(env, agent, progress)
    manager0 = [p.clone() for p in agent.manager.parameters()]
    worker0 = [p.clone() for p in agent.worker.parameters()]
    agent.update(batch, progress)  # episode round 0: stage 1
    assert same(manager0, agent.manager)
    assert not same(worker0, agent.worker)
    assert float(agent.worker_lr) == pytest.approx(1e-3)
    progress.episodes.fill_(4 * 100)  # round 100: stage 2, a manager turn
    agent.update(batch, progress)
    assert float(agent.worker_lr) == pytest.approx(1e-4)
    assert float(agent.manager_lr) == pytest.approx(1e-4)
    assert not same(manager0, agent.manager)
    progress.episodes.fill_(4 * 101)  # not a manager turn
    before = [p.clone() for p in agent.manager.parameters()]
    agent.update(batch, progress)
    assert float(agent.manager_lr) == 0.0
    assert same(before, agent.manager)


def test_hard_target_copies_every_target_every_rounds():
    env, agent, progress = make()
    _, _, batch = sampled_batch(env, agent, progress)
    agent.update(batch, progress)  # round 0: nothing due yet
    assert not same(agent.worker, agent.worker_target)
    progress.episodes.fill_(4 * 5)  # round 5: a copy is due
    agent.update(batch, progress)
    assert same(agent.worker, agent.worker_target)
    assert same(agent.manager, agent.manager_target)
    agent.update(batch, progress)  # still round 5: no second copy
    assert not same(agent.worker, agent.worker_target)


def test_manager_never_picks_an_invalid_candidate():
    env, agent, progress = make()
    td = played(env, agent)
    mask = torch.tensor([[False, True, False, False]] * 4)
    td["candidate_mask"] = mask
    with torch.no_grad():
        for p in agent.manager.head[-1].parameters():
            p.zero_()
        agent.manager.head[-1].bias.fill_(1.0)  # every candidate scores the same
        agent.manager.head[-1].weight[:] = 0.0
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert agent.policy(td.clone())["action"][:, 0].tolist() == [1] * 4
    progress.episodes.fill_(4 * 1000)  # stage 2, epsilon near its floor
    for _ in range(5):  # exploring: random slots come from the valid ones too
        assert agent.policy(td.clone())["action"][:, 0].tolist() == [1] * 4


def test_heuristic_item_orders():
    mask = torch.tensor([[True, True, True, False]] * 4)
    # scalars: dx/L, dy/W, dz/H per candidate; candidate 2 is the flattest
    scalars = torch.zeros(4, 4, 8)
    scalars[:, :, 0] = torch.tensor([0.5, 0.4, 0.4, 0.9])
    scalars[:, :, 1] = torch.tensor([0.5, 0.4, 0.4, 0.9])
    scalars[:, :, 2] = torch.tensor([0.5, 0.4, 0.1, 0.0])
    rule = torch.tensor([0, 1, 3, 2])
    slot = heuristic_slot(mask, scalars, rule)
    assert slot[:3].tolist() == [0, 2, 2]  # largest, smallest (last valid), flattest
    assert mask[3, slot[3]]  # random: a valid one


def test_exploring_actions_are_legal_placements():
    env, agent, progress = make()
    td = played(env, agent)
    progress.frames.fill_(0)
    for _ in range(4):
        action = agent.policy(td.clone())["action"]
        slot, ori, ix, iy = action.unbind(-1)
        pid = td["items"].gather(1, td["candidates"].gather(1, slot[:, None])).squeeze(1)
        _, legal = agent.geom.placement(td["heightmap"], pid)
        assert legal[torch.arange(4), ori, ix, iy].all() | ~legal.flatten(1).any(1).all()


def test_hrl_dqn_needs_the_packing_env():
    from gpurl.envs.cartpole import CartPoleEnv

    env = CartPoleEnv(num_envs=2)
    with pytest.raises(ConfigError, match="env=packing"):
        make_agent(agent_cfg(), env_info(env), Progress())


@pytest.mark.skipif(
    not bf16_supported(torch.device("cpu")),
    reason="this CPU has no native bf16 (AVX-512 BF16 / AMX)",
)
def test_bf16_forward_passes_on_a_cpu_with_bf16_kernels():
    """agent.bf16 on such a CPU: acting and the targets run in bf16, within bf16's
    precision of fp32; an update still steps fp32 weights with finite losses."""
    env, agent, progress = make(bf16=True)
    assert agent.bf16
    td = played(env, agent)
    geom, hm = agent.geom, td["heightmap"]
    pool_c = td["items"].gather(1, td["candidates"])
    feats = td["candidate_features"]
    with torch.no_grad():
        q32 = manager_q(agent.manager, geom, hm, pool_c, feats, 4)
        w32, _ = worker_q(agent.worker, geom, hm, pool_c[:, 0], 6)
        with agent.autocast():
            q16 = manager_q(agent.manager, geom, hm, pool_c, feats, 4)
            w16, _ = worker_q(agent.worker, geom, hm, pool_c[:, 0], 6)
    assert q16.dtype == torch.bfloat16
    torch.testing.assert_close(q16.float(), q32, rtol=0.03, atol=0.03)
    torch.testing.assert_close(w16.float(), w32, rtol=0.03, atol=0.03)
    _, _, batch = sampled_batch(env, agent, progress)
    metrics = agent.update(batch, agent.progress)
    assert torch.isfinite(metrics["loss_worker"]) and torch.isfinite(metrics["loss_manager"])
    assert all(p.dtype == torch.float32 for p in agent.worker.parameters())


def test_bf16_is_off_where_the_device_has_no_fast_bf16(monkeypatch):
    """On a device without bf16 kernels agent.bf16 stays off: fp32 forward passes."""
    monkeypatch.setattr("gpurl.agents.hrl_dqn.bf16_supported", lambda device: False)
    _, agent, _ = make(bf16=True)
    assert not agent.bf16
    with agent.autocast():
        assert not torch.is_autocast_enabled("cpu")


def test_full_size_networks_match_the_spec():
    from gpurl.policies.packing import ManagerNet

    manager = sum(p.numel() for p in ManagerNet().parameters())
    worker = sum(p.numel() for p in WorkerUNet(corner_features=False).parameters())
    assert 11.0e6 < manager < 11.6e6  # "about 11.3M"
    assert 1.85e6 < worker < 1.95e6  # "about 1.9M"
    # the head reads 512 trunk + 64 scalar features
    assert ManagerNet().head[0].in_features == 576


# -- the hot path ---------------------------------------------------------------------------
@pytest.mark.slow  # builds a trainer and runs 40 updates: 5-11 s
def test_hrl_training_iterations_read_nothing_on_the_host(tmp_path):
    cfg = load_config(
        [
            *SMALL_PACKING,
            "env.eval_envs=2",
            "trainer.init_random_frames=16",
            "trainer.utd=1",
            "trainer.buffer_size=500",
        ]
    )
    trainer = build(cfg, tmp_path)
    assert_iterations_read_nothing(trainer, warmup=3, steps=2)


def test_sample_is_a_tensordict_of_the_compact_state():
    env, agent, progress = make(num_envs=2)
    _, _, batch = sampled_batch(env, agent, progress, steps=3, batch_size=4)
    assert isinstance(batch, TensorDict)
    assert set(batch.keys()) >= {"heightmap", "items", "candidates", "action", "next"}
    assert batch["action"].shape == (4, 4)


# -- compile --------------------------------------------------------------------------------
def small_trainer(tmp_path, *extra):
    torch.manual_seed(0)
    cfg = load_config([*SMALL_PACKING, "logger=none", "trainer.init_random_frames=1000000", *extra])
    return build(cfg, tmp_path)


@pytest.mark.slow  # compiling both levels' update on 2 cores: about 95 s
def test_compiled_update_matches_eager(tmp_path):
    """compile.update compiles learn (both levels' losses and optimizer steps): three
    updates give eager's losses and weights to float rounding."""
    eager = small_trainer(tmp_path / "eager")
    compiled = small_trainer(tmp_path / "compiled", "compile.update=true")
    batch = training_batch(eager)
    progress = eager.agent.progress  # the same schedules for both
    runs = []
    for tr in (eager, compiled):
        torch.manual_seed(1)
        runs.append([tr.agent.update(batch.clone(), progress) for _ in range(3)])
    for a, b in zip(*runs, strict=True):
        for key in ("loss_worker", "loss_manager", "q_worker", "q_manager"):
            torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-4)
    for name in ("worker", "manager", "worker_target", "manager_target"):
        theirs = getattr(compiled.agent, name).state_dict()
        for k, v in getattr(eager.agent, name).state_dict().items():
            torch.testing.assert_close(theirs[k], v, rtol=1e-4, atol=1e-4, msg=f"{name}.{k}")


def test_compile_policy_is_refused_in_one_line(tmp_path):
    """HRLPolicy reads the progress record's episodes, which the traced policy does not
    carry: compile.policy is refused with a one-line fix; compile.update alone builds."""
    with pytest.raises(ConfigError, match="compile.policy=false") as err:
        small_trainer(tmp_path / "policy", "compile.policy=true")
    assert "\n" not in str(err.value)
    agent = small_trainer(tmp_path / "update", "compile.update=true").agent
    assert agent.learn_step != agent.learn  # the compiled step, not the method itself
