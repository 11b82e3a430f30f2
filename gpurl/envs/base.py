"""The thin TorchRL shell that every native gpurl env shares.

A native env keeps its state as batched tensors on its device and implements three
methods that never read device data on the host:

    _reset_where(mask)  start fresh episodes where mask [B] is True, leave the rest
    _advance(action)    step every env; return reward, terminated, truncated, each [B, 1]
    _observation()      the observation entries, as tensors the env will not mutate later

From those, this class provides both faces of the env:
- TorchRL's `EnvBase` (`reset`, `step`, `rollout`, partial resets through "_reset",
  `check_env_specs`), for anything in the TorchRL ecosystem;
- the lean path (`lean_reset`, `lean_step`) used by gpurl's collector and evaluator:
  no spec checks, no key juggling, no host reads, autoreset under a mask.

An env may also describe its lean step as one pure function (`lean_core`, a LeanCore),
which gpurl.envs.compile traces and compiles.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from gpurl.core.private import unchecked_tensordict
from gpurl.envs.hooks import EnvHooks
from gpurl.errors import ConfigError


def fast_tensordict(source: dict, batch_size: torch.Size, device) -> TensorDict:
    """A TensorDict over tensors already known to have the right batch size and device,
    without the public constructor's checks (core.private.unchecked_tensordict): the
    lean path builds two a step. Entries must be well-formed."""
    return unchecked_tensordict(source, batch_size, device)


@dataclass(frozen=True)
class LeanCore:
    """A native env's lean step as pure functions of tensors (see gpurl.envs.compile).

    step(work, action, noise, force_reset) -> (work, next) advances the working state
    `work`, a tuple of tensors: unpack(*state) of the env's state tensors (named in order
    by `state_names`, env attributes), and back with pack(*work). `noise` is one uniform
    [0, 1) tensor per shape in `noise_shapes`: all the randomness a step uses, drawn for
    every env. `force_reset` is NativeEnv.force_reset, a Python flag fixed when traced.
    `next` holds the entries of lean_step's first TensorDict; observe(*state) gives those
    of its second from the packed state, as _observation() does. Same inputs, same
    outputs: everything a step must see changing is in `work` or `noise`, never in
    Python. A working state lets a multi-step rollout skip the repacking between steps
    (CartPole works on its state's columns).
    """

    step: Callable
    state_names: tuple[str, ...]
    noise_shapes: tuple[torch.Size, ...]
    observe: Callable
    unpack: Callable = lambda *state: state
    pack: Callable = lambda *work: work


class NativeEnv(EnvHooks, EnvBase):
    """The shell of every native env; gpurl's hooks (envs/hooks.py) with their defaults.
    `max_episode_steps` is the episode length at which `truncated` is set."""

    #: benchmark knob (tools/bench_env.py --force-resets): when True, every step ends every
    #: episode (reported as truncated), so every step runs the env's reset path
    force_reset: bool = False

    def __init__(self, num_envs: int, device: torch.device | str = "cpu", seed: int = 0):
        if int(num_envs) < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs}: set env.num_envs=1 or more")
        super().__init__(batch_size=torch.Size([int(num_envs)]), device=device)
        self.num_envs = int(num_envs)
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)

    def __setattr__(self, name, value):
        # State tensors are reassigned every step; nn.Module's __setattr__ (via EnvBase)
        # checks parameters, buffers and submodules each time. A plain tensor attribute
        # that already exists is just a dict entry: write it directly.
        if name in self.__dict__ and type(value) is torch.Tensor:
            self.__dict__[name] = value
        else:
            super().__setattr__(name, value)

    # -- to implement -------------------------------------------------------------------
    def _reset_where(self, mask: torch.Tensor) -> None:
        raise NotImplementedError

    def _advance(self, action: torch.Tensor):
        raise NotImplementedError

    def _observation(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    # -- shared helpers -----------------------------------------------------------------
    def _set_specs(self, observation: dict, action) -> None:
        """Observation entries and action as given; scalar reward and done flags [B, 1]."""
        self.observation_spec = Composite(observation, shape=self.batch_size, device=self.device)
        self.action_spec = action
        self.reward_spec = Unbounded(shape=(*self.batch_size, 1), device=self.device)
        flag = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool, device=self.device)
        self.done_spec = Composite(
            done=flag.clone(),
            terminated=flag.clone(),
            truncated=flag.clone(),
            shape=self.batch_size,
            device=self.device,
        )

    def _observation_td(self) -> TensorDict:
        return fast_tensordict(self._observation(), self.batch_size, self.device)

    # -- TorchRL face -------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            mask = torch.ones(self.batch_size, dtype=torch.bool, device=self.device)
        self._reset_where(mask.reshape(self.batch_size).to(self.device))
        out = self._observation_td()
        zeros = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        out.update({"done": zeros, "terminated": zeros.clone(), "truncated": zeros.clone()})
        return out

    def _advance_forced(self, action: torch.Tensor):
        if self.validate_actions:  # a Python flag: the check's host read only when asked
            self.check_action(action)
        reward, terminated, truncated = self._advance(action)
        if self.force_reset:  # a Python flag: no device read
            truncated = torch.ones_like(truncated)
        return reward, terminated, truncated

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward, terminated, truncated = self._advance_forced(tensordict.get("action"))
        out = self._observation_td()
        out.update(
            {
                "reward": reward,
                "done": terminated | truncated,
                "terminated": terminated,
                "truncated": truncated,
            }
        )
        return out

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self.rng.manual_seed(seed)

    # -- exact resume -----------------------------------------------------------------------
    #: host-side attributes a resumed run must restore besides the tensors (ints, a
    #: Python random.Random), named by envs that keep such state
    host_state: tuple[str, ...] = ()

    def env_state_dict(self) -> dict:
        """Every tensor attribute, the generator's state and the declared host state: what
        a checkpoint needs for a resumed run to step exactly as an uninterrupted one."""
        host = {}
        for name in self.host_state:
            value = getattr(self, name)
            host[name] = value.getstate() if isinstance(value, random.Random) else value
        tensors = {k: v for k, v in vars(self).items() if type(v) is torch.Tensor}
        tables = {  # dicts of tensors: MarineNav's scenario pool, pixel stats
            k: dict(v)
            for k, v in vars(self).items()
            if isinstance(v, dict) and v and all(type(x) is torch.Tensor for x in v.values())
        }
        return {"tensors": tensors, "tables": tables, "rng": self.rng.get_state(), "host": host}

    def load_env_state_dict(self, state: dict) -> None:
        for name, value in state["tensors"].items():
            setattr(self, name, value.to(self.device))
        for name, table in state["tables"].items():
            setattr(self, name, {k: v.to(self.device) for k, v in table.items()})
        self.rng.set_state(state["rng"].cpu())  # generator states live on the host
        for name, value in state["host"].items():
            current = getattr(self, name)
            if isinstance(current, random.Random):
                current.setstate(_as_tuples(value))
            else:
                setattr(self, name, value)

    def lean_core(self) -> LeanCore | None:
        """The lean step as a pure function, for compiling; None where the env has none.

        With the noise drawn by `torch.rand(shape, generator=self.rng)` in order, one
        lean_core step must give what lean_step gives.
        """
        return None

    # -- lean face ------------------------------------------------------------------------
    def lean_reset(self) -> TensorDict:
        """Reset every env; return the observation to act on."""
        self._reset_where(torch.ones(self.batch_size, dtype=torch.bool, device=self.device))
        return self._observation_td()

    def lean_step(self, action: torch.Tensor) -> tuple[TensorDict, TensorDict]:
        """Step, then reset the envs that are done, all under masks.

        Returns (next, obs): `next` holds the observation reached by this step (before any
        reset), reward, done, terminated and truncated, as in TorchRL's ("next", ...)
        entries; `obs` is the observation to act on at the following step, already
        reset where the episode ended.
        """
        reward, terminated, truncated = self._advance_forced(action)
        done = terminated | truncated
        nxt = self._observation()
        nxt.update(reward=reward, done=done, terminated=terminated, truncated=truncated)
        self._reset_where(done.reshape(self.batch_size))
        return fast_tensordict(nxt, self.batch_size, self.device), self._observation_td()

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """The greedy-return fallback: the mean return of one episode per env."""
        return {"return": self.play_episodes(policy)["return"].mean().item()}

    @torch.no_grad()
    def play_episodes(self, policy, max_steps: int | None = None) -> dict[str, torch.Tensor]:
        """One episode in every env from a reset, acting with `policy` (the caller makes
        it greedy): per env [batch] its return (summed over robots), length, and whether
        it ended terminated (a goal or a crash, not max_steps). For evaluation: it reads
        the device every 64 steps to stop once every episode has ended."""
        batch = self.batch_size
        obs = self.lean_reset()
        ret = torch.zeros(batch, device=self.device)
        length = torch.zeros(batch, device=self.device)
        alive = torch.ones(batch, dtype=torch.bool, device=self.device)
        terminated = torch.zeros(batch, dtype=torch.bool, device=self.device)
        for t in range(max_steps or self.max_episode_steps):
            nxt, obs = self.lean_step(policy(obs)["action"])
            ret += nxt["reward"].reshape(*batch, -1).sum(-1) * alive
            length += alive
            terminated |= nxt["terminated"].reshape(*batch, -1).any(-1) & alive
            alive &= ~nxt["done"].reshape(*batch, -1).any(-1)
            if t % 64 == 63 and not alive.any():
                break
        return {"return": ret, "length": length, "terminated": terminated}


def _as_tuples(value):
    """random.Random.setstate wants tuples; a checkpoint may hand back lists."""
    if isinstance(value, list | tuple):
        return tuple(_as_tuples(v) for v in value)
    return value
