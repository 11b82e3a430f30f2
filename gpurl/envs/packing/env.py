"""PackingEnv: irregular parts packed into num_envs boxes, one placement per step.

Action [B, 4] int64 (a MultiCategorical spec, nvec = [K, 24, G, G]):
    slot        index into the observation's `candidates` (largest bbox volume first)
    orientation one of the 24 rotations (orientations.py)
    ix, iy      stride-grid corner: the footprint's top-left cell is (grid_step ix, grid_step iy)
Legality over (orientation, ix, iy) comes from `geometry.placement` / `features.worker_maps`
on demand; the observation stays lean. A step whose chosen item has no legal placement
terminates the episode. With illegal_action="terminate" (default) the env trusts the legal
mask: it checks only the chosen corner, and an illegal choice is read as "no legal
placement left" (for a policy that follows the mask the two are the same, and the step
costs one window instead of the full map). With illegal_action="noop" the env computes
the full legal map: an illegal corner places nothing and the episode goes on if any legal
placement exists. An invalid slot places nothing in both modes. Steps that place nothing
earn the reward without the placement bonus and count toward max_steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
from torchrl.data import Binary, Categorical, MultiCategorical, Unbounded

from gpurl.core.config import declare, group, key
from gpurl.core.registry import register
from gpurl.envs.base import NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig
from gpurl.envs.packing import reward as rw
from gpurl.envs.packing.catalog import PROCEDURAL_KINDS, procedural_items
from gpurl.envs.packing.evaluation import evaluate
from gpurl.envs.packing.features import MANAGER_SCALARS, candidate_slots, manager_scalars
from gpurl.envs.packing.geometry import PackingGeometry
from gpurl.envs.packing.heightmaps import build_item_maps, max_footprint
from gpurl.envs.packing.orientations import NUM_ORIENTATIONS
from gpurl.envs.packing.placement import place, placement_at
from gpurl.errors import ConfigError

ILLEGAL_ACTIONS = ("terminate", "noop")
FOOTPRINT_ALIGN = 16


class PackingState(NamedTuple):
    """Every env's box and episode, and the placement counter."""

    hm: torch.Tensor  # [B, r, r] float32: the box's heightmap
    items: torch.Tensor  # [B, N] int64: the episode's parts (pool indices)
    packed: torch.Tensor  # [B, N] bool: placed so far
    steps: torch.Tensor  # [B] int64
    packed_volume: torch.Tensor  # [B] float32, m^3
    c: torch.Tensor  # [B] float32: compactness
    p: torch.Tensor  # [B] float32: pyramidality
    # items placed since construction, all envs: a device counter read at log time
    placements: torch.Tensor  # [] int64


@declare(name="packing", num_envs=1, eval_envs=10)
class PackingConfig(EnvConfig):
    """Irregular-part packing on heightmaps (docs/envs/packing.md), batched on the device."""

    obs = "maps"

    num_objects: int = key(20, "items per episode, drawn with replacement from the pool", ge=1)
    resolution: int = key(200, "R cells per side of the box's heightmap", ge=8)
    grid_step: int = key(4, "corners on a stride grid: every grid_step-th cell", ge=1)
    box_size: list[float] = key([0.256, 0.256, 0.256], "L, W, H in metres (L == W)", gt=0)
    max_steps: int = key(30, "placements per episode before truncation", ge=1)
    num_candidates: int = key(20, "K, the manager's candidate slots (clamped to num_objects)", ge=1)
    pool_size: int = key(128, "catalog items instantiated at construction", ge=1)
    catalog_seed: int = key(0, "seed of the item pool; the run's seed draws the episodes", ge=0)
    shapes: list[str] = key(
        list(PROCEDURAL_KINDS),
        "procedural kinds the pool draws from",
        choices=PROCEDURAL_KINDS,
        nonempty=True,
    )
    mesh_paths: list[str] | None = key(
        None, "OBJ/STL files (metres) instead of procedural shapes; needs gpurl[meshes]"
    )
    reward_weights: rw.RewardWeights = group(rw.RewardWeights, "the shaped reward's weights")
    compile_placement: bool = key(
        False, "run the z-map through torch.compile (seconds to compile, ~10x faster on a CPU)"
    )
    illegal_action: str = key(
        "terminate",
        "terminate: an illegal corner ends the episode | noop: it places nothing",
        choices=ILLEGAL_ACTIONS,
    )


@register("env", "packing", PackingConfig)
class PackingEnv(state_attributes(PackingState), NativeEnv):
    def __init__(
        self,
        num_envs: int = 1,
        device="cpu",
        seed: int = 0,
        num_objects: int = 20,
        resolution: int = 200,
        grid_step: int = 4,
        box_size: Sequence[float] = (0.256, 0.256, 0.256),
        max_steps: int = 30,
        num_candidates: int = 20,
        pool_size: int = 128,
        catalog_seed: int = 0,
        shapes: Sequence[str] = PROCEDURAL_KINDS,
        mesh_paths: Sequence[str] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        compile_placement: bool = False,
        illegal_action: str = "terminate",
    ):
        box_size = tuple(float(v) for v in box_size)
        _validate(
            num_objects, resolution, grid_step, box_size, max_steps, num_candidates, pool_size
        )
        unknown = sorted(set(shapes) - set(PROCEDURAL_KINDS))
        if unknown:
            raise ConfigError(f"unknown shapes {unknown}: choose from {list(PROCEDURAL_KINDS)}")
        if illegal_action not in ILLEGAL_ACTIONS:
            raise ConfigError(
                f"env.illegal_action must be one of {ILLEGAL_ACTIONS}, got {illegal_action!r}"
            )
        self.illegal_action = illegal_action
        super().__init__(num_envs, device, seed)
        self.max_episode_steps = int(max_steps)
        self.num_objects = int(num_objects)
        self.num_candidates = min(int(num_candidates), self.num_objects)
        try:
            self.weights = rw.RewardWeights(**dict(reward_weights or {}))
        except TypeError as err:
            raise ConfigError(f"bad env.reward_weights: {err}") from err
        sep = box_size[0] / resolution
        if mesh_paths:
            from gpurl.envs.packing.meshes import mesh_items

            items = mesh_items(list(mesh_paths), pool_size, sep, box_size, catalog_seed)
        else:
            items = procedural_items(pool_size, sep, box_size, catalog_seed, tuple(shapes))
        extents = torch.tensor([it.extents for it in items])
        # padding to a multiple of 16 lets the fused kernel's reduction vectorise fully:
        # about 3x faster on AVX-512 CPUs than an odd size (F = 45 vs 48)
        size = -(-(max_footprint(extents, sep) + 1) // FOOTPRINT_ALIGN) * FOOTPRINT_ALIGN
        pool = build_item_maps(items, sep, size, self.device)
        self.geometry = PackingGeometry(
            box_size, resolution, grid_step, pool, bool(compile_placement)
        )
        self._bbox_volume = pool.extents.prod(-1)
        self._box_volume = box_size[0] * box_size[1] * box_size[2]
        self._box_height = box_size[2]
        self._set_specs(*self._specs())
        self._alloc()

    # -- specs and state ------------------------------------------------------------------
    def _specs(self):
        b, n, k, r = (
            self.batch_size,
            self.num_objects,
            self.num_candidates,
            self.geometry.resolution,
        )
        g, dev = self.geometry.corners, self.device
        obs = {
            "heightmap": Unbounded(shape=(*b, r, r), device=dev),
            "items": Categorical(len(self._bbox_volume), shape=(*b, n), device=dev),
            "packed": Binary(n=n, shape=(*b, n), dtype=torch.bool, device=dev),
            "candidates": Categorical(n, shape=(*b, k), device=dev),
            "candidate_mask": Binary(n=k, shape=(*b, k), dtype=torch.bool, device=dev),
            "candidate_features": Unbounded(shape=(*b, k, MANAGER_SCALARS), device=dev),
        }
        action = MultiCategorical(
            nvec=[k, NUM_ORIENTATIONS, g, g], shape=(*b, 4), dtype=torch.int64, device=dev
        )
        return obs, action

    def _alloc(self):
        b, n, r, dev = self.num_envs, self.num_objects, self.geometry.resolution, self.device
        self.env_state = PackingState(
            hm=torch.zeros(b, r, r, device=dev),
            items=torch.zeros(b, n, dtype=torch.int64, device=dev),
            packed=torch.zeros(b, n, dtype=torch.bool, device=dev),
            steps=torch.zeros(b, dtype=torch.int64, device=dev),
            packed_volume=torch.zeros(b, device=dev),
            c=torch.zeros(b, device=dev),
            p=torch.zeros(b, device=dev),
            placements=torch.zeros((), dtype=torch.int64, device=dev),
        )

    # -- NativeEnv ------------------------------------------------------------------------
    def _reset_where(self, mask: torch.Tensor) -> None:
        s = self.env_state
        fresh = torch.randint(
            len(self._bbox_volume), s.items.shape, generator=self.rng, device=self.device
        )
        self.env_state = s._replace(
            items=torch.where(mask[:, None], fresh, s.items),
            packed=s.packed & ~mask[:, None],
            hm=torch.where(mask[:, None, None], 0.0, s.hm),
            steps=torch.where(mask, 0, s.steps),
            packed_volume=torch.where(mask, 0.0, s.packed_volume),
            c=torch.where(mask, 0.0, s.c),
            p=torch.where(mask, 0.0, s.p),
        )

    def candidates(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Candidate item indices [B, K] (into the episode's items) and their mask."""
        s = self.env_state
        return candidate_slots(self._bbox_volume[s.items], s.packed, self.num_candidates)

    def _advance(self, action: torch.Tensor) -> StepResult:
        geom, pool, s = self.geometry, self.geometry.pool, self.env_state
        a = action.to(torch.int64).reshape(self.num_envs, 4)
        slot = a[:, 0].clamp(0, self.num_candidates - 1)
        ori = a[:, 1].clamp(0, NUM_ORIENTATIONS - 1)
        ix, iy = (a[:, 2:].clamp(0, geom.corners - 1)).unbind(-1)
        cand, cmask = self.candidates()
        item = cand.gather(1, slot[:, None]).squeeze(1)
        slot_ok = cmask.gather(1, slot[:, None]).squeeze(1)
        pid = s.items.gather(1, item[:, None]).squeeze(1)
        x, y = ix * geom.grid_step, iy * geom.grid_step
        if self.illegal_action == "noop":  # decide termination on the full legal map
            z_all, legal_all = geom.placement(s.hm, pid)
            env = torch.arange(self.num_envs, device=self.device)
            z, legal = z_all[env, ori, ix, iy], legal_all[env, ori, ix, iy]
            has_legal = legal_all.flatten(1).any(1)
        else:  # trust the legal mask: an action outside it means none was left
            z, legal = placement_at(
                s.hm,
                pool.hb[pid, ori],
                pool.ht_max[pid, ori],
                pool.footprint[pid, ori],
                x,
                y,
                geom.height,
            )
            has_legal = legal
        placed = legal & slot_ok
        hm = place(
            s.hm,
            pool.ht[pid, ori],
            z,
            x,
            y,
            placed,
        )
        hit = torch.nn.functional.one_hot(item, self.num_objects).bool() & placed[:, None]
        packed = s.packed | hit
        added = torch.where(placed, pool.volume[pid], 0.0)
        packed_volume = s.packed_volume + added
        c = rw.compactness(hm, packed_volume, geom.sep)
        p = rw.pyramidality(hm, packed_volume, geom.sep)
        reward = rw.shaped_reward(
            placed,
            s.c,
            c,
            s.p,
            p,
            rw.max_height(s.hm),
            rw.max_height(hm),
            geom.height,
            self.weights,
            added / self._box_volume,
        )
        steps = s.steps + 1
        self.env_state = PackingState(
            hm, s.items, packed, steps, packed_volume, c, p, s.placements + placed.sum()
        )
        terminated = packed.all(1) | (slot_ok & ~has_legal)
        truncated = (steps >= self.max_episode_steps) & ~terminated
        return StepResult(reward[:, None], terminated[:, None], truncated[:, None])

    def _observation(self) -> dict[str, torch.Tensor]:
        s = self.env_state
        cand, cmask = self.candidates()
        pid = s.items.gather(1, cand)
        return {
            "heightmap": s.hm,
            "items": s.items,
            "packed": s.packed,
            "candidates": cand,
            "candidate_mask": cmask,
            "candidate_features": manager_scalars(self.geometry, s.hm, pid, cmask),
        }

    @property
    def model(self) -> PackingGeometry:
        """What a policy may call (EnvInfo.model): the box, the stride grid, the item pool
        and the one canonical placement computation."""
        return self.geometry

    # -- reporting ------------------------------------------------------------------------
    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Per env [B]: packed count, success, utilisation V_p / (L W H), C, P, max height."""
        l, w, h = self.geometry.box_size
        s = self.env_state
        count = s.packed.sum(1)
        return {
            "packed": count.to(torch.float32),
            "success": (count == self.num_objects).to(torch.float32),
            "utilisation": s.packed_volume / (l * w * h),
            "compactness": s.c,
            "pyramidality": s.p,
            "max_height": rw.max_height(s.hm),
        }

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """One episode per env with `policy` (a TensorDict module): means of packed count,
        success, utilisation, C, P and max height, host floats; "return" is the mean
        utilisation, the quantity a packer maximises."""
        metrics = evaluate(self, lambda geometry: policy)
        return {"return": metrics["utilisation"], **metrics}

    FRAME = 208  # pixels a side: a multiple of 16, as video encoders like

    def render_frames(self) -> torch.Tensor:
        """The box from above: its heightmap in greys, white at the box's height."""
        hm = self.env_state.hm  # [B, r, r] metres
        r = hm.shape[-1]
        index = (torch.arange(self.FRAME, device=hm.device) * r) // self.FRAME
        level = (hm[:, index][:, :, index] / self._box_height).clamp(0, 1)
        grey = (40 + 215 * level).to(torch.uint8)
        inside = torch.zeros(self.FRAME, self.FRAME, dtype=torch.bool, device=hm.device)
        inside[3:-3, 3:-3] = True  # the box's walls: a 3-pixel brown border
        walls = torch.tensor((150, 100, 50), dtype=torch.uint8, device=hm.device)
        return torch.where(inside[..., None], grey.unsqueeze(-1), walls)


def _validate(num_objects, resolution, grid_step, box_size, max_steps, num_candidates, pool_size):
    checks = [
        (int(num_objects) >= 1, f"env.num_objects must be >= 1, got {num_objects}"),
        (int(resolution) >= 8, f"env.resolution must be >= 8, got {resolution}"),
        (
            1 <= int(grid_step) <= int(resolution),
            f"env.grid_step must be in [1, resolution], got {grid_step}",
        ),
        (
            len(box_size) == 3 and min(box_size) > 0,
            f"env.box_size must be 3 positive sizes, got {box_size}",
        ),
        (
            len(box_size) == 3 and box_size[0] == box_size[1],
            f"env.box_size needs L == W (square cells), got {box_size}",
        ),
        (int(max_steps) >= 1, f"env.max_steps must be >= 1, got {max_steps}"),
        (int(num_candidates) >= 1, f"env.num_candidates must be >= 1, got {num_candidates}"),
        (int(pool_size) >= 1, f"env.pool_size must be >= 1, got {pool_size}"),
    ]
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
