"""Population-based training inside one process (trainer.pbt; Jaderberg et al., 2017).

The trainer.num_seeds runs of a group are the population. Every `interval_frames`
frames per run, at the evaluation that reaches the multiple:

    fitness   each run's mean of its last K evaluations (trainer.pbt.fitness), counting
              only those made since it last copied another run
    select    truncation: the bottom `fraction` of runs (by fitness, ties to the lower
              run index) each draw a parent from the top `fraction`
    exploit   the child becomes its parent: every tensor of the agent that holds one
              slice per run (stacked networks and their targets, optimizer moments and
              step counts, a per-run temperature, exploration noise state:
              `run_tensors`), its per-run hyperparameters and, for off-policy agents
              with replay=parent, its replay streams. Nothing else moves: the child keeps
              its envs, its seed and its evaluation envs
    explore   each searched hyperparameter is multiplied by a factor drawn from
              `perturb` (kept inside its range; a choice moves to a neighbour), or, with
              probability `resample_prob`, drawn afresh from its range

Copies are indexed writes on the device; the decisions are made on the host from the
evaluations the loop has already read, with the population's own generator (seeded
from the run's seed), so the global RNG streams, and every run that is not a child, are
untouched: a run never copied trains exactly as it would without PBT.

What it leaves in the run directory:

    pbt_lineage.jsonl   one line per run per step: frames, run, seed, parent (null when
                        it kept its own weights), fitness and its hyperparameters after
                        the step (frames 0: the initial draw)
    pbt_hyper.png       each run's hyperparameters over frames, coloured by fitness
    summary.json "pbt"  the best run at the end and its schedule: the (frame, values) its
                        weights were trained under, inherited from its ancestors, which
                        trainer.hyper_schedule replays (`load_schedule`)
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from gpurl.core.runs import Runs, is_run_layer
from gpurl.errors import ConfigError
from gpurl.policies.exploration import Exploration

# the population's generator: its own stream, apart from every torch stream of the run
PBT_SEED = 7_919


@dataclass(frozen=True)
class Range:
    """One searched hyperparameter: [low, high] (uniform, or log-uniform) or choices."""

    key: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[float, ...] = ()

    def draw(self, gen: torch.Generator) -> float:
        if self.choices:
            return self.choices[int(torch.randint(len(self.choices), (), generator=gen))]
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        if self.log:
            return math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        return self.low + u * (self.high - self.low)

    def perturb(self, value: float, factor: float) -> float:
        """value x factor kept inside [low, high]; a choice moves one place down
        (factor < 1) or up (factor > 1)."""
        if self.choices:
            at = min(range(len(self.choices)), key=lambda i: abs(self.choices[i] - value))
            step = -1 if factor < 1 else (1 if factor > 1 else 0)
            return self.choices[min(max(at + step, 0), len(self.choices) - 1)]
        return min(max(value * factor, self.low), self.high)

    def holds(self, value: float) -> bool:
        if self.choices:
            return value in self.choices
        return self.low <= value <= self.high


def parse_space(space: Mapping | None, agent_keys: Mapping) -> dict[str, Range]:
    """trainer.pbt.space as Ranges, refusing in one line what cannot be searched."""
    out = {}
    for key, spec in (space or {}).items():
        if spec is None:
            continue
        where = f"trainer.pbt.space.{key}"
        if key not in agent_keys:
            raise ConfigError(f"{where}: this agent has no agent.{key} to search")
        spec = dict(spec)
        unknown = set(spec) - {"low", "high", "log", "choices"}
        if unknown:
            raise ConfigError(
                f"{where} has {sorted(unknown)}: give {{low, high}}, {{low, high, log: true}} "
                f"or {{choices: [...]}}"
            )
        if "choices" in spec:
            choices = tuple(float(c) for c in spec["choices"] or ())
            if not choices or len(spec) > 1:
                raise ConfigError(f"{where}: choices is a nonempty list, given alone")
            out[key] = Range(key, min(choices), max(choices), False, tuple(sorted(choices)))
            continue
        if "low" not in spec or "high" not in spec:
            raise ConfigError(f"{where} needs low and high (or choices), got {spec}")
        low, high, log = float(spec["low"]), float(spec["high"]), bool(spec.get("log", False))
        if not low < high or (log and low <= 0):
            raise ConfigError(
                f"{where}: low {low} must be below high {high}"
                + (", and above 0 on a log scale" if log else "")
            )
        out[key] = Range(key, low, high, log)
    if not out:
        raise ConfigError(
            "trainer.pbt.enabled needs at least one range in trainer.pbt.space, e.g. "
            "trainer.pbt.space.lr={low:1e-4,high:1e-2,log:true}"
        )
    return out


def initial_values(pbt, agent_keys: Mapping, n: int, seed: int, given: Mapping) -> dict:
    """The population's first hyperparameters: each searched key drawn from its range
    per run (a key trainer.per_seed gives keeps the values given)."""
    space = parse_space(pbt.get("space"), agent_keys)
    gen = torch.Generator().manual_seed(int(seed) + PBT_SEED)
    return {
        key: list(given[key]) if key in given else [rng.draw(gen) for _ in range(n)]
        for key, rng in space.items()
    }


def run_tensors(agent, n: int) -> list[Tensor]:
    """Every tensor of the agent holding one slice per run, run-major along its leading
    dims: the parameters of its stacked layers, the state of stateful exploration (OU
    noise, one row per env), what the agent lists as its own (`run_tensors()`: SAC's
    temperature) and the optimizer state of all of these. A parameter outside them
    stops PBT in one line: copying the rest would leave the child half its parent."""
    tensors: list[Tensor] = list(agent.run_tensors())
    for module in agent.modules().values():
        for sub in module.modules():
            if is_run_layer(sub):
                tensors += list(sub.parameters())
            elif isinstance(sub, Exploration) and sub.stateful:
                tensors += list(sub.buffers())
    ids = {id(t) for t in tensors}
    missed = [name for name, p in agent.parameters() if id(p) not in ids]
    if missed:
        raise ConfigError(
            f"trainer.pbt copies runs slice by slice; agent parameter {missed[0]} has no run "
            f"axis: this agent cannot be trained with trainer.pbt yet"
        )
    for optimizer in agent.optimizers().values():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in ids:
                    # moments [N, ...]; step [N] when the runs step apart (a scalar
                    # step is every run's: nothing to copy)
                    tensors += [
                        v
                        for v in optimizer.state.get(p, {}).values()
                        if isinstance(v, Tensor) and v.dim() > 0
                    ]
    unique = {id(t): t for t in tensors}
    for t in unique.values():
        if t.shape[0] % n:
            raise ConfigError(f"a per-run tensor of shape {tuple(t.shape)} does not split in {n}")
    return list(unique.values())


@torch.no_grad()
def copy_slices(tensors, n: int, parent: int, child: int) -> None:
    """tensor[child's slice] <- tensor[parent's slice], each tensor run-major."""
    for t in tensors:
        rows = t.view(n, -1)
        rows[child].copy_(rows[parent])


def load_schedule(path: str) -> list[tuple[int, dict[str, float]]]:
    """A hyperparameter schedule: a JSON list of [frame, {key: value}], a PBT group's
    directory or summary.json (its best run's schedule), or one of its runs'
    seeds/seed_S/summary.json (that run's)."""
    file = Path(path)
    if file.is_dir():
        file = file / "summary.json"
    if not file.is_file():
        raise ConfigError(f"trainer.hyper_schedule: no file {file}")
    try:
        data = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"trainer.hyper_schedule: {file} is not JSON ({err.msg})") from err
    if isinstance(data, dict):  # a PBT group's summary (its best run's) or one run's
        if isinstance(data.get("pbt"), dict) and "schedule" in data["pbt"]:
            data = data["pbt"]["schedule"]
        elif "hyper_schedule" in data:
            data = data["hyper_schedule"]
        else:
            raise ConfigError(
                f"trainer.hyper_schedule: {file} holds no schedule (a PBT run's summary.json)"
            )
    try:
        schedule = [
            (int(frame), {k: float(v) for k, v in values.items()}) for frame, values in data
        ]
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError(
            f"trainer.hyper_schedule: {file} is not a list of [frame, {{key: value}}]"
        ) from err
    if not schedule or [f for f, _ in schedule] != sorted(f for f, _ in schedule):
        raise ConfigError(f"trainer.hyper_schedule: {file}: frames must be given in order")
    return schedule


class ScheduleReplay:
    """trainer.hyper_schedule: at the first iteration at or after each entry's frame,
    every run's values become the entry's (Runs.set, in place)."""

    def __init__(self, schedule: list[tuple[int, dict[str, float]]], runs: Runs):
        self.schedule, self.runs = schedule, runs
        self.applied = 0

    def apply(self, frames: int) -> None:
        while self.applied < len(self.schedule) and self.schedule[self.applied][0] <= frames:
            for key, value in self.schedule[self.applied][1].items():
                for k in range(self.runs.n):
                    self.runs.set(key, k, value)
            self.applied += 1

    def resume(self, frames: int) -> None:
        """After a resume: entries up to `frames` were applied (the checkpoint holds the
        values they set)."""
        self.applied = sum(1 for f, _ in self.schedule if f <= frames)


class Population:
    """The PBT state of a group of N runs: when the next step is due, the generator of
    its choices, every run's schedule (the values its weights were trained under) and
    the lineage of every step."""

    def __init__(self, pbt, runs: Runs, agent_keys: Mapping, seed: int):
        if not runs.many:
            raise ConfigError("trainer.pbt needs a population: set trainer.num_seeds >= 2")
        # steps are taken at evaluations: an interval below trainer.eval_interval means
        # a step at every evaluation
        self.interval = int(pbt.interval_frames)
        self.space = parse_space(pbt.get("space"), agent_keys)
        self.fraction, self.k = float(pbt.fraction), int(pbt.fitness)
        self.perturb = [float(f) for f in pbt.perturb]
        self.resample_prob = float(pbt.resample_prob)
        self.runs = runs
        self.gen = torch.Generator().manual_seed(int(seed) + PBT_SEED + 1)
        self.next_frames = self.interval
        self.copied_at = [0] * runs.n  # frames of each run's last copy
        self.schedules = [[[0, runs.hyper(k)]] for k in range(runs.n)]
        self.lineage = [self.entry(0, k, None, None) for k in range(runs.n)]

    @property
    def copies(self) -> int:
        return sum(1 for e in self.lineage if e["parent"] is not None)

    def entry(self, frames: int, k: int, parent: int | None, fitness: float | None) -> dict:
        return {
            "frames": frames,
            "run": k,
            "seed": self.runs.seeds[k],
            "parent": parent,
            "fitness": fitness,
            "hyper": self.runs.hyper(k),
        }

    def due(self, frames: int) -> bool:
        return frames >= self.next_frames

    # -- one step -------------------------------------------------------------------------
    def fitness(self, run_eval_log: list[list[dict]]) -> list[float]:
        """Each run's mean return over its last K evaluations since it last copied."""
        out = []
        for k, log in enumerate(run_eval_log):
            own = [e["return"] for e in log if e["frames"] > self.copied_at[k]] or [
                e["return"] for e in log[-1:]
            ]
            value = sum(own[-self.k :]) / len(own[-self.k :]) if own else float("nan")
            out.append(value if math.isfinite(value) else -math.inf)
        return out

    def select(self, fitness: list[float]) -> list[tuple[int, int]]:
        """(child, parent) pairs: the bottom `fraction` of runs, each with a parent drawn
        uniformly from the top `fraction` (at least one of each)."""
        n = len(fitness)
        m = max(1, int(self.fraction * n))
        order = sorted(range(n), key=lambda k: (-fitness[k], k))
        top, bottom = order[:m], order[n - m :]
        pairs = []
        for child in sorted(bottom):
            parent = top[int(torch.randint(m, (), generator=self.gen))]
            pairs.append((child, parent))
        return pairs

    def explore(self, values: dict[str, float]) -> dict[str, float]:
        """The parent's values, each searched one perturbed or redrawn."""
        out = dict(values)
        for key, rng in self.space.items():
            if float(torch.rand((), generator=self.gen)) < self.resample_prob:
                out[key] = rng.draw(self.gen)
            else:
                factor = self.perturb[int(torch.randint(len(self.perturb), (), generator=self.gen))]
                out[key] = rng.perturb(values[key], factor)
        return out

    def step(
        self, frames: int, run_eval_log: list[list[dict]], copy_run: Callable[[int, int], None]
    ) -> list[tuple[int, int]]:
        """Select, exploit (copy_run(parent, child): the trainer's copy of everything a
        run is) and explore; returns the (child, parent) pairs."""
        fitness = self.fitness(run_eval_log)
        pairs = self.select(fitness)
        for child, parent in pairs:
            copy_run(parent, child)
            values = self.explore(self.runs.hyper(parent))
            for key, value in values.items():
                self.runs.set(key, child, value)
            self.copied_at[child] = frames
            self.schedules[child] = copy.deepcopy(self.schedules[parent])
            self.schedules[child].append([frames, self.runs.hyper(child)])
        parents = dict(pairs)
        for k in range(self.runs.n):
            self.lineage.append(self.entry(frames, k, parents.get(k), _finite(fitness[k])))
        self.next_frames = (frames // self.interval + 1) * self.interval
        return pairs

    # -- outputs --------------------------------------------------------------------------
    def close(self, frames: int, run_eval_log: list[list[dict]]) -> None:
        """The lineage's last lines: every run's fitness at the end, values unchanged."""
        fitness = self.fitness(run_eval_log)
        for k in range(self.runs.n):
            self.lineage.append(self.entry(frames, k, None, _finite(fitness[k])))

    def best(self, run_eval_log: list[list[dict]]) -> dict:
        """The run of highest fitness now, and its schedule."""
        fitness = self.fitness(run_eval_log)
        k = max(range(len(fitness)), key=lambda i: (fitness[i], -i))
        return {
            "best_run": k,
            "best_seed": self.runs.seeds[k],
            "best_fitness": _finite(fitness[k]),
            "schedule": self.schedules[k],
            "copies": self.copies,
            "space": {
                key: {"low": r.low, "high": r.high, "log": r.log, "choices": list(r.choices)}
                for key, r in self.space.items()
            },
        }

    def write_lineage(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(e) + "\n" for e in self.lineage))
        return path

    def state_dict(self) -> dict:
        return {
            "gen": self.gen.get_state(),
            "next_frames": self.next_frames,
            "copied_at": list(self.copied_at),
            "schedules": copy.deepcopy(self.schedules),
            "lineage": copy.deepcopy(self.lineage),
        }

    def load_state_dict(self, state: dict) -> None:
        self.gen.set_state(state["gen"])
        self.next_frames = int(state["next_frames"])
        self.copied_at = [int(f) for f in state["copied_at"]]
        self.schedules = copy.deepcopy(state["schedules"])
        self.lineage = copy.deepcopy(state["lineage"])


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def plot_population(path: Path, lineage: list[dict], space: Mapping[str, Range], title: str):
    """Each searched hyperparameter of each run over frames: a run's value between two
    steps is a segment coloured by the fitness the run had at the end of it, and a copy
    is a thin grey jump to the value the child explored from its parent's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    keys = list(space)
    fig, axes = plt.subplots(len(keys), 1, figsize=(7, 2.4 * len(keys) + 0.6), dpi=110)
    axes = [axes] if len(keys) == 1 else list(axes)
    scored = [e["fitness"] for e in lineage if e["fitness"] is not None]
    low, high = (min(scored), max(scored)) if scored else (0.0, 1.0)
    norm = matplotlib.colors.Normalize(low, high if high > low else low + 1)
    cmap = matplotlib.colormaps["viridis"]
    runs = sorted({e["run"] for e in lineage})
    for ax, key in zip(axes, keys, strict=True):
        segments, colours = [], []
        for k in runs:
            own = [e for e in lineage if e["run"] == k]
            for a, b in zip(own, own[1:], strict=False):
                segments.append([(a["frames"], a["hyper"][key]), (b["frames"], a["hyper"][key])])
                colours.append(cmap(norm(b["fitness"])) if b["fitness"] is not None else "grey")
                if b["parent"] is not None:  # the copy: a jump to the explored value
                    ax.plot(
                        [b["frames"]] * 2,
                        [a["hyper"][key], b["hyper"][key]],
                        color="tab:gray",
                        lw=0.6,
                        alpha=0.5,
                    )
        ax.add_collection(LineCollection(segments, colors=colours, linewidths=2))
        ax.autoscale()
        if space[key].log:
            ax.set_yscale("log")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("frames (per run)")
    axes[0].set_title(title)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes)
    bar.set_label("fitness (mean evaluation return)")
    fig.savefig(path)
    plt.close(fig)
    return path
