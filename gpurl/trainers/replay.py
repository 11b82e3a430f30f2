"""The device-resident replay: a time-major ring of TensorDict rows, declared by the agent.

Layout. Each row is one collected time step of S streams, a stream being one env slot
(one env, or one (env, robot) pair of a multi-robot env: the group dims are flattened
into streams). Every entry is a preallocated tensor [rows, S, ...] on the env's
device. Because rows are whole time steps, the write cursor advances by the batch's
step count, a host int known without reading the device, and the step after a row of
a stream is the next row of the same stream: n-step returns are read along a stream at
sample time, cut at the first done, never crossing into another stream.

What the agent declares (ReplaySpec): n-step and gamma, prioritized replay (alpha, the
beta schedule over the progress record's frames, the sampler kind), and whether next
observations are stored. Capacity and batch size come from the trainer config
(`trainer.buffer_size` counts transitions, i.e. rows x streams).

A sample is a TensorDict [batch_size] holding the observation entries (under their env
keys, e.g. ("agents", "self_state"), now one slot each), "action",
("next", observation entries) at the step the return bootstraps from, and

    reward    the n-step discounted reward sum
    discount  gamma^k for the k steps summed, 0 if the last one terminated: the target
              is reward + discount * V(next)
    weight    importance weight x validity (0 for the slot of a robot that was not
              running, e.g. an empty or stopped robot slot); losses are
              sum(weight * loss) / sum(valid) (see `weighted_mean`)
    valid     1 where the slot held a running robot (always 1 on single-agent envs)
    index     flat storage index, for `update_priorities`

Prioritized replay gives new transitions the largest priority seen so far (0 for
invalid slots, which are then never drawn), samples proportionally to p^alpha, and
weights by (N P(i))^-beta / max.

`draw(bounds)` is `sample()` with the ring's extent read from device tensors instead
of host ints (`bounds`, refreshed by `extend`): it can then be traced
and captured together with the update that consumes it (OffPolicyAgent.fuse_draw), so
that an update under CUDA graphs is one graph launch, with no eager sampling kernels
and no copy of the sample into the graph's inputs.
"""

from __future__ import annotations

from math import prod

import torch
from tensordict import TensorDict

from gpurl.core.keys import as_tuple, normalize
from gpurl.core.private import unchecked_tensordict
from gpurl.core.progress import Progress
from gpurl.core.replay import ReplaySpec
from gpurl.core.returns import nstep_returns
from gpurl.core.runs import balance_runs
from gpurl.core.schedules import LinearSchedule
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError
from gpurl.trainers.priority import importance_weights, make_priority_sampler


class DeviceReplay:
    def __init__(
        self,
        spec: ReplaySpec,
        info: EnvInfo,
        obs_keys: list,
        capacity: int,
        batch_size: int,
        device,
        runs: int = 1,
        gamma=None,
    ):
        if spec.n_step < 1:
            raise ConfigError(f"agent.n_step must be >= 1, got {spec.n_step}")
        if runs > 1 and spec.prioritized:
            raise ConfigError(
                "prioritized replay is not supported with trainer.num_seeds > 1 yet: set "
                "agent.prioritized=false"
            )
        # N runs (core/runs.py): run k owns streams [k S/N, (k+1) S/N) and batch_size/N
        # rows of each sample, drawn from its own streams only
        self.runs = int(runs)
        # the discount: the spec's, or [N] per run (trainer.per_seed.gamma)
        self.gamma = spec.gamma if gamma is None else gamma
        self.spec, self.info, self.device = spec, info, torch.device(device)
        self.streams = prod(info.slot_shape)
        self.rows = self.ring_rows(int(capacity))
        self.batch_size = int(batch_size)
        self.obs_keys = list(obs_keys)
        self.cursor = 0  # next row to write (host int)
        self.filled = 0  # rows holding data (host int)
        self.data: dict = {}
        self.env_dtypes: dict = {}  # the env's dtype of each entry stored narrower
        self.sampler = None
        if spec.prioritized:
            self.sampler = make_priority_sampler(spec.sampler, self.priority_slots(), device)
            self.max_priority = torch.ones((), device=self.device)
        self.beta = LinearSchedule(spec.beta_start, spec.beta_end, spec.beta_frames)
        # draw()'s inputs, written in place by extend (a captured draw reads these
        # addresses): rows filled x streams of one run, and the newest physical row
        zero = torch.zeros((), dtype=torch.long, device=self.device)
        self.bounds = unchecked_tensordict(
            {"count": zero, "newest": zero.clone()}, torch.Size([]), self.device
        )

    def ring_rows(self, capacity: int) -> int:
        """Rows of the ring for `capacity` transitions: at least one n-step window."""
        return max(-(-capacity // self.streams), self.spec.n_step + 1)

    def priority_slots(self) -> int:
        """Entries of the priority sampler: one per stored transition."""
        return self.rows * self.streams

    def ready(self) -> bool:
        """Whether `sample` has something to draw (a host decision: no device read)."""
        return self.filled > 0

    @property
    def capacity(self) -> int:
        return self.rows * self.streams

    def __len__(self) -> int:
        return self.filled * self.streams

    # -- writing ------------------------------------------------------------------------------
    def _entries(self, batch: TensorDict) -> dict:
        """The entries stored, each [T, S, ...]: group dims flattened into streams."""
        info, T = self.info, batch.shape[0]
        slot_dims = len(info.slot_shape)

        def streams(x: torch.Tensor, squeeze: bool = False) -> torch.Tensor:
            x = x.reshape(T, self.streams, *x.shape[1 + slot_dims :])
            return x.squeeze(-1) if squeeze and x.dim() == 3 and x.shape[-1] == 1 else x

        out = {("obs", *as_tuple(k)): streams(self._store(k, batch.get(k))) for k in self.obs_keys}
        out["action"] = streams(batch.get(info.action_key))
        nxt = batch.get("next")
        out["reward"] = streams(nxt.get(info.reward_key), squeeze=True).float()
        out["terminated"] = streams(nxt.get(info.terminated_key), squeeze=True).bool()
        out["done"] = streams(nxt.get(info.done_key), squeeze=True).bool()
        if info.valid_key is not None:
            out["valid"] = streams(batch.get(info.valid_key)).bool()
        if self.spec.next_obs:
            for k in self.obs_keys:
                out[("next", *as_tuple(k))] = streams(self._store(k, nxt.get(k)))
        if self.spec.sequence is not None:  # the recurrent state each step began with
            key = self.spec.sequence.state_key
            out[key] = streams(batch.get(key))
        return out

    def _store(self, key, x: torch.Tensor) -> torch.Tensor:
        dtype = self.spec.storage_dtypes.get(key)
        if dtype is None:
            return x
        self.env_dtypes[key] = x.dtype
        return x.to(dtype)

    def _restore(self, key: tuple, x: torch.Tensor) -> torch.Tensor:
        dtype = self.env_dtypes.get(normalize(key))
        return x if dtype is None else x.to(dtype)

    @torch.no_grad()
    def copy_run(self, parent: int, child: int) -> None:
        """Run `child`'s streams become a copy of run `parent`'s (population-based
        training's exploit, trainers/pbt.py). Rows are shared by every run, so the
        cursor and fill stay as they are."""
        s = self.streams // self.runs
        for x in self.data.values():
            x[:, child * s : (child + 1) * s] = x[:, parent * s : (parent + 1) * s]

    def extend(self, batch: TensorDict) -> None:
        """Store a time-major batch [T, *env batch] (a collector's rollout)."""
        entries = self._entries(batch)
        T = batch.shape[0]
        if T > self.rows:
            raise ConfigError(
                f"a batch of {T} steps does not fit a replay of {self.rows} rows: raise "
                f"trainer.buffer_size or lower trainer.frames_per_batch"
            )
        if not self.data:
            self.data = {
                k: torch.zeros((self.rows, *v.shape[1:]), dtype=v.dtype, device=self.device)
                for k, v in entries.items()
            }
        rows = torch.arange(self.cursor, self.cursor + T, device=self.device) % self.rows
        for k, v in entries.items():
            self.data[k].index_copy_(0, rows, v)
        if self.sampler is not None:
            self.prioritize_new(rows, T, entries)
        self.cursor = (self.cursor + T) % self.rows
        self.filled = min(self.filled + T, self.rows)
        self.refresh_bounds()

    def refresh_bounds(self) -> None:
        """Write the host cursor and fill into `bounds` (fills from host ints: no read)."""
        self.bounds["count"].fill_(self.filled * (self.streams // self.runs))
        self.bounds["newest"].fill_((self.cursor - 1) % self.rows)

    def prioritize_new(self, rows: torch.Tensor, T: int, entries: dict) -> None:
        """Give the T rows being written (physical `rows`) the largest priority so far
        (0 for the slots of robots that were not running)."""
        flat = rows[:, None] * self.streams + torch.arange(self.streams, device=self.device)
        fresh = self.max_priority.expand(T, self.streams)
        if "valid" in entries:
            fresh = fresh * entries["valid"]
        self.sampler.update(flat.reshape(-1), fresh.reshape(-1))

    # -- sampling -----------------------------------------------------------------------------
    def sample(self, progress: Progress | None = None) -> TensorDict:
        """batch_size transitions, uniform or by priority (the module docstring)."""
        if self.filled == 0:
            raise RuntimeError("sample() from an empty replay")
        count = self.filled * (self.streams // self.runs)
        return self.draw_from(count, (self.cursor - 1) % self.rows, progress)

    @property
    def fusable(self) -> bool:
        """Whether `draw` can stand in for `sample` inside a compiled update."""
        return True

    def draw(self, bounds: TensorDict, progress: Progress | None = None) -> TensorDict:
        """sample() with the ring's extent read from `bounds` (the replay's own, passed
        in by the caller) instead of host ints: no host int is read, so the draw is
        traced and captured with the update it feeds. A prioritized draw is sample()'s
        for the same generator state; a uniform one picks its rows by another draw
        (uniform_index)."""
        return self.draw_from(bounds["count"], bounds["newest"], progress)

    def draw_from(self, count, newest, progress: Progress | None) -> TensorDict:
        """A sample from the `count` filled slots of each run's streams, n-step returns
        read up to the `newest` row; each a host int or a 0-d device tensor."""
        n = self.batch_size
        if self.sampler is None:
            index = self.uniform_index(count)
            weight = torch.ones(n, device=self.device)
        else:  # one run (prioritized replay refuses more): count is every filled slot
            index, prob = self.sampler.sample(n)
            frames = (
                progress.frames if progress is not None else torch.zeros((), device=self.device)
            )
            weight = importance_weights(prob, count, self.beta(frames))
        return self.gather(index, weight, newest)

    def uniform_index(self, count: int | torch.Tensor) -> torch.Tensor:
        """batch_size flat storage indices, uniform over the `count` filled slots of
        each run's streams (batch_size / runs rows per run, run-major). `count` a host
        int (sample): randint's draw, the stream every recorded run used; a 0-d device
        tensor (draw): a 62-bit draw modulo the count (a bias below 1e-12), since
        randint's bound is a host int that a traced or captured draw cannot change."""
        n, S, R = self.batch_size, self.streams, self.runs
        shape = (R, n // R) if R > 1 else (n,)
        if isinstance(count, int):
            i = torch.randint(count, shape, device=self.device)
        else:
            i = torch.randint(2**62, shape, device=self.device) % count
        if R == 1:
            return i
        per = S // R  # run k's streams are [k per, (k + 1) per)
        own = torch.arange(R, device=self.device).unsqueeze(1) * per
        return ((i // per) * S + i % per + own).reshape(-1)

    def gather(self, index: torch.Tensor, weight: torch.Tensor, newest) -> TensorDict:
        """The sample at flat storage `index`: n-step returns along each stream up to
        the `newest` row (a host int or a 0-d device tensor)."""
        n, S, spec = self.batch_size, self.streams, self.spec
        row, stream = index // S, index % S
        d = self.data
        ret, discount, last = nstep_returns(
            d["reward"],
            d["terminated"],
            d["done"],
            row,
            stream,
            newest,
            self.rows,
            spec.n_step,
            self.gamma if self.runs == 1 else per_run_discount(self.gamma, n // self.runs),
        )
        valid = d["valid"][row, stream].float() if "valid" in d else torch.ones_like(ret)
        if self.runs > 1 and "valid" in d:
            # losses divide by all N runs' valid rows (core/replay.weighted_mean): weigh
            # each run's rows so that this is the mean of the runs' own means
            weight = balance_runs(valid, self.runs)
        entries = {k[1:]: self._restore(k[1:], d[k][row, stream]) for k in d if k[0] == "obs"}
        entries[("action",)] = d["action"][row, stream]
        entries[("reward",)] = ret
        entries[("discount",)] = discount
        entries[("weight",)] = weight * valid
        entries[("valid",)] = valid
        entries[("index",)] = index
        if spec.next_obs:
            for k in d:
                if k[0] == "next":
                    entries[k] = self._restore(k[1:], d[k][last, stream])
        # every entry is [n] on the replay's device by construction: the checked
        # constructor's per-entry validation was a third of a small sample's time
        return unchecked_tensordict(nested(entries), torch.Size([n]), self.device)

    def update_priorities(self, index: torch.Tensor, priority: torch.Tensor) -> None:
        """New priorities |delta| for sampled indices; stored as (p + eps)^alpha."""
        if self.sampler is None:
            return
        p = (priority.detach().float().abs() + self.spec.priority_eps).pow(self.spec.alpha)
        self.max_priority = torch.maximum(self.max_priority, p.max())
        self.sampler.update(index, p)

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {
            "cursor": self.cursor,
            "filled": self.filled,
            "data": dict(self.data),
            "env_dtypes": dict(self.env_dtypes),
        }
        if self.sampler is not None:
            state["sampler"] = self.sampler.state_dict()
            state["max_priority"] = self.max_priority
        return state

    def load_state_dict(self, state: dict) -> None:
        self.cursor, self.filled = int(state["cursor"]), int(state["filled"])
        data = {k: v.to(self.device) for k, v in state["data"].items()}
        same = self.data.keys() == data.keys() and all(
            self.data[k].shape == v.shape and self.data[k].dtype == v.dtype for k, v in data.items()
        )
        if same:  # in place: a captured draw holds these tensors
            for k, v in data.items():
                self.data[k].copy_(v)
        else:
            self.data = data
        self.env_dtypes = dict(state.get("env_dtypes", {}))
        self.refresh_bounds()
        if self.sampler is not None:
            self.sampler.load_state_dict(state["sampler"])
            self.max_priority = state["max_priority"].to(self.device)


def per_run_discount(gamma, rows_per_run: int):
    """A per-run discount [N] spread over a sample's run-major rows; a float as is."""
    if isinstance(gamma, torch.Tensor):
        return gamma.repeat_interleave(rows_per_run)
    return gamma


def nested(entries: dict) -> dict:
    """{("next", "agents", "obs"): x} -> {"next": {"agents": {"obs": x}}}."""
    out: dict = {}
    for key, value in entries.items():
        *path, name = key
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[name] = value
    return out
