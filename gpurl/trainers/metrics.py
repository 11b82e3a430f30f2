"""Device-side accumulators (docs/concepts.md rule 6): the hot loop adds, the host reads once
per log interval and resets."""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict

from gpurl.core.private import foreach_add_


class EpisodeTracker:
    """Running returns and lengths per env; sums over episodes finished since the last
    read, per run (N runs own consecutive slices of the envs: core/runs.py)."""

    def __init__(self, num_envs: int, device, runs: int = 1):
        self.runs = int(runs)
        # each env's running return and length side by side, so that a step is one add
        # and one masked reset for both (running and length are views of it)
        self.acc = torch.zeros(num_envs, 2, device=device)
        self.running, self.length = self.acc[:, 0], self.acc[:, 1]
        # per run: episodes, sum of returns, sum of lengths
        self.finished = torch.zeros(self.runs, 3, device=device)

    def update(self, batch: TensorDict) -> None:
        """batch [steps, num_envs] (time-major); a loop over time, as the rollout itself.
        Reads the root reward and done (a multi-robot env's root reward is its robots')."""
        shape = batch.shape[:2]
        reward = batch["next", "reward"].reshape(*shape, -1).sum(-1)
        done = batch["next", "done"].reshape(*shape, -1).any(-1).float().unsqueeze(-1)
        step = torch.stack((reward, torch.ones_like(reward)), -1)  # [T, E, 2]
        acc, finished = self.acc, self.finished
        for t in range(shape[0]):
            acc += step[t]
            d = done[t]
            ended = torch.cat((d, acc * d), -1)  # [E, 3]: ended, its return, its length
            finished += ended.reshape(self.runs, -1, 3).sum(1)
            acc *= 1 - d

    def read(self) -> dict | None:
        """Mean return and length of the episodes finished since the last read, over all
        runs, "run_returns": each run's mean return (nan where none finished) and
        "run_episodes": how many each run finished. One host read."""
        rows = self.finished.tolist()
        self.finished.zero_()
        episodes, returns, lengths = (sum(col) for col in zip(*rows, strict=True))
        if episodes == 0:
            return None
        run_returns = [r / e if e else math.nan for e, r, _ in rows]
        return {
            "episodes": int(episodes),
            "return": returns / episodes,
            "length": lengths / episodes,
            "run_returns": run_returns,
            "run_episodes": [int(e) for e, _, _ in rows],
        }

    def state_dict(self):
        return {"finished": self.finished, "running": self.running, "length": self.length}

    def load_state_dict(self, state):
        self.finished.copy_(state["finished"].reshape(self.finished.shape))
        self.running.copy_(state["running"])
        self.length.copy_(state["length"])


FINAL_TRAIN_EPISODES = 100  # the MinAtar paper's figure: the last 100 training episodes


def final_train_return(history: list, episodes: int = FINAL_TRAIN_EPISODES) -> dict | None:
    """The mean return of a run's last `episodes` or more training episodes (the
    exploring policy's, as published learning curves of DQN report it), from its
    training history of (frames, mean return, episodes) per log interval: whole
    intervals, newest first, until they hold `episodes` ("since_frames": the frames
    logged with the earliest interval taken). None when the history holds
    fewer, or entries without counts (logged before counts were kept)."""
    total, weighted = 0, 0.0
    for entry in reversed(history):
        if len(entry) < 3:
            return None
        frames, ret, n = entry[:3]
        total, weighted = total + n, weighted + ret * n
        if total >= episodes:
            return {"return": weighted / total, "episodes": total, "since_frames": frames}
    return None


class MetricSums:
    """Sums of per-update metrics (device scalars) and their counts."""

    def __init__(self):
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}
        # the keys of the last update's metrics and their sums, in its order: an update
        # that gives the same keys again (nearly every one) is added in one foreach call
        self._keys: list[str] = []
        self._list: list[torch.Tensor] = []

    def add(self, metrics: TensorDict) -> None:
        keys = list(metrics.keys())
        if keys == self._keys:
            foreach_add_(self._list, list(metrics.values()))
        else:
            for k, v in metrics.items():
                if k in self.sums:
                    self.sums[k] += v
                else:
                    self.sums[k] = v.clone()
            self._keys, self._list = keys, [self.sums[k] for k in keys]
        counts = self.counts
        for k in keys:
            counts[k] = counts.get(k, 0) + 1

    def state_dict(self) -> dict:
        return {"sums": dict(self.sums), "counts": dict(self.counts)}

    def load_state_dict(self, state: dict) -> None:
        self.sums = {k: v.clone() for k, v in state["sums"].items()}
        self.counts = dict(state["counts"])
        self._keys, self._list = [], []

    def read(self) -> dict[str, float]:
        """Mean of each metric since the last read (one host read), then reset."""
        out = self.peek()
        self.sums, self.counts = {}, {}
        self._keys, self._list = [], []
        return out

    def peek(self) -> dict[str, float]:
        """The means `read` would give, without resetting (a host read)."""
        if not self.sums:
            return {}
        values = torch.stack(list(self.sums.values())).tolist()
        return {k: v / self.counts[k] for k, v in zip(self.sums, values, strict=True)}

    def finite(self, device) -> torch.Tensor:
        """A device bool: every metric since the last read was finite. A NaN or inf
        added to a sum stays in it, so the sums are the flag and the hot loop adds nothing."""
        if not self.sums:
            return torch.ones((), dtype=torch.bool, device=device)
        return torch.isfinite(torch.stack(list(self.sums.values()))).all()
