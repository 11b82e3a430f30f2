"""The off-policy loop: collect -> replay -> update (the rest of the loop is trainers/base.py).
It trains OffPolicyAgents (agents/base.py).

    for each batch of frames_per_batch frames (one step of every env unless set):
        store the batch in the agent's replay (n-step, prioritized, per robot slot)
        after init_random_frames: utd x frames_per_batch updates on sampled minibatches,
        new priorities handed back to a prioritized replay

Under compile.update or compile.cudagraphs, an agent whose update is one learn step
draws its sample inside that step (`fused`: the update gets the replay's device
bounds, not a sample, and hands back the index its priorities belong to;
trainers/replay.DeviceReplay.draw). Sequence replay keeps the eager draw.

A recurrent agent (agent.recurrent: recurrent DQN) declares sequences in its ReplaySpec:
the replay deals whole sequences of one stream (trainers/sequence_replay.py, whose
samples wait until it holds one), and checkpoints keep the acting hidden state.

`iteration()` is the hot path: it never reads device data on the host
(tests/test_host_reads_training.py checks it for every agent).
"""

from __future__ import annotations

import dataclasses

from gpurl.errors import ConfigError
from gpurl.trainers.base import Trainer
from gpurl.trainers.collector import make_collector, require_lean_collector
from gpurl.trainers.replay import DeviceReplay
from gpurl.trainers.sequence_replay import SequenceReplay


class OffPolicyTrainer(Trainer):
    """Trains an OffPolicyAgent from a device replay the agent's ReplaySpec declares
    (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cfg, env, agent, info, progress = self.cfg, self.env, self.agent, self.info, self.progress
        for key in ("batch_size", "buffer_size"):
            if int(cfg[key]) < 1:
                raise ConfigError(f"trainer.{key} must be >= 1, got {cfg[key]}")
        if int(cfg.batch_size) % self.world:
            raise ConfigError(
                f"trainer.batch_size={cfg.batch_size} is the global minibatch, split over "
                f"{self.world} ranks: use a multiple of {self.world} or another world size"
            )
        spec = agent.replay_spec()
        if spec.prioritized and spec.beta_frames <= 0:
            spec = dataclasses.replace(spec, beta_frames=int(cfg.total_frames))
        runs = progress.runs.n  # N runs: N x the envs, buffer_size rows and batch_size
        self.frames_per_batch = int(cfg.frames_per_batch or 0) * runs or env.batch_size.numel()
        replay = DeviceReplay if spec.sequence is None else SequenceReplay
        self.buffer = replay(
            spec,
            info,
            agent.policy.in_keys,
            int(cfg.buffer_size) * runs,
            int(cfg.batch_size) // self.world * runs,  # each rank samples its share
            self.device,
            runs,
            progress.runs.value("gamma", spec.gamma, self.device),
        )
        self.collector = make_collector(
            env,
            agent.policy,
            info,
            self.frames_per_batch,
            progress,
            next_obs=spec.next_obs,
            step=self.step,
            act=self.acting,
        )
        require_lean_collector(self.collector, agent)
        self.update_debt = 0.0
        # A compiled or captured update draws its own sample (OffPolicyAgent.fuse_draw):
        # eager, the draw is a few dozen small kernels an update and, under CUDA graphs,
        # a copy of every sampled entry into the graph's inputs; on the H200 that was
        # two thirds of a MarineNav IQN iteration (docs/scaling.md).
        spec = agent.compile
        self.fused = (spec.update or spec.cudagraphs) and self.buffer.fusable and agent.fuses_draw
        if self.fused:
            buffer, progress = self.buffer, self.progress
            agent.fuse_draw(lambda bounds: buffer.draw(bounds, progress), buffer.bounds)

    # -- the hot path -----------------------------------------------------------------------
    def iteration(self) -> None:
        """Collect one batch, store it, and run the updates it pays for. No host reads."""
        self.env.set_global_step(self.frames)  # a host int: nothing is read back
        before = self.frames
        batch = self.collector.rollout()
        frames = self.frames - before  # over every rank: each collected as many
        self.tracker.update(batch)
        self.buffer.extend(batch)
        # the replay keeps raw observations: each update normalises with the current statistics
        self.agent.observe(batch)
        # a sequence replay needs one whole window first (a host count: no device read)
        if self.frames < self.cfg.init_random_frames or not self.buffer.ready():
            return
        # Every rank makes the same updates (their gradients are averaged): utd per frame
        # of the whole run, as with one process.
        self.update_debt += self.cfg.utd * frames
        while self.update_debt >= 1:
            self.update_debt -= 1
            sample = self.buffer.bounds if self.fused else self.buffer.sample(self.progress)
            out = self.agent.update(sample, self.progress)
            priority = out.pop("priority", None)
            if priority is not None:  # a fused step hands back the index it drew
                index = out.pop("index") if self.fused else sample["index"]
                self.buffer.update_priorities(index, priority)
            self.metrics.add(out)
            self.progress.add_update()

    def copy_run(self, parent: int, child: int) -> None:
        """PBT's exploit, the replay included where trainer.pbt.replay=parent: the
        child's streams then hold the parent's data, as its networks hold its weights."""
        super().copy_run(parent, child)
        if (self.cfg.get("pbt") or {}).get("replay", "parent") == "parent":
            self.buffer.copy_run(parent, child)

    # -- checkpoints --------------------------------------------------------------------------
    def extra_state(self) -> dict:
        state = {
            "update_debt": self.update_debt,
            "collector": self.collector.state_dict(),
            "acting": self.acting_state_dict(),
        }
        if self.cfg.get("save_replay", True):
            state["buffer"] = self.buffer.state_dict()
        return state

    def load_extra_state(self, state: dict) -> None:
        self.update_debt = state["update_debt"]
        self.collector.load_state_dict(state["collector"])
        self.load_acting_state(state.get("acting", {}))  # none in checkpoints before it
        if "buffer" in state:
            self.buffer.load_state_dict(state["buffer"])
