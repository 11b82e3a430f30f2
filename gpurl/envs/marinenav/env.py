"""MarineNav: batched multi-robot surface-vessel navigation, a TorchRL env on any device.

Batch [num_envs]; robots live in an ("agents", ...) group of max_robots slots. Keys:

    observation  ("agents", "self_state")    [B, R, 7]  goal_x, goal_y, v_x, v_y, r, T_L, T_R
                 ("agents", "objects")       [B, R, 5, 5]
                 ("agents", "objects_mask")  [B, R, 5] bool
                 ("agents", "running")       [B, R] bool: the slot holds a robot that has
                                             not stopped; only these robots act, and only
                                             their transitions are experience
    action       ("agents", "action")        [B, R] in [0, 25), or [B, R, 2] in [-1, 1]
    reward       ("agents", "reward")        [B, R, 1]; root "reward" [B, 1] is the SUM over
                                             the robots that were running
    done flags   ("agents", "done" | "terminated" | "truncated") [B, R, 1]: set on the
                 transition where that robot stops (collision or arrival: terminated) or
                 where the env times out while it still runs (truncated); False otherwise.
                 Root "done" | "terminated" | "truncated" [B, 1]: terminated when every
                 robot of the env stopped, truncated at max_episode_steps.

Robots never restart on their own: a partial reset is per env (root "_reset"); an
("agents", "_reset") entry is ignored.
"""

from __future__ import annotations

import dataclasses
import random

import torch
from torchrl.data import Bounded, Categorical, Composite, Unbounded

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs import draw
from gpurl.envs.base import GroupResult, NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig
from gpurl.envs.marinenav import dynamics as dyn
from gpurl.envs.marinenav.currents import rankine_velocity
from gpurl.envs.marinenav.curriculum import (
    CURRICULUM,
    EVAL_EPISODES_PER_STAGE,
    parse_curriculum,
    stage_at,
    stage_table,
)
from gpurl.envs.marinenav.dynamics import fossen_substeps
from gpurl.envs.marinenav.evaluation import evaluation_scenarios, protocol_metrics, run_episodes
from gpurl.envs.marinenav.perception import (
    MAX_OBJECTS,
    collisions,
    object_offsets,
    perceive_planes,
    planes_to_objects,
    sample_from_table,
    vonmises_quantile_table,
)
from gpurl.envs.marinenav.reward import colregs_planes, step_reward
from gpurl.envs.marinenav.scenario import WORLD_SIZE, sample_scenarios
from gpurl.envs.marinenav.state import (
    MarineNavState,
    empty_state,
    running_robots,
    start_scenarios,
)
from gpurl.errors import ConfigError

SELF_STATE_DIM = 7
OBJECT_DIM = 5


@declare(name="marinenav", num_envs=64)
class MarineNavConfig(EnvConfig):
    """Multi-robot surface-vessel navigation, 25 discrete actions (see
    docs/envs/marinenav.md); env=marinenav_continuous is the same with 2 continuous
    actions in [-1, 1]."""

    obs = "objects"

    eval_envs: int = key(60, "the fixed evaluation set: 10 episodes per curriculum stage", ge=1)
    stage: int = key(0, "initial curriculum stage; the trainer advances it by frames", ge=0)
    max_robots: int = key(5, "robot slots; at least the largest `robots` of the curriculum", ge=1)
    max_obstacles: int = key(
        4, "obstacle slots; at least the largest `obstacles` of the curriculum", ge=0
    )
    num_cores: int = key(0, "Rankine vortex cores (0 in the published runs)", ge=0)
    max_episode_steps: int = key(1000, "steps before an episode is truncated", ge=1)
    perception_noise: bool = key(True, "noisy perception of positions, velocities and angles")
    pool_size: int | None = key(
        None, "autoreset scenario pool; null: max(1024, 2 x num_envs)", ge=1
    )
    pool_refresh: int | None = key(
        None, "pool entries redrawn at a time; null: max(64, num_envs / 8)", ge=1
    )
    pool_refresh_every: int = key(16, "resets between pool refreshes", ge=1)
    candidates: int = key(128, "proposals per slot in the scenarios' rejection sampling", ge=1)
    curriculum: list[dict] = key(
        [dataclasses.asdict(stage) for stage in CURRICULUM],
        "stages by global step: rows {from_step, robots, obstacles, min_start_goal_dis}",
        nonempty=True,
        note=(
            "Stages by global step (the trainer's frames: one frame = one step of one env). The",
            "paper's schedule over 6M steps; override the whole list to change it, e.g.",
            "'env.curriculum=[{from_step:0,robots:3,obstacles:0,min_start_goal_dis:30}]'.",
        ),
    )


@register("env", "marinenav", MarineNavConfig)
class MarineNavEnv(state_attributes(MarineNavState), NativeEnv):
    """Discrete-action MarineNav (25 actions); see the module docstring for the layout."""

    continuous = False
    #: a robot slot's transition counts only while the robot runs (EnvInfo.valid_key)
    valid_key = ("agents", "running")
    #: typical magnitudes the agents' encoders divide by (EnvInfo.obs_scales): positions
    #: by the 20 m perception range, speeds by 3 m/s (top speed about 3.3), the yaw rate
    #: by 1 rad/s, thrusts by 1000 N, the observed radius by 3 m. The env itself emits
    #: physical units (the scripted policy reads them).
    observation_scales = {
        ("agents", "self_state"): (20.0, 20.0, 3.0, 3.0, 1.0, 1000.0, 1000.0),
        ("agents", "objects"): (20.0, 20.0, 3.0, 3.0, 3.0),
    }
    group_key = "agents"

    def __init__(
        self,
        num_envs: int = 1,
        device="cpu",
        seed: int = 0,
        stage: int = 0,
        max_robots: int = 5,
        max_obstacles: int = 4,
        num_cores: int = 0,
        max_episode_steps: int = 1000,
        perception_noise: bool = True,
        pool_size: int | None = None,
        pool_refresh: int | None = None,
        pool_refresh_every: int = 16,
        candidates: int = 128,
        curriculum=None,
    ):
        super().__init__(num_envs, device, seed)
        self.curriculum = parse_curriculum(curriculum)
        self._check_stage(stage)
        need_r = max(s.robots for s in self.curriculum)
        need_k = max(s.obstacles for s in self.curriculum)
        if max_robots < need_r or max_obstacles < need_k:
            raise ConfigError(
                f"max_robots >= {need_r} and max_obstacles >= {need_k} are needed by the "
                f"curriculum: set env.max_robots / env.max_obstacles"
            )
        self.max_episode_steps = int(max_episode_steps)
        self.max_robots = int(max_robots)
        self.max_obstacles = int(max_obstacles)
        self.num_cores = int(num_cores)
        self.perception_noise = bool(perception_noise)
        self.candidates = int(candidates)
        # Autoreset draws scenarios from a pool refreshed a chunk at a time: sampling a
        # fresh scenario for every env at every step would cost more than the physics.
        self.pool_size = int(pool_size or max(1024, 2 * self.num_envs))
        if self.pool_size < self.num_envs:
            raise ConfigError(
                f"env.pool_size ({self.pool_size}) must be at least num_envs "
                f"({self.num_envs}): every reset draws a window of num_envs pool entries"
            )
        refresh = pool_refresh or max(64, self.num_envs // 8)
        self.pool_refresh = min(int(refresh), self.pool_size)
        self.pool_refresh_every = max(int(pool_refresh_every), 1)
        self._resets_since_refresh = 0
        self._pool_cursor = 0
        self._host_rng = random.Random(seed)  # host draws: which pool window to read
        self.pool_refreshes = 0  # host counter: pool chunks redrawn so far
        self.stages = stage_table(self.device, self.curriculum)
        self.stage = torch.tensor(int(stage), device=self.device)
        self._host_stage = int(stage)  # the stage last set from the host, None if unknown
        # the curriculum starts at `stage`: global steps count from that stage's first step
        self.step_offset = self.curriculum[int(stage)].from_step
        self._vonmises = vonmises_quantile_table(device=self.device)
        self._eval_scenarios = None  # the fixed evaluation set, drawn on first use
        self.group_batch_size = torch.Size((self.num_envs, self.max_robots))
        self._make_specs()
        self.env_state = empty_state(
            self.num_envs, self.max_robots, self.max_obstacles, self.num_cores, self.device
        )
        self._fill_pool(0, self.pool_size)
        self._reset_where(torch.ones(self.batch_size, dtype=torch.bool, device=self.device))

    # -- specs and state ------------------------------------------------------------------
    def _make_specs(self) -> None:
        b, r, dev = self.num_envs, self.max_robots, self.device
        agents = (b, r)
        flag = Categorical(2, shape=(*agents, 1), dtype=torch.bool, device=dev)
        self.observation_spec = Composite(
            agents=Composite(
                self_state=Unbounded(shape=(*agents, SELF_STATE_DIM), device=dev),
                objects=Unbounded(shape=(*agents, MAX_OBJECTS, OBJECT_DIM), device=dev),
                objects_mask=Categorical(
                    2, shape=(*agents, MAX_OBJECTS), dtype=torch.bool, device=dev
                ),
                running=Categorical(2, shape=agents, dtype=torch.bool, device=dev),
                shape=agents,
                device=dev,
            ),
            shape=(b,),
            device=dev,
        )
        if self.continuous:
            action = Bounded(-1.0, 1.0, shape=(*agents, 2), device=dev)
        else:
            action = Categorical(dyn.NUM_DISCRETE_ACTIONS, shape=agents, device=dev)
        self.action_spec = Composite(
            agents=Composite(action=action, shape=agents, device=dev), shape=(b,), device=dev
        )
        self.reward_spec = Composite(
            reward=Unbounded(shape=(b, 1), device=dev),
            agents=Composite(
                reward=Unbounded(shape=(*agents, 1), device=dev), shape=agents, device=dev
            ),
            shape=(b,),
            device=dev,
        )
        root_flag = Categorical(2, shape=(b, 1), dtype=torch.bool, device=dev)
        self.done_spec = Composite(
            done=root_flag.clone(),
            terminated=root_flag.clone(),
            truncated=root_flag.clone(),
            agents=Composite(
                done=flag.clone(),
                terminated=flag.clone(),
                truncated=flag.clone(),
                shape=agents,
                device=dev,
            ),
            shape=(b,),
            device=dev,
        )

    def _set_seed(self, seed: int | None) -> None:
        super()._set_seed(seed)
        if seed is not None:
            self._host_rng.seed(seed)

    # -- exact resume -------------------------------------------------------------------
    def env_state_dict(self) -> dict:
        """The state, and the scenario source: the pool, the curriculum stage and the
        host counters and generator that pick pool windows and chunks."""
        return {
            **super().env_state_dict(),
            "pool": dict(self.pool),
            "stage": self.stage,
            "host": {
                "resets_since_refresh": self._resets_since_refresh,
                "pool_cursor": self._pool_cursor,
                "host_rng": self._host_rng.getstate(),
                "pool_refreshes": self.pool_refreshes,
                "host_stage": self._host_stage,
            },
        }

    def load_env_state_dict(self, state: dict) -> None:
        super().load_env_state_dict(state)
        self.pool = {k: v.to(self.device) for k, v in state["pool"].items()}
        self.stage = state["stage"].to(self.device)
        host = state["host"]
        self._resets_since_refresh = host["resets_since_refresh"]
        self._pool_cursor = host["pool_cursor"]
        self._host_rng.setstate(_as_tuples(host["host_rng"]))
        self.pool_refreshes = host["pool_refreshes"]
        self._host_stage = host["host_stage"]

    # -- curriculum -----------------------------------------------------------------------
    def set_stage(self, stage: int) -> None:
        """Jump to a curriculum stage (host int) and resample the whole scenario pool; a
        later set_global_step follows the curriculum again."""
        self._check_stage(stage)
        self.stage = torch.tensor(int(stage), device=self.device)
        self._host_stage = int(stage)
        self._fill_pool(0, self.pool_size)

    def _check_stage(self, stage: int) -> None:
        if not 0 <= int(stage) < len(self.curriculum):
            raise ConfigError(
                f"env.stage must be in [0, {len(self.curriculum)}) (the curriculum's stages), "
                f"got {stage}"
            )

    def set_global_step(self, global_step: torch.Tensor | int) -> None:
        """Follow the curriculum: the stage of `global_step` (plus the first step of the
        stage the env was built with), without a host read.

        A tensor step is mapped to its stage on the device. A host int (the trainer's
        frame count) is mapped on the host, and the device stage is written in place
        only when it changes: no transfer per call.

        New scenarios come from the pool, which is refreshed a chunk at a time, so a stage
        change reaches every reset after pool_size / pool_refresh * pool_refresh_every
        resets at most.
        """
        if isinstance(global_step, torch.Tensor):
            step = global_step.to(self.device) + self.step_offset
            self.stage = stage_at(step, self.stages["from_step"]).reshape(())
            self._host_stage = None
            return
        step = int(global_step) + self.step_offset
        stage = sum(s.from_step <= step for s in self.curriculum) - 1
        if stage != self._host_stage:
            self.stage.fill_(max(stage, 0))
            self._host_stage = stage

    # -- scenarios ------------------------------------------------------------------------
    def _sample(self, n: int, stage: torch.Tensor) -> dict[str, torch.Tensor]:
        stage = stage.expand(n) if stage.dim() == 0 else stage
        sc = sample_scenarios(
            self.rng,
            n,
            self.stages["robots"][stage],
            self.stages["obstacles"][stage],
            self.stages["min_start_goal_dis"][stage],
            self.max_robots,
            self.max_obstacles,
            self.num_cores,
            self.candidates,
            self.device,
        )
        sc["stage"] = stage.clone()
        for entry, value in self._initial_observation(sc).items():
            sc["obs_" + entry] = value
        return sc

    def _fill_pool(self, begin: int, count: int) -> None:
        fresh = self._sample(count, self.stage)
        if begin == 0 and count == self.pool_size:
            self.pool = fresh
            return
        for entry, value in fresh.items():
            self.pool[entry][begin : begin + count] = value

    def _refresh_pool_chunk(self) -> None:
        # host-side counters only: which chunk to redraw is a Python int
        begin = self._pool_cursor
        count = min(self.pool_refresh, self.pool_size - begin)
        self._fill_pool(begin, count)
        self._pool_cursor = (begin + count) % self.pool_size
        self.pool_refreshes += 1

    def load_scenarios(self, scenarios: dict[str, torch.Tensor]) -> None:
        """Start every env on the given scenarios ([num_envs, ...] each), e.g. the eval set."""
        sc = {k: v.to(self.device) for k, v in scenarios.items()}
        n = sc["start"].shape[0]
        if n != self.num_envs:
            raise ConfigError(f"{n} scenarios for {self.num_envs} envs: make them equal")
        ones = torch.ones(self.batch_size, dtype=torch.bool, device=self.device)
        self.env_state = start_scenarios(self.env_state, sc, ones)

    def _reset_where(self, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Start the envs of `mask` on scenarios drawn from the pool; return the drawn
        scenarios (one per env, used where mask is set)."""
        self._resets_since_refresh += 1
        if self._resets_since_refresh >= self.pool_refresh_every:
            self._resets_since_refresh = 0
            self._refresh_pool_chunk()
        # Env b draws pool entry begin + b, from a window at a host-random offset: the
        # entries are i.i.d. scenarios, so every env gets a random one (and no two envs
        # the same one), and a view costs nothing where 14 row gathers cost ~0.3 ms per
        # step at 1024 envs on CPU.
        begin = self._host_rng.randrange(self.pool_size - self.num_envs + 1)
        drawn = {k: v[begin : begin + self.num_envs] for k, v in self.pool.items()}
        self.env_state = start_scenarios(self.env_state, drawn, mask)
        # what _restarted_observation reads in the same step (views: nothing to save)
        self._drawn = drawn
        return drawn

    def _reset_all(self) -> None:
        """Full reset with freshly drawn scenarios (no pool draw: no repeats across envs)."""
        ones = torch.ones(self.batch_size, dtype=torch.bool, device=self.device)
        self.env_state = start_scenarios(
            self.env_state, self._sample(self.num_envs, self.stage), ones
        )

    def _restarted_observation(self, reached: dict, done: torch.Tensor) -> dict:
        """Envs that go on act on the observation they just reached; reset envs on the
        initial observation stored with their scenario (no second perception pass)."""
        drawn, now = self._drawn, reached["agents"]
        entries = {}
        for entry in ("self_state", "objects", "objects_mask", "running"):
            fresh, cur = drawn["obs_" + entry], now[entry]
            m = done.view(-1, *([1] * (cur.dim() - 1)))
            if cur.dtype == torch.bool:
                entries[entry] = torch.where(m, fresh, cur)  # one op beats and/or on bools
            else:
                # lerp is exact at weights 0 and 1 (it computes end - (end - start) (1 - w)
                # for w >= 0.5), and 2-4x cheaper than torch.where or a multiply-add blend
                entries[entry] = torch.lerp(cur, fresh, m.to(cur.dtype))
        return {"agents": entries}

    # -- the step ---------------------------------------------------------------------------
    def _current(self, s: MarineNavState):
        if self.num_cores == 0:
            return None
        core, gamma = s.core, s.core_gamma
        return lambda x, y: rankine_velocity(x, y, core, gamma)

    def _rates(self, action: torch.Tensor) -> torch.Tensor:
        if self.continuous:
            return dyn.continuous_rates(action.reshape(self.num_envs, self.max_robots, 2))
        return dyn.discrete_rates(action.reshape(self.num_envs, self.max_robots))

    def _advance(self, action: torch.Tensor) -> StepResult:
        # the perception noise is drawn here, eagerly, from the env's generator (the same
        # draws, in the same order, as before it was split off); the rest is one pure
        # function of tensors that compile.env compiles (compile_step): state in, state
        # out, so the compiled graph has no side effect to replay on self
        noise = self._perception_noise(self.num_envs)
        self.env_state, result = self._advance_core(self.env_state, action, noise)
        return result

    def compile_step(self) -> bool:
        """compile.env: the step's pure part (dynamics, collisions, perception, reward)
        through torch.compile, one graph of fixed shapes; resets and scenario draws stay
        eager. MarineNav has no LeanCore (its resets draw from a pool of scenarios)."""
        self._advance_core = torch.compile(self._advance_core, dynamic=False, fullgraph=True)
        return True

    def _advance_core(
        self, s: MarineNavState, action: torch.Tensor, noise: dict | None
    ) -> tuple[MarineNavState, StepResult]:
        moving = running_robots(s)
        rates = self._rates(action)
        # Robots that stopped keep their state: blends by lerp with 0/1 weights (exact,
        # and 2-4x cheaper than torch.where on CPU)
        w = moving.to(s.x.dtype)
        limits = (dyn.THRUST_MIN, dyn.THRUST_MAX)
        tl = torch.lerp(
            s.thrust_l, (s.thrust_l + rates[..., 0] * dyn.ACTION_TIME).clamp(*limits), w
        )
        tr = torch.lerp(
            s.thrust_r, (s.thrust_r + rates[..., 1] * dyn.ACTION_TIME).clamp(*limits), w
        )
        gx, gy = s.goal[..., 0], s.goal[..., 1]
        dist_before = torch.hypot(gx - s.x, gy - s.y)
        nx, ny, nyaw, nvx, nvy, nr = fossen_substeps(
            s.x, s.y, s.yaw, s.vx, s.vy, s.r, tl, tr, self._current(s)
        )
        x = torch.lerp(s.x, nx, w)
        y = torch.lerp(s.y, ny, w)
        dist_after = torch.hypot(gx - x, gy - y)

        # collision (true positions) against running robots and obstacles, and arrival;
        # the offsets [N, B, R] (objects first) serve perception too
        rr = dyn.ROBOT_RADIUS
        offsets = object_offsets(x, y, s.obstacle)
        hit = collisions(*offsets, moving, s.obstacle_radius, s.obstacle_valid, rr)
        collided_now = moving & hit
        arrived_now = moving & ~collided_now & (dist_after <= dyn.GOAL_RADIUS)
        s = s._replace(
            x=x,
            y=y,
            yaw=torch.lerp(s.yaw, nyaw, w),
            vx=torch.lerp(s.vx, nvx, w),
            vy=torch.lerp(s.vy, nvy, w),
            r=torch.lerp(s.r, nr, w),
            thrust_l=tl,
            thrust_r=tr,
            collided=s.collided | collided_now,
            arrived=s.arrived | arrived_now,
            steps=s.steps + 1,
            travel_steps=s.travel_steps + moving,
            energy=s.energy + moving * ((tl.abs() + tr.abs()) * dyn.ACTION_TIME),
        )

        entries, (planes, plane_mask, ego_u, ego_v) = self._observe_state(s, noise, offsets)
        # on the objects-first planes: contiguous operands, the ego [B, R] broadcasts
        colregs = colregs_planes(*planes, plane_mask, ego_u, ego_v, rr)
        reward = step_reward(dist_before, dist_after, colregs, collided_now, arrived_now, moving)

        all_stopped = ~entries["running"].any(-1, keepdim=True)
        truncated = (s.steps >= self.max_episode_steps).unsqueeze(-1) & ~all_stopped
        stopped_now = collided_now | arrived_now
        robot_truncated = moving & ~stopped_now & truncated
        s = s._replace(timed_out=s.timed_out | robot_truncated)
        return s, StepResult(
            reward.sum(-1, keepdim=True),
            all_stopped,
            truncated,
            reached={"agents": entries},
            group=GroupResult(
                reward.unsqueeze(-1), stopped_now.unsqueeze(-1), robot_truncated.unsqueeze(-1)
            ),
        )

    def _observe(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        yaw: torch.Tensor,
        vx: torch.Tensor,
        vy: torch.Tensor,
        r: torch.Tensor,
        thrust_l: torch.Tensor,
        thrust_r: torch.Tensor,
        goal: torch.Tensor,
        running: torch.Tensor,
        obstacle: torch.Tensor,
        obstacle_radius: torch.Tensor,
        obstacle_valid: torch.Tensor,
        core: torch.Tensor,
        core_gamma: torch.Tensor,
        noise: dict[str, torch.Tensor] | None,
        offsets: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[dict[str, torch.Tensor], tuple]:
        """Observation entries for any batch of states [n, R] (the envs, or pool scenarios),
        and what the COLREGs term reads: perception's objects-first planes ((p_x, p_y,
        v_x, v_y, r_hat), mask) and the ego's ground velocity (u, v) in its own frame.
        `noise`: the perception noise of these n states (_perception_noise), or None."""
        c, s = torch.cos(yaw), torch.sin(yaw)
        if self.num_cores > 0:
            cx, cy = rankine_velocity(x, y, core, core_gamma)
            vx, vy = vx + cx, vy + cy
        dgx, dgy = goal[..., 0] - x, goal[..., 1] - y
        ego_u = torch.addcmul(c * vx, s, vy)
        ego_v = torch.addcmul(c * vy, s, vx, value=-1.0)
        features = (
            torch.addcmul(c * dgx, s, dgy),
            torch.addcmul(c * dgy, s, dgx, value=-1.0),
            ego_u,
            ego_v,
            r,
            thrust_l,
            thrust_r,
        )
        # stacked first, then transposed in one copy: ~2x cheaper than stack(dim=-1) on CPU
        self_state = torch.stack(features).permute(1, 2, 0).contiguous()
        planes, plane_mask = perceive_planes(
            x,
            y,
            c,
            s,
            vx,
            vy,
            running,
            dyn.ROBOT_RADIUS,
            obstacle,
            obstacle_radius,
            obstacle_valid,
            noise,
            offsets,
        )
        objects, mask = planes_to_objects(planes, plane_mask)
        entries = {
            "self_state": self_state,
            "objects": objects,
            "objects_mask": mask,
            "running": running,
        }
        return entries, (planes, plane_mask, ego_u, ego_v)

    def _perception_noise(self, n: int) -> dict[str, torch.Tensor] | None:
        """The perception noise of n states, from the env's generator (None without
        env.perception_noise)."""
        if not self.perception_noise:
            return None
        shape = (self.max_robots + self.max_obstacles, n, self.max_robots)
        return {
            "pos": torch.randn((2, *shape), generator=self.rng, device=self.device),
            "vel": torch.randn(
                (2, MAX_OBJECTS, n, self.max_robots), generator=self.rng, device=self.device
            ),
            "ang": sample_from_table(self._vonmises, shape, self.rng),
        }

    def _observation(self) -> dict:
        noise = self._perception_noise(self.num_envs)
        return {"agents": self._observe_state(self.env_state, noise)[0]}

    def _observe_state(self, s: MarineNavState, noise, offsets=None) -> tuple[dict, tuple]:
        """Observation entries of state `s` under perception `noise`, and what COLREGs
        reads; `offsets` are object_offsets of its positions, if already computed."""
        return self._observe(
            s.x,
            s.y,
            s.yaw,
            s.vx,
            s.vy,
            s.r,
            s.thrust_l,
            s.thrust_r,
            s.goal,
            running_robots(s),
            s.obstacle,
            s.obstacle_radius,
            s.obstacle_valid,
            s.core,
            s.core_gamma,
            noise,
            offsets,
        )

    def _initial_observation(self, sc: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What a robot perceives at the start of scenario(s) `sc` (at rest, thrust 0)."""
        z = torch.zeros_like(sc["yaw"])
        noise = self._perception_noise(sc["yaw"].shape[0])
        entries, _ = self._observe(
            sc["start"][..., 0],
            sc["start"][..., 1],
            sc["yaw"],
            z,
            z,
            z,
            z,
            z,
            sc["goal"],
            sc["robot_active"],
            sc["obstacle"],
            sc["obstacle_radius"],
            sc["obstacle_valid"],
            sc["core"],
            sc["core_gamma"],
            noise,
        )
        return entries

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Per-env outcome of the current episodes (device tensors, read when you need)."""
        s = self.env_state
        active = s.robot_active
        success = (s.arrived | ~active).all(-1) & active.any(-1)
        return {
            "stage": s.scenario_stage,
            "robots": active.sum(-1),
            "success": success,
            "collisions": (s.collided & active).sum(-1),
            "timeouts": (s.timed_out & active).sum(-1),
            "finished": ~(active & ~(s.collided | s.arrived)).any(-1),
            "travel_time": (s.travel_steps * active).sum(-1)
            * dyn.ACTION_TIME
            / active.sum(-1).clamp_min(1),
            "energy": (s.energy * active).sum(-1) / active.sum(-1).clamp_min(1),
            "steps": s.steps,
        }

    def check_evaluation(self) -> None:
        """Raise unless this env can play the fixed evaluation set (one env per episode)."""
        need = EVAL_EPISODES_PER_STAGE * len(self.curriculum)
        if self.num_envs != need:
            raise ConfigError(
                f"MarineNav evaluates on its fixed set of {need} episodes: set "
                f"env.eval_envs={need} (got {self.num_envs})"
            )

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """The fixed evaluation set (10 episodes per curriculum stage, seed 253), played
        by `policy` on this env, which must have one env per episode (make_eval_env, or
        env.eval_envs = 10 x stages). Overall and per-stage metrics, host floats."""
        self.check_evaluation()
        if self._eval_scenarios is None:
            self._eval_scenarios = evaluation_scenarios(
                self.max_robots, self.max_obstacles, self.num_cores, curriculum=self.curriculum
            )
        return protocol_metrics(run_episodes(self, policy, self._eval_scenarios))

    FRAME = 256  # pixels a side of the 55 m square: a multiple of 16, as video likes
    # robot slots' colours; a robot that collided is drawn red, one that arrived green
    ROBOT_COLOURS = ((31, 119, 180), (255, 127, 14), (148, 103, 189), (140, 86, 75), (23, 190, 207))
    # the robots' tracks so far, kept between frames (drawing only, not the env's state):
    # the pixels each robot crossed [B, R, H, W], and where the last frame saw it
    _track: torch.Tensor | None = None
    _last_seen: tuple[torch.Tensor, torch.Tensor] | None = None

    def render_frames(self) -> torch.Tensor:
        """The area from above: the water's speed in blues (darker where the current is
        stronger), obstacles grey, each robot a disc with its heading, its track since
        its episode began (from the frames drawn: one per step in a video) and its goal
        a square in its colour."""
        s, size = self.env_state, self.FRAME
        scale = size / WORLD_SIZE
        centres = (torch.arange(size, device=self.device, dtype=torch.float32) + 0.5) / scale
        gx = centres.view(1, 1, size).expand(len(s.x), size, size).reshape(len(s.x), -1)
        gy = (WORLD_SIZE - centres).view(1, size, 1).expand(len(s.x), size, size)
        vx, vy = rankine_velocity(gx, gy.reshape(len(s.x), -1), s.core, s.core_gamma)
        speed = (vx.square() + vy.square()).sqrt().reshape(len(s.x), size, size)
        shade = (speed / 2.0).clamp(0, 1).unsqueeze(-1)  # 2 m/s and more: the darkest
        light = torch.tensor((225, 238, 250), device=self.device, dtype=torch.float32)
        dark = torch.tensor((90, 140, 200), device=self.device, dtype=torch.float32)
        frames = (light + (dark - light) * shade).to(torch.uint8)

        def px(x, y):  # metres to pixels (y up on the map, down in the image)
            return x * scale, (WORLD_SIZE - y) * scale

        for k in range(s.obstacle.shape[1]):  # a few slots: drawing is not the hot path
            ox, oy = px(s.obstacle[:, k, 0], s.obstacle[:, k, 1])
            radius = s.obstacle_radius[:, k] * scale * s.obstacle_valid[:, k]
            frames = draw.discs(frames, ox, oy, radius, (120, 120, 120))
        rx_all, ry_all = px(s.x, s.y)  # [B, R]
        track = self._update_track(frames, rx_all, ry_all, s.steps == 0)
        for i in range(s.x.shape[1]):
            colour = self.ROBOT_COLOURS[i % len(self.ROBOT_COLOURS)]
            frames = torch.where(
                track[:, i, :, :, None], torch.tensor(colour, device=self.device), frames
            ).to(torch.uint8)
        for i in range(s.x.shape[1]):
            colour = self.ROBOT_COLOURS[i % len(self.ROBOT_COLOURS)]
            on = s.robot_active[:, i]
            gx_, gy_ = px(s.goal[:, i, 0], s.goal[:, i, 1])
            frames = draw.boxes(frames, gx_, gy_, 3.0 * on, 3.0 * on, colour)
            rx, ry = px(s.x[:, i], s.y[:, i])
            hx, hy = rx + 8 * torch.cos(s.yaw[:, i]), ry - 8 * torch.sin(s.yaw[:, i])
            body = torch.where(
                s.collided[:, i, None],
                torch.tensor((214, 39, 40), device=self.device),
                torch.where(
                    s.arrived[:, i, None],
                    torch.tensor((44, 160, 44), device=self.device),
                    torch.tensor(colour, device=self.device),
                ),
            )
            frames = draw.segments(frames, rx, ry, hx, hy, 1.5 * on, (0, 0, 0))
            frames = draw.discs(frames, rx, ry, 4.0 * on, body)
        return frames

    def _update_track(self, frames, rx, ry, fresh) -> torch.Tensor:
        """Ink each active robot's move since the last frame drawn into the tracks, which
        restart where an episode has just begun (`fresh` [B]); the tracks [B, R, H, W]."""
        b, r = rx.shape
        shape = (b, r, *frames.shape[1:3])
        if self._track is None or self._track.shape != shape:
            self._track = torch.zeros(shape, dtype=torch.bool, device=self.device)
            self._last_seen = (rx, ry)
        self._track[fresh] = False
        keep = ~fresh[:, None]
        last_x, last_y = self._last_seen
        x0, y0 = torch.where(keep, last_x, rx), torch.where(keep, last_y, ry)
        active = self.env_state.robot_active
        for i in range(r):
            line = draw.segment_mask(frames, x0[:, i], y0[:, i], rx[:, i], ry[:, i], 1.0)
            self._track[:, i] |= line & active[:, i, None, None]
        self._last_seen = (rx, ry)
        return self._track


@register("env", "marinenav_continuous", MarineNavConfig)
class MarineNavContinuousEnv(MarineNavEnv):
    """MarineNav with 2 continuous actions in [-1, 1] (x 1000 N/s thrust-change rates)."""

    continuous = True


def make_eval_env(env_cls=MarineNavEnv, device="cpu", **kwargs) -> MarineNavEnv:
    """An env with one slot per evaluation episode (the pool stays small: it is unused)."""
    kwargs.setdefault("pool_size", 64)
    stages = len(parse_curriculum(kwargs.get("curriculum")))
    return env_cls(num_envs=EVAL_EPISODES_PER_STAGE * stages, device=device, **kwargs)


def _as_tuples(value):
    """random.Random.setstate wants tuples; a checkpoint may hand back lists."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuples(v) for v in value)
    return value
