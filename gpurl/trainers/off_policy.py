"""The off-policy loop: collect -> replay -> update, with evaluation, checkpoints and logs.

    for each batch of frames_per_batch frames:
        extend the replay buffer with the batch
        after init_random_frames: utd x frames_per_batch updates on sampled minibatches
        every log_interval frames: read device metrics once, log, update the progress bar
        every eval_interval frames: greedy evaluation on separate env copies
        every checkpoint_interval frames: save everything needed to resume

`iteration()` is the hot path: it never reads device data on the host
(tests/test_host_reads_training.py checks it for every agent).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from tqdm import tqdm

from gpurl.errors import ConfigError
from gpurl.trainers.checkpoint import load_checkpoint, save_checkpoint
from gpurl.trainers.collector import make_collector
from gpurl.trainers.evaluation import evaluate
from gpurl.trainers.metrics import EpisodeTracker, MetricSums
from gpurl.trainers.replay import make_replay_buffer
from gpurl.trainers.reporting import plot_learning_curve


class OffPolicyTrainer:
    def __init__(self, cfg, env, eval_env, agent, run_dir: Path, logger=None, meta=None):
        t = cfg
        for key in ("total_frames", "frames_per_batch", "batch_size", "buffer_size"):
            if int(t[key]) < 1:
                raise ConfigError(f"trainer.{key} must be >= 1, got {t[key]}")
        self.cfg, self.env, self.eval_env, self.agent = cfg, env, eval_env, agent
        self.run_dir, self.logger, self.meta = Path(run_dir), logger, meta or {}
        self.device = env.device
        self.buffer = make_replay_buffer(t.buffer_size, t.batch_size, env.device)
        self.collector = make_collector(env, agent.policy, int(t.frames_per_batch))
        self.tracker = EpisodeTracker(env.batch_size.numel(), env.device)
        self.metrics = MetricSums()
        self.frames = 0
        self.update_debt = 0.0
        self.eval_history: list[tuple[int, float]] = []
        self.train_history: list[tuple[int, float]] = []
        self.wall_time = 0.0
        self.checkpoint_path = self.run_dir / "checkpoints" / "last.pt"
        # Envs with a curriculum (MarineNav) follow the trainer's frame count.
        self.curriculum = getattr(env, "set_global_step", None)

    # -- the hot path -----------------------------------------------------------------------
    def iteration(self) -> None:
        """Collect one batch, store it, and run the updates it pays for. No host reads."""
        if self.curriculum is not None:
            self.curriculum(self.frames)  # a host int: nothing is read back
        batch = self.collector.rollout()
        self.frames += batch.numel()
        self.tracker.update(batch)
        self.buffer.extend(batch.reshape(-1))
        if self.frames < self.cfg.init_random_frames:
            return
        self.update_debt += self.cfg.utd * batch.numel()
        while self.update_debt >= 1:
            self.update_debt -= 1
            self.metrics.add(self.agent.update(self.buffer.sample()))

    # -- the loop -----------------------------------------------------------------------------
    def train(self) -> dict:
        t = self.cfg
        start = time.perf_counter() - self.wall_time
        next_log = _next_multiple(self.frames, t.log_interval)
        next_eval = _next_multiple(self.frames, t.eval_interval)
        next_ckpt = _next_multiple(self.frames, t.checkpoint_interval)
        bar = tqdm(
            total=int(t.total_frames),
            initial=self.frames,
            unit="frames",
            unit_scale=True,
            dynamic_ncols=True,
            disable=not t.progress,
            desc=f"{self.meta.get('agent', '')}/{self.meta.get('env', '')}",
        )
        postfix: dict[str, str] = {}
        while self.frames < t.total_frames:
            before = self.frames
            self.iteration()
            bar.update(self.frames - before)
            if self.frames >= next_log:
                next_log = _next_multiple(self.frames, t.log_interval)
                postfix.update(self.log(time.perf_counter() - start))
                bar.set_postfix(postfix, refresh=False)
            if self.frames >= next_eval or self.frames >= t.total_frames:
                next_eval = _next_multiple(self.frames, t.eval_interval)
                ret = self.evaluate()
                postfix["eval"] = f"{ret:.1f}"
                bar.set_postfix(postfix, refresh=False)
            if self.frames >= next_ckpt or self.frames >= t.total_frames:
                next_ckpt = _next_multiple(self.frames, t.checkpoint_interval)
                self.wall_time = time.perf_counter() - start
                self.save()
        bar.close()
        self.wall_time = time.perf_counter() - start
        return self.finish()

    def log(self, elapsed: float) -> dict[str, str]:
        scalars = {f"train/{k}": v for k, v in self.metrics.read().items()}
        episodes = self.tracker.read()
        if episodes is not None:
            scalars.update({f"train/episode_{k}": v for k, v in episodes.items()})
            self.train_history.append((self.frames, episodes["return"]))
        scalars["train/fps"] = self.frames / max(elapsed, 1e-9)
        if hasattr(self.agent.policy, "epsilon"):
            scalars["train/epsilon"] = float(self.agent.policy._epsilon())
        if self.logger is not None:
            for k, v in scalars.items():
                self.logger.log_scalar(k, v, step=self.frames)
        return {"ret": f"{episodes['return']:.1f}"} if episodes else {}

    def evaluate(self) -> float:
        ret = evaluate(self.eval_env, self.agent.policy).mean().item()
        self.eval_history.append((self.frames, ret))
        if self.logger is not None:
            self.logger.log_scalar("eval/return", ret, step=self.frames)
        return ret

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "frames": self.frames,
            "update_debt": self.update_debt,
            "wall_time": self.wall_time,
            "agent": self.agent.state_dict(),
            "buffer": self.buffer.state_dict(),
            "tracker": self.tracker.state_dict(),
            "eval_history": self.eval_history,
            "train_history": self.train_history,
            "rng": torch.get_rng_state(),
            "meta": self.meta,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("env", "agent"):
            if key in self.meta and state["meta"].get(key) != self.meta[key]:
                raise ConfigError(
                    f"checkpoint was written by {key}={state['meta'].get(key)}, this run has "
                    f"{key}={self.meta[key]}: resume with the same {key}"
                )
        self.frames = state["frames"]
        self.update_debt = state["update_debt"]
        self.wall_time = state["wall_time"]
        self.agent.load_state_dict(state["agent"])
        self.buffer.load_state_dict(state["buffer"])
        self.tracker.load_state_dict(state["tracker"])
        self.eval_history = list(state["eval_history"])
        self.train_history = list(state["train_history"])
        torch.set_rng_state(state["rng"])

    def save(self) -> Path:
        return save_checkpoint(self.state_dict(), self.checkpoint_path)

    def resume(self, path) -> None:
        self.load_state_dict(load_checkpoint(path, self.device))

    def finish(self) -> dict:
        m = self.meta
        title = f"{m.get('agent', '')} on {m.get('env', '')}, seed {m.get('seed', '')}"
        curve = plot_learning_curve(
            self.run_dir / "learning_curve.png", title, self.eval_history, self.train_history
        )
        final = self.eval_history[-1][1] if self.eval_history else float("nan")
        best = max((r for _, r in self.eval_history), default=float("nan"))
        return {
            **self.meta,
            "frames": self.frames,
            "eval_return": final,
            "best_eval_return": best,
            "eval_history": self.eval_history,
            "wall_time_s": round(self.wall_time, 2),
            "checkpoint": str(self.checkpoint_path),
            "learning_curve": str(curve),
        }


def _next_multiple(frames: int, interval: int) -> int:
    interval = max(int(interval), 1)
    return (frames // interval + 1) * interval
