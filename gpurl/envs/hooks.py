"""EnvHooks: everything gpurl asks of an env beyond TorchRL's EnvBase, declared once.

Every hook has a default, so an env overrides only what it has. Native envs
(envs/base.NativeEnv) and the adapter for any other TorchRL env (envs/foreign.ForeignEnv)
both inherit this class; the trainers, the evaluator and EnvInfo call these hooks
directly and never probe an env for what it might have.

    attribute / method            who reads or calls it, and when
    max_episode_steps             evaluation: the most steps an evaluation episode runs
    valid_key                     env_info (EnvInfo.valid_key): the collector stores it,
                                  the replay weights a group slot's transition by it
    observation_scales            env_info (EnvInfo.obs_scales): encoders divide by it
    model                         env_info (EnvInfo.model): what a policy may call
    has_held_out                  make_eval_env: the env takes `held_out` and evaluation
                                  envs are built with held_out=True
    validate_actions              make_env sets it from env.validate_actions; when True
                                  every step checks the action (check_action)
    lean_path                     the collector: gpurl's LeanCollector (lean_reset /
                                  lean_step) when True, TorchRL's Collector otherwise
    evaluation_protocol(policy)   the trainer, at each evaluation, inside a greedy
                                  no-grad context (trainers/evaluation.py)
    evaluates_by_run /            trainer.num_seeds=N: when True, build() makes one
    evaluation_by_run(policy, n)  evaluation env of N x eval_envs copies and the trainer
                                  evaluates the N runs in one pass, run k on the k-th
                                  slice; else each run on copies of its own
    check_evaluation()            build(), once, on the evaluation env
    set_global_step(frames)       the trainer, before each iteration: a curriculum
    read_stats()                  the trainer, at each log: the env's own statistics
    env_state_dict() /            checkpoints: what exact resume needs beyond the
    load_env_state_dict(state)    agent and the replay
    render_frames()               video (python -m gpurl.eval --video): RGB frames of
                                  every env's current state, or None (draws none)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from torchrl.data import Bounded, Categorical, MultiCategorical

from gpurl.core.keys import NestedKey
from gpurl.errors import ActionOutOfRangeError


class EnvHooks:
    """Everything gpurl asks of an env beyond TorchRL's EnvBase, each with a default
    (the module docstring says who calls each hook, and when). NativeEnv and ForeignEnv
    inherit it; an env overrides the hooks it has."""

    #: the most steps an evaluation episode runs (native envs also truncate there)
    max_episode_steps: int = 1000
    #: the entry that says whether a group slot holds a live member (MarineNav's
    #: ("agents", "running")): its transitions alone are experience. None: every slot.
    valid_key: NestedKey | None = None
    #: typical magnitude of each feature of an observation entry; encoders divide by it
    #: so raw physical units reach the first layer at unit scale
    observation_scales: Mapping[NestedKey, tuple[float, ...]] = MappingProxyType({})
    #: an object the policy may call, e.g. packing's geometry (EnvInfo.model)
    model: Any = None
    #: the constructor takes `held_out`: evaluation envs get episodes no training env has
    has_held_out: bool = False
    #: check every action against the action spec (a host read per step; off by default)
    validate_actions: bool = False
    #: collect with gpurl's LeanCollector through lean_reset / lean_step (native envs; a
    #: foreign env where its adapter allows: envs/foreign.py); else TorchRL's Collector
    lean_path: bool = False

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """Play `policy` (the caller makes it greedy) and return host floats: "return"
        (the headline figure) and whatever else the env measures."""
        raise NotImplementedError

    #: evaluation_by_run can split this env's evaluation by run (below)
    evaluates_by_run: bool = False

    def evaluation_by_run(self, policy, runs: int) -> list[dict[str, float]]:
        """The protocol for `runs` runs at once: this env holds runs x eval_envs copies,
        run k's the k-th slice, and `policy` is the runs' stacked policy. Each run's
        figures, as evaluation_protocol would give them for its slice alone."""
        raise NotImplementedError

    def check_evaluation(self) -> None:
        """Raise ConfigError now if this env cannot run its evaluation protocol (e.g. a
        fixed evaluation set needing a given number of envs)."""

    def set_global_step(self, frames: int) -> None:
        """The run's frame count (a host int), before each training iteration: envs with
        a curriculum follow it. No device read may happen here."""

    def read_stats(self) -> dict[str, float] | None:
        """The env's own statistics since the last call (one host read), or None."""
        return None

    def render_frames(self) -> torch.Tensor | None:
        """RGB frames of every env's current state, uint8 [*batch, H, W, 3] on the env's
        device, drawn from its state (gpurl/envs/draw.py); None: the env draws none."""
        return None

    def env_state_dict(self) -> dict:
        """What a checkpoint needs so that a resumed run steps exactly as an
        uninterrupted one; {} for an env whose state is not saved."""
        return {}

    def load_env_state_dict(self, state: dict) -> None:
        """Restore what env_state_dict returned."""

    def check_action(self, action: torch.Tensor) -> None:
        """Raise ActionOutOfRangeError, in one line, unless `action` lies in the action
        spec (a host read: only with validate_actions)."""
        spec = self.full_action_spec[self.action_key]
        if bool(spec.is_in(action.to(spec.device))):
            return
        if isinstance(spec, Bounded):
            low, high = spec.space.low.to(action.device), spec.space.high.to(action.device)
            allowed = f"[{low.min().item():g}, {high.max().item():g}]"
            bad = action[~((action >= low) & (action <= high))]
        elif isinstance(spec, Categorical) and not isinstance(spec, MultiCategorical):
            n = spec.space.n
            allowed = f"{{0, ..., {n - 1}}}"
            bad = action[(action < 0) | (action >= n)]
        else:
            allowed, bad = type(spec).__name__, action.reshape(-1)
        seen = bad.reshape(-1)[:1].tolist() or [
            f"dtype {action.dtype}, shape {tuple(action.shape)}"
        ]
        raise ActionOutOfRangeError(
            f"{type(self).__name__} got an action outside its action spec: {seen[0]} "
            f"(allowed {allowed}, dtype {spec.dtype}, shape {tuple(spec.shape)}); make the "
            f"policy emit actions in the spec (clip or map them), or set "
            f"env.validate_actions=false to skip this check"
        )
