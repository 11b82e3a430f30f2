"""A trained run as a policy: load it, act with it, export it.

    from gpurl import api
    policy = api.load("runs/2026-11-26/10-00-00_dqn_cartpole_s0")   # its last checkpoint
    action = policy(observation)          # a tensor (or a mapping of the env's entries),
                                          # batched or not: the greedy action

`TrainedPolicy` rebuilds the run's agent from its saved config (.hydra/config.yaml)
and checkpoint, then acts greedily (the policy its evaluations act with) or, with
greedy=False, as it explored while training. A recurrent policy (agent.recurrent)
carries its state from call to call: `reset()` restarts it for new episodes, and
`first=` restarts it where a batch's episodes begin.

`export` writes it as a torch.export program (`.pt2`) that torch alone loads and runs,
with no gpurl, TorchRL or TensorDict in that process (examples/run_exported.py), after
checking that the program's actions equal the policy's on episodes recorded from the
env; with onnx=True also as an ONNX model (`.onnx`, the `export` extra: onnx,
onnxscript, onnxruntime), checked the same way in onnxruntime
(examples/run_exported_onnx.py). A recurrent policy's program is a step with its state
made explicit: (*entries, state, first) -> (action, state), the state [batch, *S] zeros
before an episode and `first` [batch] True at an episode's first step.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.envs import make_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError
from gpurl.policies.recurrent import IS_INIT
from gpurl.policies.wrapper import PolicyWrapper
from gpurl.train import load_trained, saved_config

CHECKPOINTS = ("last", "best")


def checkpoint_file(run_dir: str | Path, checkpoint: str = "last") -> Path:
    """checkpoints/last.pt or checkpoints/best.pt of a run directory, or a one-line
    ConfigError naming what is missing."""
    run_dir = Path(run_dir)
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint={checkpoint!r}: use one of {', '.join(CHECKPOINTS)}")
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir} is not a directory: pass a gpurl run directory")
    config = run_dir / ".hydra" / "config.yaml"
    if not config.is_file():
        raise ConfigError(f"{run_dir} holds no .hydra/config.yaml: pass a gpurl run directory")
    cfg = saved_config(config)
    seeds = int(cfg.trainer.get("num_seeds", 1) or 1)
    if seeds > 1:
        raise ConfigError(
            f"{run_dir} trained {seeds} seeds in one process (trainer.num_seeds={seeds}), as "
            f"one stacked network: evaluate, load and export take a one-seed run (train the "
            f"seed you want with seed=S)"
        )
    path = run_dir / "checkpoints" / f"{checkpoint}.pt"
    if not path.is_file():
        more = " (trainer.save_best keeps one)" if checkpoint == "best" else ""
        raise ConfigError(f"{run_dir} holds no checkpoints/{checkpoint}.pt{more}")
    return path


class TrainedPolicy(nn.Module):
    """A run's policy: observations in, actions out (module docstring)."""

    def __init__(self, run_dir: str | Path, checkpoint: str = "last", device="cpu"):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.checkpoint = checkpoint_file(run_dir, checkpoint)
        self.cfg, agent = load_trained(self.checkpoint, device)
        self.policy = agent.policy
        self.frames = int(agent.progress.frame_count)
        env = make_env(self.cfg.env, device=device, seed=int(self.cfg.seed), num_envs=1)
        self.info = env_info(env)
        self.in_keys = list(self.policy.in_keys)
        self.action_key = self.info.action_key
        # each entry's shape after the env's batch dims (a robot group's included)
        spec = env.full_observation_spec
        self.entry_shapes = {k: spec[k].shape[len(env.batch_size) :] for k in self.in_keys}
        env.close()

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a state from step to step (agent.recurrent)."""
        return isinstance(self.policy, PolicyWrapper) and self.policy.core is not None

    @property
    def state_shape(self) -> tuple[int, ...] | None:
        """A recurrent policy's state per env (a robot group's dims, then S), else None."""
        if not self.recurrent:
            return None
        return (*self.info.group_shape, self.policy.core.state_size)

    def reset(self) -> None:
        """New episodes ahead: a recurrent policy's state restarts from zeros (a
        feedforward one has none)."""
        if self.recurrent:
            self.policy.start_evaluation()

    def forward(self, obs, greedy: bool = True, first=None) -> torch.Tensor:
        """The action for `obs`: a tensor (an env with one observation entry) or a
        mapping of its entries, with or without leading batch dims. A recurrent policy
        moves its state on by this step, from zeros where `first` (bool, the batch's
        shape) marks an episode's first step."""
        if not isinstance(obs, Mapping | TensorDict):
            if len(self.in_keys) != 1:
                raise ConfigError(
                    f"this policy reads {len(self.in_keys)} entries ({self.in_keys}): pass a "
                    f"mapping of them"
                )
            obs = {self.in_keys[0]: obs}
        key = self.in_keys[0]
        shape = tuple(self.entry_shapes[key])
        tensor = torch.as_tensor(obs[key])
        batch = tensor.shape[: tensor.dim() - len(shape)]
        if tuple(tensor.shape[len(batch) :]) != shape:
            raise ConfigError(
                f"observation entry {key!r} has shape {tuple(tensor.shape)}; this policy "
                f"takes {shape}, with or without leading batch dims"
            )
        single = len(batch) == 0
        td = TensorDict(
            {
                k: torch.as_tensor(obs[k]).reshape(*(batch or (1,)), *self.entry_shapes[k])
                for k in self.in_keys
            },
            batch_size=batch or (1,),
        )
        if first is not None:
            flags = torch.as_tensor(first, dtype=torch.bool)
            td.set(IS_INIT, flags.reshape(*(batch or (1,)), 1))
        mode = ExplorationType.DETERMINISTIC if greedy else ExplorationType.RANDOM
        with set_exploration_type(mode), torch.no_grad():
            action = self.policy(td).get(self.action_key)
        return action[0] if single else action


class _Program(nn.Module):
    """What export traces, over a batch of any size: the observation entries in (in_keys'
    order) and the greedy action out; for a recurrent policy a step with its state made
    explicit, (*entries, state, first) -> (action, state)."""

    def __init__(self, trained: TrainedPolicy):
        super().__init__()
        self.policy, self.in_keys = trained.policy, trained.in_keys
        self.action_key, self.recurrent = trained.action_key, trained.recurrent

    def forward(self, *inputs: torch.Tensor):
        entries = inputs[: len(self.in_keys)]
        td = TensorDict(dict(zip(self.in_keys, entries, strict=True)), entries[0].shape[:1])
        if self.recurrent:
            state, first = inputs[len(self.in_keys) :]
            return self.policy.greedy_step(td.set(IS_INIT, first.reshape(-1, 1)), state)
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            return self.policy(td).get(self.action_key)


class Recording(NamedTuple):
    """Greedy steps of the run's policy in envs of its kind, [steps, envs, ...] each."""

    entries: list[torch.Tensor]  # in_keys' order
    first: torch.Tensor  # bool: the step begins an episode
    actions: torch.Tensor


def recorded_steps(trained: TrainedPolicy, steps: int, envs: int = 16, seed: int = 0):
    """A Recording of `steps` steps in `envs` envs of the run's kind played by its greedy
    policy from a reset on the lean path, each env's episodes following one another (a
    recurrent policy's state restarting where one begins, as in an evaluation)."""
    env = make_env(trained.cfg.env, device="cpu", seed=seed + 20_000, num_envs=envs)
    trained.reset()
    obs = env.lean_reset()
    first = torch.ones(envs, dtype=torch.bool)
    entries, flags, actions = [], [], []
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        for _ in range(steps):
            entries.append([obs.get(k).clone() for k in trained.in_keys])
            action = trained.policy(obs.set(IS_INIT, first.reshape(envs, 1))).get(
                trained.action_key
            )
            flags.append(first)
            actions.append(action.clone())
            nxt, obs = env.lean_step(action)
            first = nxt.get("done").reshape(envs, -1).any(-1)
    env.close()
    trained.reset()
    stacked = [torch.stack(column) for column in zip(*entries, strict=True)]
    return Recording(stacked, torch.stack(flags), torch.stack(actions))


def replayed(call, recording: Recording, state: torch.Tensor) -> torch.Tensor:
    """The actions [steps, envs, ...] of a recurrent step `call` ((*entries, state,
    first) -> (action, state)) over a recording's steps, from `state`."""
    actions = []
    for t in range(len(recording.first)):
        action, state = call(*(e[t] for e in recording.entries), state, recording.first[t])
        actions.append(action)
    return torch.stack(actions)


# ONNX Runtime's float kernels may round the last bit differently from torch's
ONNX_TOLERANCE = 1e-5


def export(
    trained: TrainedPolicy, out: str | Path, observations: int = 1000, onnx: bool = False
) -> dict:
    """Write the greedy policy as a torch.export program to `out` (.pt2) and a JSON of
    its inputs beside it, after checking the program's actions equal the policy's on
    `observations` recorded observations (a recurrent policy's program stepped through
    the recorded episodes from zeros, its state fed back); with `onnx`, an ONNX model
    beside it (.onnx) whose actions onnxruntime checks the same way (discrete ones equal,
    continuous ones within ONNX_TOLERANCE). Returns that JSON's content."""
    out = Path(out)
    envs = 16
    recording = recorded_steps(trained, -(-observations // envs), envs)
    program = _Program(trained)
    if trained.recurrent:
        zeros = torch.zeros((envs, *trained.state_shape))
        example = (*(e[0] for e in recording.entries), zeros, recording.first[0])
        checked = lambda call: replayed(call, recording, zeros)  # noqa: E731
        count = recording.first.numel()
    else:
        flat = [e.flatten(0, 1)[:observations] for e in recording.entries]
        example = tuple(flat)
        checked = lambda call: call(*flat)  # noqa: E731
        count = len(flat[0])
    batch = torch.export.Dim("batch", min=1)
    try:
        with torch.no_grad(), _quiet_tracer():
            exported = torch.export.export(
                program, example, dynamic_shapes=(tuple({0: batch} for _ in example),)
            )
    except Exception as err:  # torch.export names the op or construct it could not trace
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"the policy of {trained.run_dir} does not export: {reason}") from None
    with torch.no_grad():
        expected, got = checked(program), checked(exported.module())
    if not torch.equal(expected, got):
        differ = int((expected != got).reshape(count, -1).any(-1).sum())
        raise ConfigError(
            f"the exported policy differs from the run's on {differ} of {count} recorded "
            f"observations: not written"
        )
    if trained.recurrent and not torch.equal(expected, recording.actions):
        raise ConfigError(  # the explicit-state step against the policy's own acting
            f"the policy of {trained.run_dir} acts otherwise with its state made explicit "
            f"than with its own: not written"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    model = to_onnx(exported, checked, expected, trained.run_dir) if onnx else None
    torch.export.save(exported, out)
    if model is not None:
        model.save(out.with_suffix(".onnx"))
    meta = {
        "program": out.name,
        "run_dir": str(trained.run_dir),
        "checkpoint": trained.checkpoint.name,
        "frames": trained.frames,
        "inputs": [
            {
                "key": k if isinstance(k, str) else list(k),
                "shape": list(e.shape[2:]),
                "dtype": str(e.dtype).removeprefix("torch."),
            }
            for k, e in zip(trained.in_keys, recording.entries, strict=True)
        ],
        "action": {
            "shape": list(expected.shape[2 if trained.recurrent else 1 :]),
            "dtype": str(expected.dtype).removeprefix("torch."),
        },
        # a recurrent program's state: zeros before an episode, fed back after each step
        "state": None
        if not trained.recurrent
        else {
            "shape": list(trained.state_shape),
            "dtype": "float32",
            "kind": trained.policy.core.kind,
        },
        "checked_observations": count,
        "onnx": out.with_suffix(".onnx").name if onnx else None,
    }
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


@contextlib.contextmanager
def _quiet_tracer():
    """torch.export's tracer logs the graph it failed on as warnings (dozens of lines)
    before it raises: the one-line error that follows says what matters."""
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def to_onnx(exported, checked, expected: torch.Tensor, run_dir: Path):
    """The exported program as an ONNX model, checked in onnxruntime: `checked(call)`
    runs a call on the recorded observations (export's), whose actions must be the
    policy's, `expected`; a one-line ConfigError where it fails."""
    try:
        import numpy as np
        import onnxruntime
    except ImportError:
        raise ConfigError(
            "--onnx needs onnx, onnxscript and onnxruntime: pip install -e '.[export]'"
        ) from None
    try:
        model = torch.onnx.export(exported, dynamo=True, verbose=False)
    except Exception as err:  # the op ONNX has no translation for is named in it
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"the policy of {run_dir} does not export to ONNX: {reason}") from None
    session = onnxruntime.InferenceSession(model.model_proto.SerializeToString())
    names = [i.name for i in session.get_inputs()]

    def call(*inputs: torch.Tensor):
        outs = session.run(None, {n: x.numpy() for n, x in zip(names, inputs, strict=True)})
        outs = [torch.from_numpy(np.asarray(o)) for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    got = checked(call)
    if expected.dtype.is_floating_point:
        worst = float((got - expected).abs().max())
        same = worst <= ONNX_TOLERANCE
    else:
        same, worst = torch.equal(got.to(expected.dtype), expected), 1
    if not same:
        raise ConfigError(
            f"the ONNX model of {run_dir} acts otherwise than the policy on the recorded "
            f"observations (largest difference {worst:g}): not written"
        )
    return model
