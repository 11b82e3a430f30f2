"""The packing agent: a manager Double DQN picks the item, a worker Double DQN places it
(Huang et al., RA-L 2023; the task and its hierarchy: docs/envs/packing.md).

    manager   Q_m(s, slot) over the K candidate items (ManagerNet over each candidate's
              7 maps and 8 scalars), masked to the valid candidates
    worker    Q_w(s, item, (o, x, y)) = the U-Net's score of orientation o at exactly cell
              (x, y), plus a small term over that placement's resting height and top;
              the greedy placement is the masked argmax jointly over orientations and
              stride-grid corners, exploration uniform over the legal placements

Both levels learn from the same reward with gamma 0.95 and Double DQN targets:

    manager   r + gamma * Q_m_target(s', a*),  a* = argmax over s' valid candidates of Q_m
    worker    r + gamma * Q_w_target(s', i', p*), i' = the online manager's greedy item at
              s', p* = argmax over the legal placements of i' of the online Q_w
    (0 bootstrap at a terminal s', or when s' has no valid candidate / legal placement;
    the target networks run at a* and p* alone: one candidate, one orientation)

Schedules are closed-form functions of the progress record's episode counter, in
episode rounds (progress.episodes / num_envs: the spec's episodes for one env):

    epsilon(ep)   epsilon_floor + epsilon_scale * exp(-ep / epsilon_decay)
    stage 1       ep < stage1_episodes: worker only; the item comes from a heuristic
                  drawn per step among largest / smallest / random / flattest
    stage 2       the manager picks; it learns during every `manager_every`-th episode
                  round; both learning rates drop to lr_stage2
    targets       hard copies of both networks every `target_every` episode rounds

The gates are device tensors: the learning rates are device scalars (0 when a level
does not learn) and a due target copy is a lerp with weight 1, so no schedule reads the
device from the host. Replay keeps the compact state (float16 heightmap, item ids,
candidates, the action); the maps both networks read are rebuilt from it at sample time
through the env's one canonical geometry (envs/packing/features.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase

from gpurl.agents.base import (
    OffPolicyAgent,
    TargetPairs,
    clip_and_step,
    make_optimizer,
    scalars,
    target_copy,
)
from gpurl.agents.config import AgentConfig, gamma_key, lr_key, max_grad_norm_key
from gpurl.core.compile import EAGER, CompileSpec, autocast, bf16_supported
from gpurl.core.config import declare, group, key
from gpurl.core.progress import Progress
from gpurl.core.registry import register
from gpurl.core.replay import ReplaySpec, weighted_mean
from gpurl.envs.info import EnvInfo
from gpurl.envs.packing.baselines import uniform_choice
from gpurl.envs.packing.features import (
    all_orientations,
    manager_maps,
    manager_scalars,
    orientation_maps,
)
from gpurl.envs.packing.geometry import PackingGeometry
from gpurl.envs.packing.orientations import NUM_ORIENTATIONS
from gpurl.envs.packing.placement import placement_maps, void_depth
from gpurl.errors import ConfigError
from gpurl.policies.packing import ManagerConfig, ManagerNet, WorkerConfig, WorkerUNet
from gpurl.policies.wrapper import ActingPolicy, exploring

OBS_KEYS = ["heightmap", "items", "candidates", "candidate_mask", "candidate_features"]
HEURISTICS = 4  # largest, smallest, random, flattest


# -- Q-values -------------------------------------------------------------------------------
def corner_cells(scores: torch.Tensor, grid_step: int) -> torch.Tensor:
    """Scores [..., R, R] at the stride-grid corners [..., G, G]: corner (i, j) is exactly
    cell (grid_step i, grid_step j)."""
    return scores[..., ::grid_step, ::grid_step]


def manager_q(
    net: ManagerNet,
    geom: PackingGeometry,
    hm: torch.Tensor,
    pool_ids: torch.Tensor,
    scalars: torch.Tensor,
    chunk: int,
) -> torch.Tensor:
    """Q_m [B, K] for candidates pool_ids [B, K]; maps are built `chunk` slots at a time."""
    k = pool_ids.shape[1]
    parts = [
        net(manager_maps(geom, hm, pool_ids[:, i : i + chunk]), scalars[:, i : i + chunk])
        for i in range(0, k, chunk)
    ]
    return torch.cat(parts, 1)


def worker_inputs(
    geom: PackingGeometry,
    hm: torch.Tensor,
    pool_ids: torch.Tensor,
    orientations: torch.Tensor,
    z: torch.Tensor,
    legal: torch.Tensor,
) -> torch.Tensor:
    """The U-Net's input for items pool_ids [B] in orientations [B, O]: the 3 maps of
    `orientation_maps`, plus the placement maps of those orientations spread to cells
    (each corner's value over its grid_step x grid_step block, so the corner cell reads
    its own): resting height z / H, top (z + max ht) / H and legality. [B, O, 6, R, R]."""
    r, g, h = geom.resolution, geom.grid_step, geom.height
    top = z + geom.pool.ht_max[pool_ids[:, None], orientations][..., None, None]
    placement = torch.stack((_unit(z, h), _unit(top, h), legal.to(z.dtype)), 2)
    cells = placement.repeat_interleave(g, -2).repeat_interleave(g, -1)[..., :r, :r]
    return torch.cat((orientation_maps(geom, hm, pool_ids, orientations), cells), 2)


def worker_q(
    net: WorkerUNet,
    geom: PackingGeometry,
    hm: torch.Tensor,
    pool_ids: torch.Tensor,
    chunk: int,
    z: torch.Tensor | None = None,
    legal: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q_w [B, 24, G, G] of every placement of items pool_ids [B], and the legal mask.

    The U-Net runs over `chunk` orientations at a time (memory stays bounded at R = 200).
    """
    if z is None:
        z, legal = geom.placement(hm, pool_ids)
    score = 0.0
    if net.spatial:
        every = all_orientations(hm.device).expand(pool_ids.shape[0], -1)
        parts = []
        for i in range(0, NUM_ORIENTATIONS, chunk):
            o = slice(i, i + chunk)
            maps = worker_inputs(geom, hm, pool_ids, every[:, o], z[:, o], legal[:, o])
            parts.append(corner_cells(net.scores(maps), geom.grid_step))
        score = torch.cat(parts, 1)
    p, h = geom.pool, geom.height
    top = z + p.ht_max[pool_ids][:, :, None, None]
    peak = hm.amax((1, 2))[:, None, None, None]
    void = void_depth(hm, p.hb[pool_ids], z, geom.grid_step) / h
    q = score + net.corner_term(*_relative(z, top, peak, h), void)
    return q + net.state_term(worker_scalars(geom, hm, pool_ids))[:, None, None, None], legal


def worker_q_at(
    net: WorkerUNet, geom: PackingGeometry, hm: torch.Tensor, pool_ids, ori, ix, iy
) -> torch.Tensor:
    """Q_w [B] of one placement per env: only that orientation goes through the U-Net."""
    p, h = geom.pool, geom.height
    z, legal = placement_maps(
        hm,
        p.hb[pool_ids, ori][:, None],
        p.ht_max[pool_ids, ori][:, None],
        p.footprint[pool_ids, ori][:, None],
        geom.grid_step,
        h,
        geom.compiled,
    )
    env = torch.arange(hm.shape[0], device=hm.device)
    score = 0.0
    if net.spatial:
        maps = worker_inputs(geom, hm, pool_ids, ori[:, None], z, legal)[:, 0]
        score = corner_cells(net.scores(maps), geom.grid_step)[env, ix, iy]
    void = void_depth(hm, p.hb[pool_ids, ori][:, None], z, geom.grid_step)[env, 0, ix, iy] / h
    z = z[env, 0, ix, iy]
    top = z + p.ht_max[pool_ids, ori]
    q = score + net.corner_term(*_relative(z, top, hm.amax((1, 2)), h), void)
    return q + net.state_term(worker_scalars(geom, hm, pool_ids))


def worker_scalars(geom: PackingGeometry, hm: torch.Tensor, pool_ids: torch.Tensor):
    """The worker's state scalars [B, 8]: the manager's 8 scalars of the chosen item."""
    ones = torch.ones_like(pool_ids, dtype=torch.bool)[:, None]
    return manager_scalars(geom, hm, pool_ids[:, None], ones)[:, 0]


def _relative(z, top, peak, height: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The placement term's inputs, relative to the pile's current peak: (z - peak) / H
    and (top - peak) / H. Within a state they rank placements as z and top do; across
    states they do not grow with the pile, so bootstrapping from a fuller box cannot
    feed "higher is better" back into them (absolute heights did, in every run)."""
    return ((z - peak) / height).clamp(-1.0, 1.0), ((top - peak) / height).clamp(-1.0, 1.0)


def _at(scalars: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    """The candidate scalars [B, K, 8] of slot [B], as a one-candidate set [B, 1, 8]."""
    return scalars.gather(1, slot[:, None, None].expand(-1, 1, scalars.shape[-1]))


def _unit(x: torch.Tensor, height: float) -> torch.Tensor:
    return (x / height).clamp(0.0, 2.0)


def masked_argmax(q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Flat index [B] of the largest q [B, ...] over the True entries of mask."""
    return q.masked_fill(~mask, float("-inf")).flatten(1).argmax(1)


def joint_argmax(q: torch.Tensor, legal: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Masked argmax of q [B, O, G, G] jointly over orientations and corners: (o, ix, iy)."""
    return decode(masked_argmax(q, legal), q.shape[-1])


def decode(flat: torch.Tensor, corners: int) -> tuple[torch.Tensor, ...]:
    """Flat index over (o, ix, iy) -> (o, ix, iy)."""
    cells = corners * corners
    return flat // cells, (flat % cells) // corners, flat % corners


def heuristic_slot(mask: torch.Tensor, scalars: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
    """Stage 1's item order: per env rule 0 largest, 1 smallest, 2 random, 3 flattest
    (least height over the larger footprint side), among the valid candidates (which
    come first, largest bounding box first: features.candidate_slots)."""
    count = mask.sum(1)
    largest = torch.zeros_like(count)
    smallest = (count - 1).clamp_min(0)
    flatness = scalars[..., 2] / scalars[..., :2].amax(-1).clamp_min(1e-6)
    flattest = flatness.masked_fill(~mask, float("inf")).argmin(1)
    rules = torch.stack((largest, smallest, uniform_choice(mask), flattest), 1)
    return rules.gather(1, rule[:, None]).squeeze(1)


class Schedule:
    """The agent's episode-round schedules, closed-form in the progress record."""

    def __init__(self, cfg, num_envs: int, random_frames: int):
        self.num_envs = num_envs
        self.random_frames = int(random_frames)
        self.floor, self.scale = float(cfg.epsilon_floor), float(cfg.epsilon_scale)
        self.decay = float(cfg.epsilon_decay)
        self.stage1 = float(cfg.stage1_episodes)
        self.manager_every = int(cfg.manager_every)
        self.target_every = int(cfg.target_every)

    def rounds(self, progress: Progress) -> torch.Tensor:
        return progress.episodes.double() / self.num_envs

    def epsilon(self, progress: Progress) -> torch.Tensor:
        eps = self.floor + self.scale * torch.exp(-self.rounds(progress) / self.decay)
        return torch.where(progress.frames < self.random_frames, 1.0, eps)

    def stage2(self, progress: Progress) -> torch.Tensor:
        return self.rounds(progress) >= self.stage1

    def manager_turn(self, progress: Progress) -> torch.Tensor:
        """The manager learns during every manager_every-th episode round of stage 2."""
        turn = self.rounds(progress).floor().long() % self.manager_every == 0
        return self.stage2(progress) & turn

    def target_round(self, progress: Progress) -> torch.Tensor:
        return (self.rounds(progress) / self.target_every).floor()


# -- acting ---------------------------------------------------------------------------------
class HRLPolicy(ActingPolicy):
    """Manager then worker, batched over envs: td in, td out with "action" [B, 4] =
    (slot, orientation, ix, iy). Greedy under ExplorationType.DETERMINISTIC; otherwise
    epsilon-greedy at both levels, with stage 1's heuristic item order."""

    def __init__(self, agent: HRLDQNAgent):
        super().__init__()
        self.manager, self.worker = agent.manager, agent.worker
        self.geom, self.progress, self.schedule = agent.geom, agent.progress, agent.schedule
        self.manager_chunk, self.worker_chunk = agent.manager_chunk, agent.worker_chunk
        self.autocast = agent.autocast
        self.in_keys = list(OBS_KEYS)
        self.out_keys = ["action"]

    @torch.no_grad()
    def forward(self, td: TensorDictBase) -> TensorDictBase:
        with self.autocast():
            return self._act(td)

    def greedy_slot(self, td: TensorDictBase) -> torch.Tensor:
        """The manager's greedy candidate slot [B]."""
        hm, mask, scalars = td["heightmap"], td["candidate_mask"], td["candidate_features"]
        pool_c = td["items"].gather(1, td["candidates"])
        q_m = manager_q(self.manager, self.geom, hm, pool_c, scalars, self.manager_chunk)
        return masked_argmax(q_m, mask)

    def _worker_q(self, td: TensorDictBase, slot: torch.Tensor):
        """Q_w and the legal mask [B, 24, G, G] of the item in candidate slot [B]."""
        pid = td["items"].gather(1, td["candidates"].gather(1, slot[:, None])).squeeze(1)
        return worker_q(self.worker, self.geom, td["heightmap"], pid, self.worker_chunk)

    def greedy_placement(self, td: TensorDictBase, slot: torch.Tensor) -> TensorDictBase:
        """The worker's greedy placement of the item in candidate slot [B], whoever chose
        it (tools/eval_packing.py pairs it with largest-first): writes "action"."""
        ori, ix, iy = joint_argmax(*self._worker_q(td, slot))
        td.set("action", torch.stack((slot, ori, ix, iy), -1))
        return td

    def _act(self, td: TensorDictBase) -> TensorDictBase:
        hm, mask, scalars = td["heightmap"], td["candidate_mask"], td["candidate_features"]
        slot = self.greedy_slot(td)
        explore = exploring()
        b = hm.shape[0]
        if explore:
            eps = self.schedule.epsilon(self.progress)
            rule = torch.randint(HEURISTICS, (b,), device=hm.device)
            slot = torch.where(torch.rand(b, device=hm.device) < eps, uniform_choice(mask), slot)
            slot = torch.where(
                self.schedule.stage2(self.progress), slot, heuristic_slot(mask, scalars, rule)
            )
        q_w, legal = self._worker_q(td, slot)
        flat = masked_argmax(q_w, legal)
        if explore:
            random_flat = uniform_choice(legal.flatten(1))
            flat = torch.where(torch.rand(b, device=hm.device) < eps, random_flat, flat)
        ori, ix, iy = decode(flat, self.geom.corners)
        td.set("action", torch.stack((slot, ori, ix, iy), -1))
        return td


# -- the agent ------------------------------------------------------------------------------
@declare(name="hrl_dqn")
class HRLDQNConfig(AgentConfig):
    """Hierarchical Double DQN for packing (gpurl/agents/hrl_dqn.py; Huang et al., RA-L
    2023; docs/envs/packing.md). Defaults are the task spec's: full-size networks, gamma
    0.95, Adam 1e-3 then 1e-4 at stage 2, grad-norm clip 1.0, hard target copies every 5
    episodes, epsilon(ep) = 0.1 + 0.8 exp(-ep / 60), stage 1 for 100 episodes, the manager
    learning every 4th episode. Episodes count rounds: progress.episodes / env.num_envs."""

    gamma: float = gamma_key(0.95)
    lr: float = lr_key(1.0e-3, "Adam learning rate of both networks in stage 1")
    lr_stage2: float = lr_key(1.0e-4, "both learning rates from stage 2 on")
    max_grad_norm: float | None = max_grad_norm_key(1.0)
    epsilon_floor: float = key(0.1, "epsilon(ep) = floor + scale exp(-ep / decay)", ge=0, le=1)
    epsilon_scale: float = key(0.8, "see epsilon_floor (floor + scale <= 1)", ge=0, le=1)
    epsilon_decay: float = key(60, "episode rounds", gt=0)
    stage1_episodes: int = key(
        100, "episode rounds of stage 1 (worker only, heuristic item order)", ge=0
    )
    manager_every: int = key(4, "stage 2: the manager learns during every n-th episode round", ge=1)
    target_every: int = key(5, "episode rounds between hard target copies", ge=1)
    manager_chunk: int = key(20, "candidates per manager pass (memory at R = 200)", ge=1)
    worker_chunk: int = key(
        6,
        "orientations per U-Net pass (memory at R = 200)",
        ge=1,
        note=(
            "On a CPU the seed benchmark's episode ran 21.2 s with worker_chunk 6 against 24.0 s",
            "with 24 (docs/benchmarks.md#packing-seed-benchmark).",
        ),
    )
    bf16: bool = key(
        False,
        "forward passes under bf16 autocast (CUDA, or a CPU with native bf16: AVX-512 BF16 / AMX)",
    )
    manager: ManagerConfig = group(
        ManagerConfig,
        "ResNet-18 trunk over 7 maps + 8 -> 64 scalar branch + 576 -> 128 -> 128 -> 1",
    )
    worker: WorkerConfig = group(
        WorkerConfig,
        "14-conv U-Net 32 -> 64 -> 128 -> 256 over the 3 maps + 3 "
        "placement maps, score at the exact cell",
    )

    @classmethod
    def check_together(cls, node: dict) -> None:
        channels, blocks = node["manager"]["channels"], node["manager"]["blocks"]
        if len(channels) != len(blocks):
            as_cli = lambda xs: "[" + ",".join(str(x) for x in xs) + "]"  # noqa: E731
            raise ConfigError(
                f"agent.manager.channels={as_cli(channels)} and agent.manager.blocks="
                f"{as_cli(blocks)} must have one entry per ResNet stage each"
            )
        if node["epsilon_floor"] + node["epsilon_scale"] > 1:
            raise ConfigError(
                f"agent.epsilon_floor + agent.epsilon_scale = "
                f"{node['epsilon_floor'] + node['epsilon_scale']} is above 1: epsilon is a "
                f"probability"
            )


@register("agent", "hrl_dqn", HRLDQNConfig)
class HRLDQNAgent(OffPolicyAgent):
    name = "hrl_dqn"
    multi_part_actions = True  # acts in packing's (slot, orientation, ix, iy) action

    def __init__(
        self,
        cfg,
        info: EnvInfo,
        progress: Progress,
        random_frames: int = 0,
        compile: CompileSpec = EAGER,
    ):
        super().__init__(cfg, info, progress, random_frames, compile)
        if not isinstance(info.model, PackingGeometry):
            raise ConfigError(
                "agent=hrl_dqn packs items on heightmaps: use it with env=packing "
                "(e.g. experiment=packing_hrl_cpu)"
            )
        self.geom: PackingGeometry = info.model
        dev = info.device
        self.manager = ManagerNet(
            cfg.manager.channels,
            cfg.manager.blocks,
            cfg.manager.stem,
            cfg.manager.scalar_features,
            cfg.manager.hidden,
        ).to(dev)
        self.worker = WorkerUNet(cfg.worker.channels, cfg.worker.corner_features).to(dev)
        self.manager_target = target_copy(self.manager)
        self.worker_target = target_copy(self.worker)
        self.target_nets = TargetPairs(
            (self.manager_target, self.manager), (self.worker_target, self.worker)
        )
        self.manager_chunk = int(cfg.manager_chunk)
        self.worker_chunk = int(cfg.worker_chunk)
        if self.manager_chunk < 1 or self.worker_chunk < 1:
            raise ConfigError("agent.manager_chunk and agent.worker_chunk must be >= 1")
        # learning rates as device scalars: the stage gates set them without a host read
        self.worker_lr = torch.tensor(float(cfg.lr), device=dev)
        self.manager_lr = torch.zeros((), device=dev)
        self.worker_optimizer = make_optimizer(self.worker.parameters(), self.worker_lr)
        self.manager_optimizer = make_optimizer(self.manager.parameters(), self.manager_lr)
        self.schedule = Schedule(cfg, int(info.batch_shape.numel()), random_frames)
        self.copied = torch.zeros((), dtype=torch.float64, device=dev)  # last target round
        # agent.bf16: forward passes in bf16 (gradients and Adam stay fp32), on CUDA and
        # on CPUs with native bf16 (AVX-512 BF16 / AMX: about 2x the fp32 rate for the
        # U-Net and the ResNet here, docs/benchmarks.md#packing-seed-benchmark)
        self.bf16 = bool(cfg.get("bf16", False)) and bf16_supported(dev)
        self.device = dev
        self.policy = HRLPolicy(self)
        # compile.update: both levels' losses and steps, one graph
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        return {
            "manager": self.manager,
            "worker": self.worker,
            "manager_target": self.manager_target,
            "worker_target": self.worker_target,
        }

    def optimizers(self):
        return {
            "worker_optimizer": self.worker_optimizer,
            "manager_optimizer": self.manager_optimizer,
        }

    def buffers(self):
        return {"copied": self.copied}  # the last target round copied

    def autocast(self):
        return autocast(self.device, self.bf16)

    def replay_spec(self) -> ReplaySpec:
        return ReplaySpec(
            n_step=1, gamma=float(self.cfg.gamma), storage_dtypes={"heightmap": torch.float16}
        )

    # -- learning ---------------------------------------------------------------------------
    @torch.no_grad()
    def targets(self, batch: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        """Double DQN targets (manager, worker) [n] with the masks of the next state."""
        geom, nxt = self.geom, batch["next"]
        hm, mask, scalars = nxt["heightmap"], nxt["candidate_mask"], nxt["candidate_features"]
        pool_c = nxt["items"].gather(1, nxt["candidates"])
        online = manager_q(self.manager, geom, hm, pool_c, scalars, self.manager_chunk)
        slot = masked_argmax(online, mask)
        # the target nets run at the online argmax only: one candidate, one orientation
        pid = pool_c.gather(1, slot[:, None]).squeeze(1)
        v_m = manager_q(self.manager_target, geom, hm, pid[:, None], _at(scalars, slot), 1)[:, 0]
        v_m = torch.where(mask.any(1), v_m, 0.0)
        q_w, legal = worker_q(self.worker, geom, hm, pid, self.worker_chunk)
        ori, ix, iy = joint_argmax(q_w, legal)
        v_w = worker_q_at(self.worker_target, geom, hm, pid, ori, ix, iy)
        v_w = torch.where(legal.flatten(1).any(1) & mask.any(1), v_w, 0.0)
        reward, discount = batch["reward"], batch["discount"]
        return reward + discount * v_m, reward + discount * v_w

    def update(self, batch: TensorDict, progress: Progress) -> TensorDict:
        cfg, sched = self.cfg, self.schedule
        stage2 = sched.stage2(progress)
        self.worker_lr.copy_(torch.where(stage2, float(cfg.lr_stage2), float(cfg.lr)))
        self.manager_lr.copy_(torch.where(sched.manager_turn(progress), float(cfg.lr_stage2), 0.0))
        metrics = self.learn_step(batch)
        # a due hard copy is a lerp with weight 1 (0 otherwise): no host read
        rnd = sched.target_round(progress)
        due = (rnd > self.copied).float()
        self.target_nets.polyak(due)
        self.copied.copy_(torch.maximum(self.copied, rnd))
        return metrics

    def learn(self, batch: TensorDict) -> TensorDict:
        with self.autocast():
            return self._learn(batch)

    def _learn(self, batch: TensorDict) -> TensorDict:
        geom = self.geom
        t_m, t_w = self.targets(batch)
        hm = batch["heightmap"]
        slot, ori, ix, iy = batch["action"].long().unbind(-1)
        pool_c = batch["items"].gather(1, batch["candidates"])
        pid = pool_c.gather(1, slot[:, None]).squeeze(1)
        q_w = worker_q_at(self.worker, geom, hm, pid, ori, ix, iy).float()
        t_m, t_w = t_m.float(), t_w.float()
        loss_w = weighted_mean(
            F.smooth_l1_loss(q_w, t_w, reduction="none"), batch, self.uniform_sample
        )
        clip_and_step(self.worker_optimizer, loss_w, self.cfg.max_grad_norm)
        # the manager's loss reads the taken slot's Q alone: only that candidate's maps go
        # through the ResNet (its GroupNorm is per map, so no other candidate moves it)
        q_m = manager_q(
            self.manager, geom, hm, pid[:, None], _at(batch["candidate_features"], slot), 1
        )
        q_m = q_m[:, 0].float()
        loss_m = weighted_mean(
            F.smooth_l1_loss(q_m, t_m, reduction="none"), batch, self.uniform_sample
        )
        clip_and_step(self.manager_optimizer, loss_m, self.cfg.max_grad_norm)
        return scalars(
            loss_worker=loss_w.detach(),
            loss_manager=loss_m.detach(),
            q_worker=q_w.detach().mean(),
            q_manager=q_m.detach().mean(),
            epsilon=self.schedule.epsilon(self.progress).float(),
            stage=self.schedule.stage2(self.progress).float() + 1.0,
        )
