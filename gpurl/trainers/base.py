"""The loop every trainer shares: intervals, logging, evaluation, checkpoints, summary.

    while frames < total_frames:
        iteration()                   the subclass's hot path: collect and learn
        every log_interval frames:    read the device metrics once (and the env's own
                                      stats, env.read_stats), log, progress bar
        every eval_interval frames:   the env's evaluation protocol on separate copies
        every checkpoint_interval:    save everything a resumed run needs to continue
                                      exactly as if it had never stopped

A subclass implements `iteration()` (no host reads) and adds its own state through
`extra_state()` / `load_extra_state()`.

Under torchrun (core/distributed.py) every rank runs this loop in step: `frames`
counts all ranks' frames, the update metrics are averaged over the ranks at each log,
and rank 0 alone evaluates, logs, shows the bar and writes checkpoints.

A signal (SIGTERM, SIGINT, SIGUSR1: core/signals.py) sets a flag the loop reads between
iterations; the loop then ends after the iteration under way, writes a checkpoint, and
the summary says so (stopped: "signal"). Under torchrun the ranks agree on it at a log.

Faults stop the run with one line (gpurl.errors.RunFault) and keep the last good
checkpoint (trainers/checkpoint.py keeps the one before it too):
- a NaN or inf in an update metric (losses) or a parameter: NonFiniteError. The metric
  sums carry a NaN or inf until they are read, so the check costs the hot loop
  nothing: it runs where the host reads anyway (each log), before each evaluation and
  before each checkpoint, which is therefore never written from a non-finite state;
- a checkpoint that cannot be written (a full disk): CheckpointWriteError. The run
  stops rather than going on without a safe point; the earlier checkpoint is intact.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gpurl.core import distributed
from gpurl.core.compile import EAGER, CompileSpec
from gpurl.core.config import plain_keys
from gpurl.core.signals import STOP_SIGNALS, StopSignals
from gpurl.errors import CheckpointWriteError, ConfigError, NonFiniteError
from gpurl.trainers.checkpoint import read_checkpoint, save_checkpoint
from gpurl.trainers.compile import compile_policy, env_step
from gpurl.trainers.evaluation import evaluate_protocol
from gpurl.trainers.loggers import log_video
from gpurl.trainers.metrics import EpisodeTracker, MetricSums, final_train_return
from gpurl.trainers.pbt import (
    Population,
    ScheduleReplay,
    copy_slices,
    load_schedule,
    plot_population,
    run_tensors,
)
from gpurl.trainers.reporting import ProgressFile, plot_learning_curve
from gpurl.trainers.seeds import evaluate_runs, mean_metrics, plot_seeds
from gpurl.utils.aggregate import aggregate


class Trainer:
    """The loop both trainers share (module docstring): built by gpurl.train.build from
    the trainer config, the training and evaluation envs, the agent, its EnvInfo, the
    progress record and the run directory."""

    def __init__(
        self,
        cfg,
        env,
        eval_env,
        agent,
        info,
        progress,
        run_dir,
        logger=None,
        meta=None,
        compile: CompileSpec = EAGER,
        run_eval_envs=None,
        video_env=None,
    ):
        if int(cfg.total_frames) < 1:
            raise ConfigError(f"trainer.total_frames must be >= 1, got {cfg.total_frames}")
        if cfg.get("stop_at_return") is not None and distributed.world_size() > 1:
            raise ConfigError(
                "trainer.stop_at_return ends a run from rank 0's evaluation: launch it "
                "without torchrun"
            )
        # plain values: the loop reads keys every iteration (core/config.Keys)
        self.cfg, self.env, self.eval_env, self.agent = plain_keys(cfg), env, eval_env, agent
        self.info, self.progress = info, progress
        self.run_dir, self.logger, self.meta = Path(run_dir), logger, meta or {}
        # what the collector acts with and steps: compiled as compile.policy / .env ask
        self.acting = compile_policy(agent.policy, compile, agent.recurrent)
        self.step = env_step(env, compile)
        self.device = info.device
        self.rank, self.world = distributed.rank(), distributed.world_size()
        # N runs in this process (core/runs.py): per-run curves beside the group's
        self.runs = progress.runs
        # with N runs: one env of N x eval_envs copies evaluating them all in one pass,
        # or run k's own evaluation env, seeded seed + k (train.build chooses)
        self.run_eval_envs = list(run_eval_envs or [eval_env])
        self.tracker = EpisodeTracker(env.batch_size.numel(), self.device, self.runs.n)
        self.run_eval_log: list[list[dict]] = [[] for _ in range(self.runs.n)]
        self.run_train_history: list[list[tuple]] = [[] for _ in range(self.runs.n)]
        self.metrics = MetricSums()
        self.eval_history: list[tuple[int, float]] = []
        self.eval_metrics: dict[str, float] = {}
        # Every evaluation's full metrics (MarineNav: success, collisions... per stage)
        # and the run's wall time when it began (earlier evaluations included), its length.
        self.eval_log: list[dict[str, float]] = []
        self.train_history: list[tuple] = []  # (frames, mean return, episodes)
        self.wall_time = 0.0
        self.checkpoint_path = self.run_dir / "checkpoints" / "last.pt"
        # progress.json: how far the run is, for `python -m gpurl.status` (gpurl/status.py)
        self.progress_file = ProgressFile(self.run_dir, int(cfg.total_frames))
        self.run_settings: dict | None = None  # the whole config (train.build sets it)
        self.best_path = self.run_dir / "checkpoints" / "best.pt"
        # trainer.video_interval: an env copy of its own and the videos written so far
        self.video_env, self.videos = video_env, []
        if cfg.get("save_best") and self.runs.many:
            raise ConfigError(
                "trainer.save_best keeps one run's best checkpoint: drop it, or "
                "trainer.num_seeds (each seed's run then keeps its own)"
            )
        # (file, frames) of the newest checkpoint known good: written or resumed from
        self.last_checkpoint: tuple[Path, int] | None = None
        self.checked_frames = 0  # frames at the last finite check that passed
        # a stop request (core/signals.py): gpurl.train sets one whose handlers are live;
        # this one, never entered, only stops the loop when a test or tool sets .signal
        self.stop = StopSignals()
        self.stopped_by: str | None = None  # the signal that ended the loop, if one did
        # trainer.pbt: the runs tune their hyperparameters as they train (trainers/pbt.py);
        # trainer.hyper_schedule: they follow a schedule (a PBT run's best, replayed)
        pbt = cfg.get("pbt") or {}
        self.population = (
            Population(pbt, self.runs, agent.cfg, self.runs.seeds[0])
            if pbt.get("enabled")
            else None
        )
        if self.population is not None:
            run_tensors(agent, self.runs.n)  # an agent PBT cannot copy fails now, not later
        schedule = cfg.get("hyper_schedule")
        self.schedule = ScheduleReplay(load_schedule(schedule), self.runs) if schedule else None

    @property
    def frames(self) -> int:
        """Frames collected so far, over all ranks (the progress record's host count)."""
        return self.progress.frame_count

    def iteration(self) -> None:
        """One collect-and-learn step of the subclass's loop, with no host reads."""
        raise NotImplementedError

    # -- the loop -----------------------------------------------------------------------------
    def train(self) -> dict:
        """Run to trainer.total_frames with the logs, evaluations and checkpoints at
        their intervals; return the summary (what summary.json holds)."""
        t = self.cfg
        start = time.perf_counter() - self.wall_time
        next_log = _next_multiple(self.frames, t.log_interval)
        next_eval = _next_multiple(self.frames, t.eval_interval)
        next_ckpt = _next_multiple(self.frames, t.checkpoint_interval)
        every_video = t.get("video_interval") or 0
        next_video = _next_multiple(self.frames, every_video) if every_video else None
        bar = tqdm(
            total=int(t.total_frames),
            initial=self.frames,
            unit="frames",
            unit_scale=True,
            dynamic_ncols=True,
            disable=not t.progress or self.rank > 0,
            desc=f"{self.meta.get('agent', '')}/{self.meta.get('env', '')}",
        )
        postfix: dict[str, str] = {}
        if self.rank == 0:
            self.progress_file.write(
                self.frames, self.wall_time, final_train_return(self.train_history)
            )
        self.checked_frames = self.frames
        solved = False  # trainer.stop_at_return reached: end here, checkpoint included
        stopping = False  # a signal asked the run to stop: end here, checkpoint included
        while self.frames < t.total_frames and not solved and not stopping:
            before = self.frames
            if self.schedule is not None:
                self.schedule.apply(self.frames)
            self.iteration()
            bar.update(self.frames - before)
            logged = self.frames >= next_log
            if logged:
                next_log = _next_multiple(self.frames, t.log_interval)
                postfix.update(self.log(time.perf_counter() - start))
                bar.set_postfix(postfix, refresh=False)
                if self.rank == 0:
                    self.progress_file.write(
                        self.frames,
                        time.perf_counter() - start,
                        final_train_return(self.train_history),
                    )
            if self.frames >= next_eval or self.frames >= t.total_frames:
                if not logged:
                    self.check_finite()
                next_eval = _next_multiple(self.frames, t.eval_interval)
                self.wall_time = time.perf_counter() - start  # eval_log's wall_s
                if self.rank == 0:
                    ret = self.evaluate()
                    self.progress_file.evaluated(self.frames, ret, self.run_eval_returns())
                    if t.get("save_best"):
                        self.save_best(ret)
                    postfix["eval"] = f"{ret:.1f}"
                    bar.set_postfix(postfix, refresh=False)
                    solved = self.reached(t.get("stop_at_return"))
                    population = self.population
                    if population and population.due(self.frames) and not solved:
                        if self.frames < t.total_frames:  # none after the last evaluation
                            population.step(self.frames, self.run_eval_log, self.copy_run)
                            population.write_lineage(self.run_dir / "pbt_lineage.jsonl")
            if next_video is not None and (
                self.frames >= next_video or self.frames >= t.total_frames
            ):
                next_video = _next_multiple(self.frames, every_video)
                if self.rank == 0 and self.video_env is not None:
                    self.record_video()
            stopping = self.stop_requested(logged)
            if self.frames >= next_ckpt or self.frames >= t.total_frames or solved or stopping:
                next_ckpt = _next_multiple(self.frames, t.checkpoint_interval)
                self.wall_time = time.perf_counter() - start
                if self.rank == 0:
                    self.save()
        bar.close()
        self.wall_time = time.perf_counter() - start
        if self.rank == 0:
            self.progress_file.write(
                self.frames, self.wall_time, final_train_return(self.train_history)
            )
        return self.finish()

    def stop_requested(self, logged: bool) -> bool:
        """Whether to stop after this iteration for a signal (self.stop), and which
        (self.stopped_by). One process: at once. Under torchrun the ranks agree at a log,
        where they all-reduce the metrics anyway: a signal that reached any rank stops
        them all at the same iteration, and rank 0 writes the checkpoint."""
        if self.frames >= self.cfg.total_frames:  # the run is complete: no stop to report
            return False
        if self.world == 1:
            self.stopped_by = self.stop.signal
        elif logged:
            mine = STOP_SIGNALS.index(self.stop.signal) + 1 if self.stop.signal else 0
            agreed = distributed.max_over_ranks(mine, self.device)
            self.stopped_by = STOP_SIGNALS[agreed - 1] if agreed else None
        return self.stopped_by is not None

    def reached(self, target: float | None) -> bool:
        """Whether the newest evaluation reached `target` (trainer.stop_at_return): its
        return, or with N runs every run's own."""
        if target is None:
            return False
        if self.runs.many:
            return all(log[-1]["return"] >= target for log in self.run_eval_log)
        return self.eval_history[-1][1] >= target

    def log(self, elapsed: float) -> dict[str, str]:
        values = distributed.mean_over_ranks(self.metrics.read(), self.device)
        self.check_finite(values)
        scalars = {f"train/{k}": v for k, v in values.items()}
        episodes = self.tracker.read()
        if episodes is not None:
            # (frames, mean return, episodes) per interval: final_train_return's input
            counts = episodes.pop("run_episodes")
            for k, ret in enumerate(episodes.pop("run_returns")):
                if math.isfinite(ret) and self.runs.many:
                    self.run_train_history[k].append((self.frames, ret, counts[k]))
            scalars.update({f"train/episode_{k}": v for k, v in episodes.items()})
            self.train_history.append((self.frames, episodes["return"], episodes["episodes"]))
        env_stats = self.env.read_stats()
        if env_stats is not None:  # the env's own counters (pixels: success, length)
            scalars.update({f"train/env_{k}": v for k, v in env_stats.items()})
        scalars["train/fps"] = self.frames / max(elapsed, 1e-9)
        epsilon = self.agent.policy.epsilon()
        if epsilon is not None:
            scalars["train/epsilon"] = float(epsilon.mean())  # the runs' mean with N runs
        if self.logger is not None:
            for k, v in scalars.items():
                self.logger.log_scalar(k, v, step=self.frames)
        return {"ret": f"{episodes['return']:.1f}"} if episodes else {}

    def evaluate(self) -> float:
        """The evaluation env's protocol with the greedy policy (each run's, with N
        runs: their mean is the figure returned); returns its "return" and logs every
        figure it measured as eval/<name>."""
        began = time.perf_counter()
        if self.runs.many:  # each run on its own, then the runs' mean for the bar
            per_run = evaluate_runs(self.run_eval_envs, self.agent.policy, self.runs.n)
            took = round((time.perf_counter() - began) / self.runs.n, 3)  # one run's share
            for log, m in zip(self.run_eval_log, per_run, strict=True):
                log.append(
                    {"frames": self.frames, "wall_s": round(self.wall_time, 2), "eval_s": took, **m}
                )
            metrics = mean_metrics(per_run)
        else:
            metrics = evaluate_protocol(self.eval_env, self.agent.policy)
        ret = metrics["return"]
        self.eval_history.append((self.frames, ret))
        self.eval_metrics = metrics
        # wall_s: the run's wall time when the evaluation began (earlier ones included);
        # eval_s: how long it took, so that training time = wall_s - earlier evals' eval_s
        took = round(time.perf_counter() - began, 3)
        entry = {"frames": self.frames, "wall_s": round(self.wall_time, 2), "eval_s": took}
        self.eval_log.append({**entry, **metrics})
        if self.logger is not None:
            for k, v in metrics.items():
                self.logger.log_scalar(f"eval/{k}", v, step=self.frames)
        return ret

    def run_eval_returns(self) -> list[float] | None:
        """Each run's latest evaluation return (N runs), None with one run."""
        if not self.runs.many:
            return None
        return [log[-1]["return"] if log else float("nan") for log in self.run_eval_log]

    def copy_run(self, parent: int, child: int) -> None:
        """PBT's exploit: run `child` becomes run `parent` in everything the agent holds
        per run (trainers/pbt.run_tensors); the off-policy trainer adds the replay."""
        # listed at each copy: optimizers create their state at their first step
        copy_slices(run_tensors(self.agent, self.runs.n), self.runs.n, parent, child)

    # -- checkpoints --------------------------------------------------------------------------
    def extra_state(self) -> dict:
        return {}

    def acting_state_dict(self) -> dict:
        """A copy of the acting state that carries across collected batches
        (Agent.acting_state: a recurrent hidden state), for the checkpoint."""
        return {k: t.clone() for k, t in self.agent.acting_state().items()}

    def load_acting_state(self, saved: dict) -> None:
        """Restore what acting_state_dict saved, in place."""
        for k, t in self.agent.acting_state().items():
            if k not in saved:
                raise ConfigError(
                    f"the checkpoint holds no acting {k}: it was written without "
                    f"agent.recurrent; resume with the agent settings it was written with"
                )
            t.copy_(saved[k])

    def load_extra_state(self, state: dict) -> None:
        pass

    def state_dict(self) -> dict:
        return {
            "frames": self.frames,  # a label for readers; resume restores "progress"
            "wall_time": self.wall_time,
            "agent": self.agent.state(),
            "progress": self.progress.state_dict(),
            "tracker": self.tracker.state_dict(),
            "metrics": self.metrics.state_dict(),
            "eval_history": self.eval_history,
            "eval_metrics": self.eval_metrics,
            "eval_log": self.eval_log,
            "train_history": self.train_history,
            "videos": self.videos,
            "run_eval_log": self.run_eval_log,
            "run_train_history": self.run_train_history,
            "env": self.env.env_state_dict(),
            "eval_env": self.eval_env.env_state_dict(),
            "run_eval_envs": [e.env_state_dict() for e in self.run_eval_envs],
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "meta": self.meta,
            "shapes": self.shapes(),
            "population": self.population.state_dict() if self.population else None,
            "config": self.run_settings,
            **self.extra_state(),
        }

    def shapes(self) -> dict:
        """What a resumed run must share with its checkpoint beyond the env and agent
        names: the env's batch and observation shapes (the networks' shapes are read off
        the agent's state)."""
        return {
            "num_envs": int(self.env.batch_size.numel()),
            "num_seeds": self.runs.n,
            "observations": {_key(k): list(v) for k, v in self.info.obs_shapes.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.check_resumable(state)
        self.wall_time = state["wall_time"]
        self.agent.load_state(state["agent"])
        self.progress.load_state_dict(state["progress"])
        self.tracker.load_state_dict(state["tracker"])
        self.metrics.load_state_dict(state["metrics"])
        self.eval_history = [tuple(x) for x in state["eval_history"]]
        self.eval_metrics = dict(state["eval_metrics"])
        self.eval_log = [dict(x) for x in state.get("eval_log", [])]
        self.train_history = [tuple(x) for x in state["train_history"]]
        self.videos = list(state.get("videos", []))
        self.run_eval_log = [[dict(x) for x in log] for log in state.get("run_eval_log", [[]])]
        self.run_train_history = [
            [tuple(x) for x in h] for h in state.get("run_train_history", [[]])
        ]
        saved_envs = state.get("run_eval_envs", [])
        if len(saved_envs) == len(self.run_eval_envs):  # the same evaluation layout
            for env, saved in zip(self.run_eval_envs, saved_envs, strict=True):
                if saved and env is not self.eval_env:
                    env.load_env_state_dict(saved)
        for key, env in (("env", self.env), ("eval_env", self.eval_env)):
            if state[key]:
                env.load_env_state_dict(state[key])
        torch.set_rng_state(state["rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        if self.population is not None:
            if not state.get("population"):
                raise ConfigError(
                    "checkpoint was written without trainer.pbt: resume it with "
                    "trainer.pbt.enabled=false"
                )
            self.population.load_state_dict(state["population"])
        if self.schedule is not None:
            self.schedule.resume(self.frames)
        self.load_extra_state(state)

    def check_resumable(self, state: dict) -> None:
        """Refuse, in one line, a checkpoint this run cannot continue: another env or agent,
        another number of envs or observation shapes, or networks of other shapes (another
        agent.hidden, say). Loading it would fail in the middle with a stack trace, or
        worse, run on with envs or a replay that do not match."""
        for key in ("env", "agent"):
            if key in self.meta and state["meta"].get(key) != self.meta[key]:
                raise ConfigError(
                    f"checkpoint was written by {key}={state['meta'].get(key)}, this run has "
                    f"{key}={self.meta[key]}: resume with the same {key}"
                )
        saved, here = state.get("shapes"), self.shapes()  # none in checkpoints before them
        if saved is not None and saved.get("num_seeds", 1) != here["num_seeds"]:
            raise ConfigError(
                f"checkpoint was written with trainer.num_seeds={saved.get('num_seeds', 1)}, "
                f"this run has {here['num_seeds']}: resume with the same trainer.num_seeds"
            )
        if saved is not None and saved["num_envs"] != here["num_envs"]:
            raise ConfigError(
                f"checkpoint was written with env.num_envs={saved['num_envs']}, this run has "
                f"env.num_envs={here['num_envs']}: resume with env.num_envs={saved['num_envs']} "
                f"(the env state and the replay are per env)"
            )
        if saved is not None and saved["observations"] != here["observations"]:
            key = next(
                k
                for k in {**saved["observations"], **here["observations"]}
                if saved["observations"].get(k) != here["observations"].get(k)
            )
            raise ConfigError(
                f"checkpoint's env observes {key} of shape {saved['observations'].get(key)}, "
                f"this run's {here['observations'].get(key)}: resume with the env options "
                f"the checkpoint was written with"
            )
        theirs = _shapes(state["agent"]["modules"])
        ours = _shapes(self.agent.state()["modules"])
        if theirs != ours:
            diff = sorted(k for k in {**theirs, **ours} if theirs.get(k) != ours.get(k))
            first = diff[0]
            raise ConfigError(
                f"checkpoint's networks differ from this run's in {len(diff)} tensor(s), e.g. "
                f"{first}: {theirs.get(first, 'absent')} there, {ours.get(first, 'absent')} "
                f"here: resume with the agent settings (agent.hidden...) it was written with"
            )

    def save(self) -> Path:
        """Write the checkpoint, after checking that nothing in the state is NaN or inf."""
        self.check_finite()
        try:
            path = save_checkpoint(self.state_dict(), self.checkpoint_path)
        except (OSError, RuntimeError) as err:
            strerror = err.strerror if isinstance(err, OSError) else None
            reason = (strerror or str(err)).splitlines()[0][:200]
            raise CheckpointWriteError(
                f"could not write checkpoint {self.checkpoint_path} at frames {self.frames} "
                f"({reason}): stopped; {self._last_good()}; free disk space, then resume "
                f"with trainer.resume={self.run_dir}"
            ) from err
        self.last_checkpoint = (path, self.frames)
        return path

    def record_video(self) -> Path:
        """videos/frames_<N>.mp4: one greedy episode of the video env (its own copy)."""
        from gpurl.trainers.video import record_episode, write_video

        frames = record_episode(
            self.video_env,
            self.agent.policy,
            self.video_env.max_episode_steps,
            self.meta.get("env", ""),
        )
        path = write_video(frames, self.run_dir / "videos" / f"frames_{self.frames}.mp4")
        self.videos.append(str(path))
        if self.logger is not None:  # TensorBoard and W&B show it beside the scalars
            log_video(self.logger, "eval/video", frames, path, self.frames)
        return path

    def save_best(self, ret: float) -> Path | None:
        """checkpoints/best.pt when the newest evaluation's return beats every earlier
        one: the agent and the progress record (what gpurl.eval and gpurl.export load),
        written as checkpoints are, with its checksum."""
        earlier = [r for _, r in self.eval_history[:-1]]
        if earlier and not ret > max(earlier):
            return None
        state = {
            "frames": self.frames,
            "eval_return": ret,
            "agent": self.agent.state(),
            "progress": self.progress.state_dict(),
            "meta": self.meta,
        }
        try:
            return save_checkpoint(state, self.best_path)
        except (OSError, RuntimeError) as err:
            raise CheckpointWriteError(
                f"could not write {self.best_path} at frames {self.frames} ({err}): stopped; "
                f"{self._last_good()}"
            ) from err

    def resume(self, path) -> None:
        """Continue from a checkpoint. Under torchrun every rank reads rank 0's file: the
        networks, optimizers, counters and replay; ranks > 0 keep their own envs, noise
        and collector, so the world size may change between runs."""
        state, used = read_checkpoint(path, self.device)
        if self.rank > 0:
            state = {
                **state,
                "env": {},
                "tracker": self.tracker.state_dict(),
                "rng": torch.get_rng_state(),
                "cuda_rng": [],
                "collector": {},
            }
        self.load_state_dict(state)
        self.last_checkpoint = (used, self.frames)
        changed = config_changes(state.get("config"), self.run_settings)
        if changed and self.rank == 0:  # a warning: a new lr or budget may be meant
            shown = "; ".join(changed[:6]) + ("; ..." if len(changed) > 6 else "")
            print(
                f"gpurl: warning: resuming with {len(changed)} setting(s) other than the "
                f"checkpoint's: {shown}",
                file=sys.stderr,
            )

    # -- faults -------------------------------------------------------------------------------
    def check_finite(self, values: dict[str, float] | None = None) -> None:
        """Raise NonFiniteError when an update metric since the last read (`values`, the
        means just read, or else the device sums) or a parameter is NaN or inf. One host
        read; called at log, evaluation and checkpoint time, never per step."""
        params = [(n, p.detach()) for n, p in self.agent.parameters()]
        flags = [torch.isfinite(p).all() for _, p in params]
        params_ok = (
            torch.stack(flags).all()
            if flags
            else torch.ones((), dtype=torch.bool, device=self.device)
        )
        if values is None:
            if bool(params_ok & self.metrics.finite(params_ok.device)):
                self.checked_frames = self.frames
                return
            values = self.metrics.peek()
        elif all(math.isfinite(v) for v in values.values()) and bool(params_ok):
            self.checked_frames = self.frames
            return
        bad = [f"{k}={v}" for k, v in values.items() if not math.isfinite(v)]
        bad += [f"parameter {n}" for n, p in params if not bool(torch.isfinite(p).all())][:3]
        raise NonFiniteError(
            f"NaN or inf at frames {self.frames}, updates {self.progress.update_count} (all "
            f"finite at frames {self.checked_frames}): {', '.join(bad)}; stopped; "
            f"{self._last_good()}: lower agent.lr or fix the loss, then "
            f"{'resume from it' if self.last_checkpoint else 'start again'}"
        )

    def _last_good(self) -> str:
        if self.last_checkpoint is None:
            return "no checkpoint was written before it"
        path, frames = self.last_checkpoint
        return f"the last good checkpoint, {path} (frames {frames}), is kept intact"

    def finish(self) -> dict:
        m = self.meta
        title = f"{m.get('agent', '')} on {m.get('env', '')}, seed {m.get('seed', '')}"
        if self.runs.many:  # each run's curve, and the seeds' figure: trainers/seeds.py
            return self.finish_runs(title)
        curve = self.run_dir / "learning_curve.png"
        if self.rank == 0:
            plot_learning_curve(curve, title, self.eval_history, self.train_history)
        final = self.eval_history[-1][1] if self.eval_history else float("nan")
        best = max((r for _, r in self.eval_history), default=float("nan"))
        return {
            **self.meta,
            "frames": self.frames,
            "eval_return": final,
            "eval_metrics": self.eval_metrics,
            "best_eval_return": best,
            "eval_history": self.eval_history,
            "eval_log": self.eval_log,
            "final_train_return": final_train_return(self.train_history),
            "stopped_at_return": self.reached(self.cfg.get("stop_at_return")),
            **self.stop_record(),
            "wall_time_s": round(self.wall_time, 2),
            "checkpoint": str(self.checkpoint_path),
            "best_checkpoint": str(self.best_path) if self.best_path.is_file() else None,
            "videos": self.videos,
            "learning_curve": str(curve),
        }

    def stop_record(self) -> dict:
        """Why the loop ended: "stopped" is "signal" (with the signal's name),
        "stop_at_return" or "total_frames"."""
        if self.stopped_by is not None:
            return {"stopped": "signal", "signal": self.stopped_by}
        if self.reached(self.cfg.get("stop_at_return")):
            return {"stopped": "stop_at_return"}
        return {"stopped": "total_frames"}

    def finish_runs(self, title: str) -> dict:
        """The group's summary (each run's final evaluation, their IQM and mean with
        intervals, the seeds figure) and, under "run_summaries", each run's own
        (train.run writes them: trainers/seeds.py)."""
        runs = []
        for k, seed in enumerate(self.runs.seeds):
            log = self.run_eval_log[k]
            history = [(e["frames"], e["return"]) for e in log]
            last = (
                {x: v for x, v in log[-1].items() if x not in ("frames", "wall_s")} if log else {}
            )
            runs.append(
                {
                    **self.meta,
                    "seed": seed,
                    "per_seed": {key: v[k] for key, v in self.runs.per_seed.items()},
                    "frames": self.frames,
                    "eval_return": history[-1][1] if history else float("nan"),
                    "eval_metrics": last,
                    "best_eval_return": max((r for _, r in history), default=float("nan")),
                    "eval_history": history,
                    "eval_log": log,
                    "train_history": self.run_train_history[k],
                    "final_train_return": final_train_return(self.run_train_history[k]),
                    "wall_time_s": round(self.wall_time, 2),
                    "checkpoint": str(self.checkpoint_path),
                }
            )
        finals = [r["eval_return"] for r in runs]
        curve = self.run_dir / "seeds_curve.png"
        if self.rank == 0:
            plot_seeds(
                curve,
                f"{title.rsplit(',', 1)[0]}, {self.runs.n} seeds",
                [r["eval_history"] for r in runs],
            )
        pbt = {}
        if self.population is not None:
            for k, run in enumerate(runs):  # the values run k's weights were trained under
                run["hyper_schedule"] = self.population.schedules[k]
            self.population.close(self.frames, self.run_eval_log)
            lineage = self.population.write_lineage(self.run_dir / "pbt_lineage.jsonl")
            plot = plot_population(
                self.run_dir / "pbt_hyper.png",
                self.population.lineage,
                self.population.space,
                f"PBT: {title.rsplit(',', 1)[0]}, {self.runs.n} runs",
            )
            pbt = {
                "pbt": {
                    **self.population.best(self.run_eval_log),
                    "lineage": str(lineage),
                    "plot": str(plot),
                }
            }
        return {
            **self.meta,
            "seeds": self.runs.seeds,
            "num_seeds": self.runs.n,
            "per_seed": self.runs.per_seed,
            "frames": self.frames,
            "eval_return": float(np.mean(finals)),
            "eval_returns": finals,
            "aggregate": aggregate(np.array(finals)) if all(map(math.isfinite, finals)) else None,
            "eval_history": self.eval_history,
            "stopped_at_return": self.reached(self.cfg.get("stop_at_return")),
            **self.stop_record(),
            "wall_time_s": round(self.wall_time, 2),
            "checkpoint": str(self.checkpoint_path),
            "learning_curve": str(curve),
            **pbt,
            "run_summaries": runs,
        }


def _key(key) -> str:
    """An observation key as text: ("agents", "self_state") -> "agents.self_state"."""
    return ".".join(key) if isinstance(key, tuple) else str(key)


def _shapes(modules: dict) -> dict[str, list[int]]:
    """The shape of every tensor of the agent's module state dicts, by dotted name."""
    return {
        f"{name}.{k}": list(t.shape)
        for name, sd in modules.items()
        for k, t in sd.items()
        if isinstance(t, torch.Tensor)
    }


def _next_multiple(frames: int, interval: int) -> int:
    interval = max(int(interval), 1)
    return (frames // interval + 1) * interval


# settings a resumed run may change without changing what it computes
RESUME_FREE = ("trainer.resume", "trainer.progress", "trainer.total_frames", "logger")


def config_changes(saved: dict | None, here: dict | None) -> list[str]:
    """The settings of `here` that differ from `saved` (nested config dicts), as
    "key: saved -> here", leaving out RESUME_FREE; [] when either is missing (a
    checkpoint written before checkpoints held their config)."""
    if saved is None or here is None:
        return []
    out = []

    def walk(a, b, prefix):
        for k in sorted(set(a) | set(b), key=str):
            key = f"{prefix}{k}"
            if any(key == f or key.startswith(f + ".") for f in RESUME_FREE):
                continue
            x, y = a.get(k, "(unset)"), b.get(k, "(unset)")
            if isinstance(x, dict) and isinstance(y, dict):
                walk(x, y, key + ".")
            elif x != y:
                out.append(f"{key} {x} -> {y}")

    walk(saved, here, "")
    return out
