"""MarineNav as an env: stops and done flags, resets, specs, evaluation set, host reads."""

import math

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv
from gpurl.envs.marinenav.curriculum import (
    CURRICULUM,
    Stage,
    parse_curriculum,
    stage_at,
    stage_table,
)
from gpurl.envs.marinenav.dynamics import GOAL_RADIUS, ROBOT_RADIUS
from gpurl.envs.marinenav.env import make_eval_env
from gpurl.envs.marinenav.evaluation import evaluation_scenarios, run_episodes
from gpurl.envs.marinenav.scripted import RandomPolicy, ScriptedPolicy
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads
from tests.conftest import devices

SMALL = {"pool_size": 64, "pool_refresh": 16}


def _scenario(n=1, r=5, k=4):
    """Hand-built scenario: robot 0 starts 1.5 m from its goal, robots 1 and 2 start
    4 m apart (they collide at once), robot 3 is alone in open water, slot 4 unused."""
    start = torch.tensor([[10.0, 10.0], [30.0, 30.0], [30.0, 34.0], [45.0, 5.0], [0.0, 0.0]])
    goal = torch.tensor([[11.5, 10.0], [50.0, 50.0], [5.0, 50.0], [5.0, 45.0], [0.0, 0.0]])
    sc = {
        "start": start.expand(n, r, 2).clone(),
        "goal": goal.expand(n, r, 2).clone(),
        "yaw": torch.zeros(n, r),
        "robot_active": torch.tensor([True, True, True, True, False]).expand(n, r).clone(),
        "obstacle": torch.tensor([[20.0, 45.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
        .expand(n, k, 2)
        .clone(),
        "obstacle_radius": torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(n, k).clone(),
        "obstacle_valid": torch.tensor([True, False, False, False]).expand(n, k).clone(),
        "core": torch.zeros(n, 0, 2),
        "core_gamma": torch.zeros(n, 0),
        "stage": torch.full((n,), 5),
    }
    return sc


def test_collision_and_arrival_stop_robots_and_terminate_their_transition():
    env = MarineNavEnv(num_envs=1, stage=5, **SMALL)
    env.load_scenarios(_scenario())
    td = env._reset(None)  # fresh episode, then put the hand-built one back
    env.load_scenarios(_scenario())
    td = env._observation_td()
    assert td["agents", "running"].tolist() == [[True, True, True, True, False]]
    td.set(("agents", "action"), torch.zeros(1, 5, dtype=torch.long))
    out = env.step(td)["next"]
    a = out["agents"]
    assert a["terminated"][0, :, 0].tolist() == [True, True, True, False, False]
    assert a["truncated"][0, :, 0].tolist() == [False] * 5
    assert a["done"][0, :, 0].tolist() == [True, True, True, False, False]
    assert a["running"][0].tolist() == [False, False, False, True, False]
    rew = a["reward"][0, :, 0]
    assert rew[0].item() == pytest.approx(-0.1 + 10.0, abs=1e-3)  # at rest: no progress
    assert rew[1].item() == pytest.approx(-0.1 - 5.0, abs=1e-3)
    assert rew[2].item() == pytest.approx(-0.1 - 5.0, abs=1e-3)
    assert rew[4].item() == 0.0
    assert out["reward"].item() == pytest.approx(rew.sum().item(), abs=1e-4)
    assert env.arrived[0].tolist() == [True, False, False, False, False]
    assert env.collided[0].tolist() == [False, True, True, False, False]
    # the env goes on while robot 3 runs; stopped robots are frozen and reward 0
    assert not out["done"].item()
    frozen = env.x[0, :3].clone()
    for _ in range(3):
        td = out.clone()
        td.set(("agents", "action"), torch.full((1, 5), 24))
        out = env.step(td)["next"]
        assert out["agents", "reward"][0, :3].abs().sum().item() == 0.0
        assert not out["agents", "done"][0, :3].any()  # set once, on the stop transition
    assert torch.equal(env.x[0, :3], frozen)
    assert env.x[0, 3].item() != 45.0
    # stopped robots vanish: robot 3 sees none of robots 0, 1, 2 (all within 20 m of
    # nothing but each other here, so check robot 1's slot from robot 0's view instead)
    objs = out["agents", "objects"][0, 3]
    mask = out["agents", "objects_mask"][0, 3]
    assert mask.sum().item() == 0 or (objs[mask][:, 4] < ROBOT_RADIUS * 0.6).all()


def test_env_done_only_when_all_robots_stopped_and_timeout_truncates():
    env = MarineNavEnv(num_envs=2, stage=5, max_episode_steps=4, **SMALL)
    sc = _scenario(2)
    # env 1: robot 3 also starts next to its goal, so every robot stops at once
    sc["goal"][1, 3] = sc["start"][1, 3] + torch.tensor([0.0, GOAL_RADIUS - 0.5])
    env.load_scenarios(sc)
    action = torch.zeros(2, 5, dtype=torch.long)
    nxt, obs = env.lean_step(action)
    assert nxt["done"][:, 0].tolist() == [False, True]
    assert nxt["terminated"][:, 0].tolist() == [False, True]
    assert nxt["truncated"][:, 0].tolist() == [False, False]
    # env 1 was reset under the mask: all its robots run again in a fresh scenario
    assert obs["agents", "running"][1].sum().item() >= 3
    assert env.steps.tolist() == [1, 0]
    for _ in range(3):
        nxt, obs = env.lean_step(action)
    # env 0 times out at step 4 with robot 3 still running: truncated, not terminated
    assert nxt["truncated"][0, 0].item() and not nxt["terminated"][0, 0].item()
    assert nxt["done"][0, 0].item()
    assert nxt["agents", "truncated"][0, :, 0].tolist() == [False, False, False, True, False]
    assert env.steps[0].item() == 0  # reset


def test_lean_step_obs_is_next_obs_where_not_done():
    env = MarineNavEnv(num_envs=3, stage=5, **SMALL)
    env.lean_reset()
    a = torch.randint(25, (3, 5), generator=torch.Generator().manual_seed(0))
    nxt, obs = env.lean_step(a)
    keep = ~nxt["done"][:, 0]
    for key in ("self_state", "objects", "objects_mask", "running"):
        assert torch.equal(nxt["agents", key][keep], obs["agents", key][keep])


def test_partial_reset_leaves_other_envs_untouched():
    env = MarineNavEnv(num_envs=4, stage=3, **SMALL)
    td = env.reset()
    for _ in range(3):
        td = env.rand_step(td)
        td = td["next"].clone()
    before = {k: getattr(env, k).clone() for k in ("x", "y", "yaw", "vx", "goal", "steps")}
    reset = torch.tensor([[True], [False], [True], [False]])
    td.set("_reset", reset)
    out = env.reset(td)
    for k, v in before.items():
        now = getattr(env, k)
        assert torch.equal(now[1], v[1]) and torch.equal(now[3], v[3]), k
    assert env.steps.tolist() == [0, 3, 0, 3]
    assert not torch.equal(env.goal[0], before["goal"][0])
    assert torch.equal(out["agents", "self_state"][1], td["agents", "self_state"][1])


def test_resets_draw_distinct_pool_entries_from_random_windows():
    env = MarineNavEnv(num_envs=8, stage=5, seed=1, pool_size=32, pool_refresh_every=1000)
    goals = env.pool["goal"]
    starts = set()
    for _ in range(40):
        drawn = env._reset_where(torch.ones(8, dtype=torch.bool))
        # every env takes its own pool entry: a window of 8 consecutive entries
        hits = (drawn["goal"].unsqueeze(1) == goals.unsqueeze(0)).flatten(2).all(-1)
        rows = hits.float().argmax(1)
        assert hits.any(1).all() and rows.unique().numel() == 8
        assert torch.equal(rows, rows[0] + torch.arange(8))
        starts.add(rows[0].item())
    assert len(starts) > 10  # the window moves: offsets drawn over [0, 24]
    # the host draws follow the env's seed
    env.set_seed(5)
    first = env._reset_where(torch.ones(8, dtype=torch.bool))["goal"].clone()
    env.set_seed(5)
    assert torch.equal(env._reset_where(torch.ones(8, dtype=torch.bool))["goal"], first)
    with pytest.raises(ConfigError, match="pool_size"):
        MarineNavEnv(num_envs=8, pool_size=4)


@pytest.mark.parametrize("cls", [MarineNavEnv, MarineNavContinuousEnv])
def test_check_env_specs_and_shapes(cls):
    env = cls(num_envs=3, stage=4, **SMALL)
    check_env_specs(env)
    td = env.rollout(5, break_when_any_done=False)
    assert td["agents", "self_state"].shape == (3, 5, 5, 7)
    assert td["agents", "objects"].shape == (3, 5, 5, 5, 5)
    assert td["agents", "objects_mask"].shape == (3, 5, 5, 5)
    shape = (3, 5, 5, 2) if cls.continuous else (3, 5, 5)
    assert td["agents", "action"].shape == shape
    assert td["next", "agents", "reward"].shape == (3, 5, 5, 1)
    assert td["next", "done"].shape == (3, 5, 1)


def test_make_env_registry_and_config_errors():
    env = make_env({"name": "marinenav", "num_envs": 2, "stage": 1, **SMALL})
    assert isinstance(env, MarineNavEnv) and env.robot_active.sum(-1).tolist() == [4, 4]
    env = make_env({"name": "marinenav_continuous", "num_envs": 1, **SMALL})
    assert env.continuous
    with pytest.raises(ConfigError):
        MarineNavEnv(num_envs=1, stage=6)
    with pytest.raises(ConfigError):
        MarineNavEnv(num_envs=1, max_robots=4)


def test_curriculum_stage_follows_global_step():
    t = stage_table()
    steps = torch.tensor([0, 999_999, 1_000_000, 2_500_000, 5_000_000, 9_000_000])
    assert stage_at(steps, t["from_step"]).tolist() == [0, 0, 1, 2, 5, 5]
    env = MarineNavEnv(num_envs=8, stage=0, pool_size=16, pool_refresh=16, pool_refresh_every=1)
    assert env.robot_active.sum(-1).max().item() == 3
    env.set_global_step(torch.tensor(4_200_000))
    assert env.stage.item() == 4
    env.lean_step(torch.zeros(8, 5, dtype=torch.long))  # refreshes the whole (tiny) pool
    assert (env.pool["robot_active"].sum(-1) == 5).all()
    assert (env.pool["obstacle_valid"].sum(-1) == 3).all()


def test_curriculum_host_step_and_starting_stage():
    env = MarineNavEnv(num_envs=4, stage=0, **SMALL)
    # the trainer passes its frame count as a host int: same stages, no tensor per call
    for step, stage in [(0, 0), (999_999, 0), (1_000_000, 1), (4_999_999, 4), (7_000_000, 5)]:
        env.set_global_step(step)
        assert env.stage.item() == stage
    # an env built at stage 2 starts the curriculum there: global step 0 is 2M
    env = MarineNavEnv(num_envs=4, stage=2, **SMALL)
    env.set_global_step(0)
    assert env.stage.item() == 2
    env.set_global_step(1_000_000)
    assert env.stage.item() == 3
    env.set_global_step(torch.tensor(1_000_000))
    assert env.stage.item() == 3


CUSTOM = [
    {"from_step": 0, "robots": 2, "obstacles": 1, "min_start_goal_dis": 20.0},
    {"from_step": 500, "robots": 4, "obstacles": 3, "min_start_goal_dis": 25.0},
]


def test_curriculum_from_config_rows():
    env = MarineNavEnv(num_envs=6, curriculum=CUSTOM, **SMALL)
    assert env.curriculum == (Stage(0, 2, 1, 20.0), Stage(500, 4, 3, 25.0))
    assert env.robot_active.sum(-1).tolist() == [2] * 6
    assert env.obstacle_valid.sum(-1).tolist() == [1] * 6
    env.set_global_step(499)
    assert env.stage.item() == 0
    env.set_global_step(500)
    env._fill_pool(0, env.pool_size)  # what the chunked refresh does over time
    env.lean_reset()
    assert env.robot_active.sum(-1).tolist() == [4] * 6
    assert env.obstacle_valid.sum(-1).tolist() == [3] * 6
    # the evaluation set follows the curriculum: 10 episodes per stage
    sc = evaluation_scenarios(curriculum=env.curriculum)
    assert sc["stage"].tolist() == [0] * 10 + [1] * 10
    assert sc["robot_active"].sum(-1).tolist() == [2] * 10 + [4] * 10
    assert make_eval_env(curriculum=CUSTOM).num_envs == 20
    # the default config carries the paper's table
    from gpurl.train import load_config

    rows = load_config(["env=marinenav_continuous"]).env.curriculum
    assert parse_curriculum(rows) == CURRICULUM


@pytest.mark.parametrize(
    "rows, message",
    [
        ([], "non-empty list"),
        ({"from_step": 0}, "non-empty list"),
        ([{"from_step": 0, "robots": 3}], r"curriculum\[0\] needs exactly the keys"),
        ([{**CUSTOM[0], "from_step": 10}], r"curriculum\[0\].from_step must be 0"),
        ([CUSTOM[0], {**CUSTOM[1], "from_step": 0}], "must increase"),
        ([{**CUSTOM[0], "robots": 0}], "robots must be >= 1"),
        ([{**CUSTOM[0], "min_start_goal_dis": 80.0}], "min_start_goal_dis must be in"),
    ],
)
def test_curriculum_rows_are_checked(rows, message):
    with pytest.raises(ConfigError, match=message):
        parse_curriculum(rows)
    with pytest.raises(ConfigError, match="max_robots >= 6"):
        MarineNavEnv(num_envs=1, curriculum=[{**CUSTOM[0], "robots": 6}])
    with pytest.raises(ConfigError, match=r"env.stage must be in \[0, 2\)"):
        MarineNavEnv(num_envs=1, stage=2, curriculum=CUSTOM)


def test_evaluation_set_is_fixed_and_valid():
    a, b = evaluation_scenarios(), evaluation_scenarios()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert a["stage"].tolist() == [s for s in range(6) for _ in range(10)]
    for i in range(60):
        st = CURRICULUM[int(a["stage"][i])]
        act = a["robot_active"][i]
        assert act.sum().item() == st.robots
        s, g = a["start"][i][act], a["goal"][i][act]
        assert ((s - g).norm(dim=-1) >= st.min_start_goal_dis).all()
        off = ~torch.eye(st.robots, dtype=torch.bool)
        assert (torch.cdist(s, s)[off] > 10).all() and (torch.cdist(g, g)[off] > 10).all()
        assert ((s >= 2) & (s <= 53)).all() and ((g >= 2) & (g <= 53)).all()
        valid = a["obstacle_valid"][i]
        assert valid.sum().item() == st.obstacles
        o = a["obstacle"][i][valid]
        if len(o):
            assert (torch.cdist(o, torch.cat((s, g))) >= 11).all()
            assert ((o >= 5) & (o <= 50)).all()
            offo = ~torch.eye(len(o), dtype=torch.bool)
            assert (torch.cdist(o, o)[offo] > 2).all()
    assert (a["yaw"] >= 0).all() and (a["yaw"] < 2 * math.pi).all()


def test_scripted_policy_beats_random_on_stage_0():
    sc = evaluation_scenarios()
    sub = {k: v[:2] for k, v in sc.items()}
    env = MarineNavEnv(num_envs=2, max_episode_steps=90, **SMALL)
    scripted = run_episodes(env, ScriptedPolicy(), sub, check_every=10)
    arrived_scripted = env.arrived.sum().item()
    rnd = run_episodes(env, RandomPolicy(), sub, check_every=10)
    arrived_random = env.arrived.sum().item()
    assert arrived_scripted > arrived_random
    assert scripted["collisions"].sum() <= rnd["collisions"].sum() + arrived_scripted
    cont = MarineNavContinuousEnv(num_envs=2, max_episode_steps=90, **SMALL)
    run_episodes(cont, ScriptedPolicy(continuous=True), sub, check_every=10)
    assert cont.arrived.sum().item() > arrived_random


@pytest.mark.parametrize("device", devices())
def test_no_host_reads_during_lean_step(device):
    env = MarineNavEnv(
        num_envs=4, stage=3, device=device, max_episode_steps=5, pool_refresh_every=3, **SMALL
    )
    env.lean_reset()
    a = torch.zeros(4, 5, dtype=torch.long, device=device)
    env.lean_step(a)
    refreshes = env.pool_refreshes
    with count_host_reads() as reads:
        for t in range(10):  # crosses timeout resets and pool refreshes
            env.set_global_step(t * 600_000)  # as the trainer does: stages 3, 4, 5
            env.lean_step(a)
        env.set_global_step(torch.tensor(3_000_000, device=device))
        env.lean_step(a)
    assert reads.count == 0, reads.report()
    assert env.pool_refreshes >= refreshes + 3


@pytest.mark.slow  # two Inductor compiles of the step: ~45 s each on a 2-core CPU
@pytest.mark.parametrize("noise", [True, False], ids=["noisy", "exact"])
def test_compiled_step_follows_the_eager_env(noise):
    # compile.env: the step's pure part compiled (MarineNavEnv.compile_step); the noise is
    # drawn eagerly from the same generator, so trajectories agree through resets
    def make():
        cfg = {"name": "marinenav", "perception_noise": noise, "max_episode_steps": 30}
        return make_env(cfg, num_envs=8, seed=3)

    eager, compiled = make(), make()
    compiled.compile_step()
    eager.lean_reset(), compiled.lean_reset()
    g = torch.Generator().manual_seed(0)
    shape = eager.full_action_spec[eager.action_key].shape
    resets = 0
    for _ in range(70):  # over two episode limits: resets from the pool on both
        action = torch.randint(0, 25, shape, generator=g)
        (na, oa), (nb, ob) = eager.lean_step(action), compiled.lean_step(action)
        assert torch.equal(na["done"], nb["done"])
        assert torch.equal(na["agents", "terminated"], nb["agents", "terminated"])
        torch.testing.assert_close(na["reward"], nb["reward"], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(
            oa["agents", "objects"], ob["agents", "objects"], rtol=1e-4, atol=1e-4
        )
        resets += int(na["done"].sum())
    assert resets > 0


def test_the_steps_compiled_part_is_pure():
    # compile.env compiles _advance_core: state in, (state, result) out, nothing written
    # to the env (a graph that assigns env.env_state leaves Dynamo a side effect to
    # replay, which broke the state on CUDA with torch 2.11)
    env = make_env({"name": "marinenav", "max_episode_steps": 30}, num_envs=4, seed=3)
    env.lean_reset()
    before = env.env_state
    action = torch.zeros(env.full_action_spec[env.action_key].shape, dtype=torch.int64)
    after, result = env._advance_core(before, action, env._perception_noise(4))
    assert env.env_state is before
    assert type(after) is type(before) and len(after) == len(before)
    assert torch.equal(after.steps, before.steps + 1) and result.reward.shape == (4, 1)


def test_compile_env_compiles_marinenavs_own_step(tmp_path):
    from gpurl.train import build, load_config

    cfg = load_config(["experiment=marinenav_iqn", "compile.env=true", "env.num_envs=4"])
    trainer = build(cfg, str(tmp_path))
    env = trainer.env
    assert trainer.step == env.lean_step  # the collector steps the env itself...
    # ...whose pure part is torch.compile's (compiled on its first call)
    assert hasattr(env._advance_core, "_torchdynamo_orig_callable")
