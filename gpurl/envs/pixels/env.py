"""PixelsEnv: the TorchRL shell over the tile-world core (worldgen, render, movement, reward).

Batch [num_envs] on CPU or CUDA. Observation "pixels" uint8 [N, stack_k, 72, 80] in
shades 0..3; 8 discrete actions (NOOP, A, B, START, UP, DOWN, LEFT, RIGHT). Each env has
its own world (seed + env index; held-out worlds, for evaluation, count down from
2**32 - 1 instead) and always restarts from the same start state (the reset cache); with
num_worlds > 0 every reset draws the env's next world from a pool of that many instead. See
docs/envs/pixels.md for options, the reward forms and the evaluation protocol.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torchrl.data import Bounded, Categorical, Composite, Unbounded

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.base import NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig
from gpurl.envs.pixels.atlas import (
    PLAYER_SCREEN_X,
    PLAYER_SCREEN_Y,
    SCREEN_H,
    SCREEN_W,
    TILE,
    as_pixels,
    as_words,
    player_sprite,
    tile_atlas,
)
from gpurl.envs.pixels.frame_stack import (
    RESTORE_MODES,
    FrameStack,
    empty_stack,
    next_slot,
    reset_stack,
    stack_observation,
)
from gpurl.envs.pixels.movement import blocking_map, move_player
from gpurl.envs.pixels.render import render_frames, sprite_words, tile_window
from gpurl.envs.pixels.reset_cache import ResetCache
from gpurl.envs.pixels.reward import (
    frame_distance,
    goal_template_reward,
    reach_reward,
    tile_distance,
    tile_pair_tables,
    window_distance,
)
from gpurl.envs.pixels.worldgen import generate_worlds
from gpurl.errors import ConfigError

REWARDS = ("goal", "reach")
# World ids are 32-bit (worldgen hashes the low 32 bits of a world seed). Training envs
# take ids seed, seed + 1, ... and held-out envs ids 2**32 - 1 - seed, counting down:
# disjoint while every training id stays below 2**31.
WORLD_IDS = 1 << 32
INFO_MODES = ("full", "stats", "none")


class WorldPool(NamedTuple):
    """The worlds of an env with num_worlds > 0, one row each."""

    ids: torch.Tensor  # int64 [P]: world ids
    tiles: torch.Tensor
    blocked: torch.Tensor
    goal_pos: torch.Tensor
    goal_window: torch.Tensor
    goal_frame: torch.Tensor
    start: dict  # the reset cache's entries: pos, frame, metric


class PixelsState(NamedTuple):
    """Every env's player, episode and frame stack, and the episode statistics."""

    pos: torch.Tensor  # int64 [N, 2]: the player's pixel position
    metric: torch.Tensor  # [N]: the distance the reward uses, at the current position
    steps: torch.Tensor  # int64 [N]: episode lengths
    counter: torch.Tensor  # int64 [N]: consecutive steps on the goal ("goal" reward)
    first: torch.Tensor  # bool [N]: the env was reset since its last step
    world: torch.Tensor  # int64 [N]: each env's pool world (0 without a pool)
    stack: FrameStack
    # info_mode "stats": goals, episodes and their summed lengths since construction,
    # accumulated in place; read_stats() reads them (one host read per log)
    stat_totals: torch.Tensor  # int64 [3]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@declare(name="pixels", num_envs=1024, eval_envs=16)
class PixelsConfig(EnvConfig):
    """A ROM-free Game-Boy-like tile world rendered on the device (docs/envs/pixels.md)."""

    obs = "images"

    map_height: int = key(16, "world height in tiles", ge=4, note=("world",))
    map_width: int = key(16, "world width in tiles", ge=4)
    wall_prob: float = key(0.25, "probability of a wall in each interior cell", ge=0, lt=1)
    num_worlds: int = key(
        0, "0: a fixed world per env; N: every reset draws from a pool of N", ge=0
    )
    frames_per_step: int = key(24, "frames per env step", ge=1, note=("frames and input",))
    release_after_frames: int = key(8, "frames the button is held", ge=0)
    stack_k: int = key(1, "frames in the observation stack", ge=1)
    reward: str = key(
        "goal",
        "goal (goal-template distance) | reach (on the goal tile)",
        choices=("goal", "reach"),
        note=("reward",),
    )
    step_cost: float = key(-0.01, "reward added every step")
    alpha: float = key(1.0, "goal: weight of the distance progress")
    goal_bonus: float = key(10.0, "reward on reaching the goal")
    tau: float = key(0.05, "goal: distance below which the goal counter runs", ge=0)
    k_consecutive: int = key(4, "goal: steps under tau that end the episode", ge=1)
    goal_stack: bool = key(False, "goal: compare the whole stack with a stacked goal")
    shaping: float = key(0.0, "reach: weight of the tile-distance progress")
    max_steps: int = key(512, "steps before an episode is truncated", ge=1)
    info_mode: str = key(
        "stats",
        "full | stats | none: what the env reports beside the frames",
        choices=("full", "stats", "none"),
    )
    restore: str = key(
        "lazy",
        "lazy | masked | host_skip (measurement only): how resets restore the frame stack",
        choices=("lazy", "masked", "host_skip"),
    )


@register("env", "pixels", PixelsConfig)
class PixelsEnv(state_attributes(PixelsState), NativeEnv):
    has_held_out = True  # make_eval_env builds its evaluation envs with held_out=True

    def __init__(
        self,
        num_envs: int = 1,
        device="cpu",
        seed: int = 0,
        *,
        map_height: int = 16,
        map_width: int = 16,
        wall_prob: float = 0.25,
        frames_per_step: int = 24,
        release_after_frames: int = 8,
        stack_k: int = 1,
        reward: str = "goal",
        step_cost: float = -0.01,
        alpha: float = 1.0,
        goal_bonus: float = 10.0,
        tau: float = 0.05,
        k_consecutive: int = 4,
        goal_stack: bool = False,
        shaping: float = 0.0,
        max_steps: int = 512,
        info_mode: str = "stats",
        restore: str = "lazy",
        held_out: bool = False,
        num_worlds: int = 0,
    ):
        _check(int(stack_k) >= 1, f"stack_k must be >= 1, got {stack_k}: set env.stack_k=1")
        _check(
            int(frames_per_step) >= 1 and int(release_after_frames) >= 0,
            "frames_per_step must be >= 1 and release_after_frames >= 0: "
            f"got {frames_per_step} and {release_after_frames}",
        )
        _check(
            map_height >= 4 and map_width >= 4,
            f"map size must be at least 4 x 4 tiles, got {map_height} x {map_width}",
        )
        _check(0.0 <= wall_prob < 1.0, f"wall_prob must be in [0, 1), got {wall_prob}")
        _check(reward in REWARDS, f"reward must be one of {REWARDS}, got '{reward}'")
        _check(info_mode in INFO_MODES, f"info_mode must be one of {INFO_MODES}, got '{info_mode}'")
        _check(restore in RESTORE_MODES, f"restore must be one of {RESTORE_MODES}, got '{restore}'")
        _check(int(max_steps) >= 1, f"max_steps must be >= 1, got {max_steps}")
        _check(int(k_consecutive) >= 1, f"k_consecutive must be >= 1, got {k_consecutive}")
        _check(
            0 <= int(num_worlds) < WORLD_IDS // 2,
            f"num_worlds must be 0 (a fixed world per env) or a pool size, got {num_worlds}",
        )
        super().__init__(num_envs, device, seed)
        self.max_episode_steps = int(max_steps)
        self.stack_k = int(stack_k)
        self.held_frames = min(int(release_after_frames), int(frames_per_step))
        # Starts are tile-aligned and walls stop the player on tile edges, so whole-tile
        # moves keep every position aligned: a static fact that lets the renderer skip
        # the sub-tile shifts without looking at the data.
        self._aligned = self.held_frames % TILE == 0
        self.restore = restore
        self.reward_kind = reward
        self.info_mode = info_mode
        self.goal_stack = bool(goal_stack)
        self._reward_args = dict(step_cost=step_cost, goal_bonus=goal_bonus)
        self._goal_args = dict(alpha=alpha, tau=tau, k_consecutive=int(k_consecutive))
        self._shaping = shaping

        n, dev = self.num_envs, self.device
        self.held_out = bool(held_out)
        # num_worlds > 0: a pool of that many worlds, one drawn afresh at every reset
        # (Procgen's num_levels). Held-out envs keep one fixed world each: an evaluation
        # plays each of its worlds once.
        self.num_worlds = 0 if self.held_out else int(num_worlds)
        pool_size = self.num_worlds or n
        world_seeds = int(seed) + torch.arange(pool_size, dtype=torch.int64, device=dev)
        if self.held_out:  # worlds no training env (seed >= 0, ids < 2**31) ever gets
            world_seeds = (WORLD_IDS - 1) - world_seeds
        self.world_ids = world_seeds
        worlds = generate_worlds(world_seeds, int(map_height), int(map_width), float(wall_prob))
        self.tiles = worlds.tiles
        self.blocked = blocking_map(worlds.tiles)
        self.goal_pos = worlds.goal
        self._atlas_words = as_words(tile_atlas(dev)).view(-1, TILE)
        self._ink, self._keep = sprite_words(*player_sprite(dev))
        self._pair_tables = tile_pair_tables(tile_atlas(dev), *player_sprite(dev))
        self._goal_window = self._visible_tiles(worlds.goal)
        start_frame = self._render(worlds.start)
        self.goal_frame = as_pixels(self._render(worlds.goal))  # uint8 [N, 72, 80]
        start_stack = as_pixels(start_frame).unsqueeze(1).expand(pool_size, self.stack_k, -1, -1)
        start_metric = self._metric(start_stack, worlds.start)
        self.cache = ResetCache(pos=worlds.start, frame=start_frame, metric=start_metric)
        self.pool = None
        if self.num_worlds:
            # Everything a world fixes, per pool world; _reset_where gathers each env's
            # rows. Not in the state, so checkpoints do not carry it (the constructor
            # rebuilds it); `world` (each env's pool index) they do carry.
            self.pool = WorldPool(
                ids=world_seeds,
                tiles=self.tiles,
                blocked=self.blocked,
                goal_pos=self.goal_pos,
                goal_window=self._goal_window,
                goal_frame=self.goal_frame,
                start=self.cache.start,
            )

        def counts():
            return torch.zeros(n, dtype=torch.int64, device=dev)

        self.env_state = PixelsState(  # set by the reset below
            pos=torch.zeros(n, 2, dtype=torch.int64, device=dev),
            metric=torch.zeros(n, device=dev),
            steps=counts(),
            counter=counts(),
            first=torch.ones(n, dtype=torch.bool, device=dev),
            world=counts(),
            stack=empty_stack(n, self.stack_k, dev),
            stat_totals=torch.zeros(3, dtype=torch.int64, device=dev),
        )
        # the last step's statistics (info_mode "stats"), for inspection
        self.stats: dict[str, torch.Tensor] = {}
        self.stats_read_at = (0, 0, 0)  # host: stat_totals at the last read_stats()

        b = self.batch_size
        shape = (*b, self.stack_k, SCREEN_H, SCREEN_W)
        obs = {"pixels": Bounded(0, 3, shape=shape, dtype=torch.uint8, device=dev)}
        if info_mode == "full":
            obs["info"] = Composite(
                dist=Unbounded((*b, 1), device=dev),
                reset_mask=Categorical(2, (*b, 1), dtype=torch.bool, device=dev),
                shape=b,
                device=dev,
            )
        self._set_specs(obs, Categorical(8, shape=b, device=dev))
        self._reset_where(torch.ones(n, dtype=torch.bool, device=dev))

    # -- core pieces ------------------------------------------------------------------
    def _render(self, pos: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return render_frames(
            self.tiles, pos, self._atlas_words, self._ink, self._keep, out, self._aligned
        )

    def _visible_tiles(self, pos: torch.Tensor) -> torch.Tensor:
        """int64 [N, 9, 10]: the screen's tiles, for a camera on the tile grid."""
        return tile_window(self.tiles, pos)[0][:, :-1, :-1].long()

    def _metric(self, stack: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The distance the reward uses: frame distance to the goal frame, or tiles."""
        if self.reward_kind == "reach":
            return tile_distance(pos, self.goal_pos)
        if self.goal_stack:
            return frame_distance(stack, self.goal_frame.unsqueeze(1))
        if self._aligned:  # whole-tile frames: the same number from 90 table lookups
            player_tile = (PLAYER_SCREEN_Y // TILE, PLAYER_SCREEN_X // TILE)
            window = self._visible_tiles(pos)
            return window_distance(window, self._goal_window, *self._pair_tables, player_tile)
        return frame_distance(stack[:, -1], self.goal_frame)

    # -- NativeEnv --------------------------------------------------------------------
    def _reset_where(self, mask: torch.Tensor) -> None:
        s = self.env_state
        world = s.world
        if self.pool is not None:
            world = self._draw_worlds(mask, world)
        restored = self.cache.restore(mask, pos=s.pos, metric=s.metric)
        self.env_state = s._replace(
            pos=restored["pos"],
            metric=restored["metric"],
            steps=torch.where(mask, 0, s.steps),
            counter=torch.where(mask, 0, s.counter),
            first=mask,
            world=world,
            stack=reset_stack(s.stack, mask, self.cache["frame"], self.restore),
        )

    def _draw_worlds(self, mask: torch.Tensor, world: torch.Tensor) -> torch.Tensor:
        """A fresh pool world for every env where mask is set: a draw for every env and
        a gather of every env's world rows, under the mask, so no host read decides
        anything (the gathers are small next to a step's render)."""
        draw = torch.randint(
            self.num_worlds, (self.num_envs,), generator=self.rng, device=self.device
        )
        world = torch.where(mask, draw, world)
        self._gather_worlds(world)
        return world

    def _gather_worlds(self, world: torch.Tensor) -> None:
        pool, w = self.pool, world
        self.world_ids = pool.ids[w]
        self.tiles, self.blocked, self.goal_pos = pool.tiles[w], pool.blocked[w], pool.goal_pos[w]
        self._goal_window, self.goal_frame = pool.goal_window[w], pool.goal_frame[w]
        self.cache = ResetCache(**{k: v[w] for k, v in pool.start.items()})

    def env_state_dict(self) -> dict:
        return {**super().env_state_dict(), "stats_read_at": self.stats_read_at}

    def load_env_state_dict(self, state: dict) -> None:
        super().load_env_state_dict(state)
        self.stats_read_at = tuple(state["stats_read_at"])
        if self.pool is not None:  # the worlds and reset cache of the resumed envs
            self._gather_worlds(self.env_state.world)

    def _advance(self, action: torch.Tensor) -> StepResult:
        s = self.env_state
        pos = move_player(s.pos, action.reshape(self.num_envs), self.blocked, self.held_frames)
        stack, slot = next_slot(s.stack, self.restore)
        self._render(pos, out=slot)
        frames = stack_observation(stack, self.cache["frame"], self.restore)
        dist = self._metric(as_pixels(frames), pos)
        if self.reward_kind == "goal":
            reward, counter, terminated = goal_template_reward(
                dist, s.metric, s.counter, **self._reward_args, **self._goal_args
            )
        else:
            reward, _, terminated = reach_reward(
                pos, self.goal_pos, s.metric, shaping=self._shaping, **self._reward_args
            )
            counter = s.counter
        steps = s.steps + 1
        truncated = (steps >= self.max_episode_steps) & ~terminated
        first = torch.zeros_like(terminated)
        if self.info_mode == "stats":
            self._update_stats(dist, terminated, truncated, steps, s.stat_totals)
        self.env_state = s._replace(
            pos=pos, metric=dist, steps=steps, counter=counter, first=first, stack=stack
        )
        return StepResult(
            reward.unsqueeze(-1),
            terminated.unsqueeze(-1),
            truncated.unsqueeze(-1),
            reached=self._entries(frames, dist, first),
        )

    # the classic Game Boy greens, lightest (shade 0) to darkest (shade 3)
    PALETTE = ((224, 248, 208), (136, 192, 112), (52, 104, 86), (8, 24, 32))
    SCALE = 2  # 72 x 80 frames drawn at 144 x 160

    def render_frames(self) -> torch.Tensor:
        """The newest frame of each env's stack, its four shades in Game Boy greens."""
        shades = self._observation()["pixels"][:, -1].long()  # [B, 72, 80], oldest first
        palette = torch.tensor(self.PALETTE, dtype=torch.uint8, device=shades.device)
        big = shades.repeat_interleave(self.SCALE, -2).repeat_interleave(self.SCALE, -1)
        return palette[big]

    def _observation(self) -> dict:
        s = self.env_state
        frames = stack_observation(s.stack, self.cache["frame"], self.restore)
        return self._entries(frames, s.metric, s.first)

    def _entries(self, frames: torch.Tensor, metric: torch.Tensor, first: torch.Tensor) -> dict:
        """The observation entries of stacked frames (packed words) and the state's
        metric and reset flags."""
        out: dict = {"pixels": as_pixels(frames)}
        if self.info_mode == "full":
            out["info"] = {"dist": metric.unsqueeze(-1), "reset_mask": first.unsqueeze(-1)}
        return out

    # -- info_mode "stats" ----------------------------------------------------------------
    def _update_stats(self, dist, terminated, truncated, steps, totals) -> None:
        """Aggregates as device tensors, added to `totals` (stat_totals) in place; the
        host reads them only when it logs."""
        ends = terminated | truncated
        # this step's goals, episode ends and the lengths of the episodes that ended
        counts = torch.stack((terminated.sum(), ends.sum(), (steps * ends).sum()))
        totals.add_(counts)
        self.stats = {
            "dist_mean": dist.mean(),
            "dist_min": dist.amin(),
            "dist_max": dist.amax(),
            "goals": counts[0],
            "episodes_done": counts[1],
            "total_goals": totals[0],
            "total_episodes": totals[1],
            "total_length": totals[2],
        }

    def read_stats(self) -> dict[str, float] | None:
        """The episodes ended since the last call (info_mode "stats"): their count, the
        fraction that reached the goal and their mean length. One host read; None when
        no episode ended or the stats are off. The trainer calls it at each log."""
        if self.info_mode != "stats":
            return None
        goals, episodes, length = self.env_state.stat_totals.tolist()
        g0, e0, l0 = self.stats_read_at
        self.stats_read_at = (goals, episodes, length)
        if episodes == e0:
            return None
        n = episodes - e0
        return {"episodes": float(n), "success": (goals - g0) / n, "length": (length - l0) / n}

    # -- evaluation -------------------------------------------------------------------
    def evaluation_protocol(self, policy) -> dict[str, float]:
        """One episode in each env from its start state, acting with `policy` (the caller
        makes it greedy): mean return, success (the goal reached before max_steps) and
        mean episode length. Built with held_out=True (gpurl.envs.make_eval_env), these
        are worlds no training env has."""
        ep = self.play_episodes(policy)
        out = torch.stack((ep["return"], ep["terminated"].float(), ep["length"])).mean(1).tolist()
        return dict(zip(("return", "success", "length"), out, strict=True))
