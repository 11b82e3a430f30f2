"""The thin TorchRL shell that every native gpurl env shares.

A native env keeps its state in one structure, `env_state` (a NamedTuple of tensors: its
family's `...State`), and implements three methods that never read device data on the
host:

    _reset_where(mask)  start fresh episodes where mask [B] is True, leave the rest
    _advance(action)    step every env, no reset; return a StepResult
    _observation()      the observation entries, as tensors the env will not mutate later

From those, this class provides, for every env, both faces of the env:
- TorchRL's `EnvBase` (`reset`, `step`, `rollout`, partial resets through "_reset",
  `check_env_specs`), for anything in the TorchRL ecosystem;
- the lean path (`lean_reset`, `lean_step`) used by gpurl's collector and evaluator:
  no spec checks, no key juggling, no host reads, autoreset under a mask;
and on both, action validation (`validate_actions`) and forced resets (`force_reset`).
Env families do not override `_reset`, `_step`, `lean_reset` or `lean_step`; where one
needs something of its own it overrides the small hooks below (`_reset_all`,
`_restarted_observation`).

An env with a group of members (MarineNav's robots) names it with `group_key`: its
observation entries come as a nested dict under that key, and its StepResult carries the
members' own reward and done flags (GroupResult), which the shell puts under the group.

An env may also describe its lean step as one pure function (`lean_core`, a LeanCore),
which gpurl.envs.compile traces and compiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

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


class GroupResult(NamedTuple):
    """The members' own outcome of a step (MarineNav's robots), each [B, R, 1]."""

    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor


class StepResult(NamedTuple):
    """What `_advance` returns: one step of every env, before any reset.

    reward, terminated, truncated: [B, 1]. `reached`: the observation entries the step
    reached, as `_observation()` would give them, when the step computed them anyway
    (MarineNav's perception, the pixel stack): the shell uses them instead of observing
    again; None: the shell calls `_observation()`. `group`: the members' own reward and
    flags, for an env with a group (NativeEnv.group_key), else None.
    """

    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    reached: dict | None = None
    group: GroupResult | None = None


@dataclass(frozen=True)
class LeanCore:
    """A native env's lean step as pure functions of tensors (see gpurl.envs.compile).

    step(work, action, noise, force_reset) -> (work, next) advances the working state
    `work`, a tuple of tensors: unpack(*env.env_state), and back to the env's state with
    pack(*work) (a state of the env's type). `noise` is one uniform [0, 1) tensor per
    shape in `noise_shapes`: all the randomness a step uses, drawn for every env.
    `force_reset` is NativeEnv.force_reset, a Python flag fixed when traced. `next` holds
    the entries of lean_step's first TensorDict; observe(*state) gives those of its
    second from the packed state, as _observation() does. Same inputs, same outputs:
    everything a step must see changing is in `work` or `noise`, never in Python. A
    working state lets a multi-step rollout skip the repacking between steps (CartPole
    works on its state's columns). `inductor_options`: Inductor config the step compiles
    best with (the caller's own options win). `views`: entries of `next` and of
    observe's dict that the step returns packed (name -> a function viewing the packed
    tensor as the entry, with no copy); the compiled step applies it to the graph's
    outputs, since a dtype view inside a compiled graph costs a copy.
    """

    step: Callable
    noise_shapes: tuple[torch.Size, ...]
    observe: Callable
    unpack: Callable = lambda *state: state
    pack: Callable = lambda *work: work
    inductor_options: dict = field(default_factory=dict)
    views: dict = field(default_factory=dict)


def state_attributes(state_type: type) -> type:
    """A base class giving an env one attribute per field of its state type (a
    NamedTuple): `env.steps` reads env.env_state.steps, and `env.steps = t` replaces that
    field. For callers and tests that read or set one piece of the state; an env's own
    step works on env_state as a whole."""

    def attribute(index: int, name: str) -> property:
        def read(self):
            return self.env_state[index]

        def write(self, value):
            self.env_state = self.env_state._replace(**{name: value})

        return property(read, write, doc=f"env_state.{name}")

    fields = {name: attribute(i, name) for i, name in enumerate(state_type._fields)}
    return type(f"{state_type.__name__}Attributes", (), fields)


class NativeEnv(EnvHooks, EnvBase):
    """The shell of every native env; gpurl's hooks (envs/hooks.py) with their defaults.
    `max_episode_steps` is the episode length at which `truncated` is set."""

    #: the env's state: a NamedTuple of tensors (nested NamedTuples of tensors allowed),
    #: everything a step reads and writes; set by the family's constructor
    env_state: tuple
    lean_path = True  # gpurl's collector steps it through lean_step
    #: benchmark knob (tools/bench_env.py --force-resets): when True, every step ends every
    #: episode (reported as truncated, root and group), so every step runs the reset path
    force_reset: bool = False
    #: the key of the env's group of members (MarineNav's "agents"), None if it has none;
    #: the group's entries have batch dims `group_batch_size`, e.g. [B, R]
    group_key: str | None = None
    group_batch_size: torch.Size | None = None

    def __init__(self, num_envs: int, device: torch.device | str = "cpu", seed: int = 0):
        if int(num_envs) < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs}: set env.num_envs=1 or more")
        super().__init__(batch_size=torch.Size([int(num_envs)]), device=device)
        self.num_envs = int(num_envs)
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)

    def __setattr__(self, name, value):
        # The state is reassigned every step; nn.Module's __setattr__ (via EnvBase) checks
        # parameters, buffers and submodules each time. A plain attribute that already
        # exists is just a dict entry: write it directly.
        if name in self.__dict__ and (type(value) is torch.Tensor or isinstance(value, tuple)):
            self.__dict__[name] = value
        else:
            super().__setattr__(name, value)

    # -- to implement -------------------------------------------------------------------
    def _reset_where(self, mask: torch.Tensor) -> None:
        """Start fresh episodes where mask [B] is True; leave the other envs as they are."""
        raise NotImplementedError

    def _advance(self, action: torch.Tensor) -> StepResult:
        """Step every env with `action` (no reset, no validation: the shell does those)."""
        raise NotImplementedError

    def _observation(self) -> dict:
        """The observation entries of the current state, in a fresh dict the caller may
        extend (a group's entries in a nested dict under group_key)."""
        raise NotImplementedError

    # -- hooks with defaults ------------------------------------------------------------
    def _reset_all(self) -> None:
        """Start fresh episodes in every env (a full reset: `reset()` without "_reset",
        and lean_reset). MarineNav draws fresh scenarios here rather than pool entries."""
        self._reset_where(torch.ones(self.batch_size, dtype=torch.bool, device=self.device))

    def _restarted_observation(self, reached: dict, done: torch.Tensor) -> dict:
        """The observation to act on after lean_step's autoreset: `reached` (this step's
        observation entries) where the env goes on, the fresh episode's where done [B].
        Called right after _reset_where(done). The default observes the state again;
        MarineNav blends in the initial observation stored with the drawn scenarios."""
        return self._observation()

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
        """The current observation as a TensorDict."""
        return self._td(self._observation())

    def _td(self, entries: dict) -> TensorDict:
        """A TensorDict of entries (a group's nested dict becomes its own TensorDict)."""
        key = self.group_key
        if key is not None:
            entries[key] = fast_tensordict(entries[key], self.group_batch_size, self.device)
        return fast_tensordict(entries, self.batch_size, self.device)

    def _next_td(self, reached: dict, result: StepResult, done: torch.Tensor) -> TensorDict:
        """The step's ("next", ...) entries: the observation reached, reward and flags,
        root and group; `done` is terminated | truncated [B, 1]. `reached` itself is left
        as it was."""
        entries = dict(reached)
        entries.update(
            reward=result.reward,
            done=done,
            terminated=result.terminated,
            truncated=result.truncated,
        )
        key = self.group_key
        if key is not None:
            group = result.group
            members = dict(entries[key])
            members.update(
                reward=group.reward,
                done=group.terminated | group.truncated,
                terminated=group.terminated,
                truncated=group.truncated,
            )
            entries[key] = members
        return self._td(entries)

    def _advance_checked(self, action: torch.Tensor) -> StepResult:
        """_advance with what the shell adds on every face: validation and forced resets."""
        if self.validate_actions:  # a Python flag: the check's host read only when asked
            self.check_action(action)
        result = self._advance(action)
        if self.force_reset:  # a Python flag: no device read
            group = result.group
            if group is not None:
                group = group._replace(truncated=torch.ones_like(group.truncated))
            result = result._replace(truncated=torch.ones_like(result.truncated), group=group)
        return result

    # -- TorchRL face -------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self._reset_all()
        else:
            self._reset_where(mask.reshape(self.batch_size).to(self.device))
        out = self._observation()
        zeros = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        out.update(done=zeros, terminated=zeros.clone(), truncated=zeros.clone())
        if self.group_key is not None:
            zeros = torch.zeros((*self.group_batch_size, 1), dtype=torch.bool, device=self.device)
            members = dict(out[self.group_key])
            members.update(done=zeros, terminated=zeros.clone(), truncated=zeros.clone())
            out[self.group_key] = members
        return self._td(out)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        result = self._advance_checked(tensordict.get(self.action_key))
        reached = self._observation() if result.reached is None else result.reached
        return self._next_td(reached, result, result.terminated | result.truncated)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self.rng.manual_seed(seed)

    # -- exact resume -----------------------------------------------------------------------
    def env_state_dict(self) -> dict:
        """The env's state (env_state, field by field) and its generator's state: what a
        checkpoint needs for a resumed run to step exactly as an uninterrupted one. Envs
        with state beyond env_state (host counters, a scenario pool) add theirs."""
        return {"state": _state_to_dict(self.env_state), "rng": self.rng.get_state()}

    def load_env_state_dict(self, state: dict) -> None:
        """Restore what env_state_dict returned: env_state and the generator."""
        if "state" not in state:
            raise ConfigError(
                f"the checkpoint's {type(self).__name__} state was written by an older gpurl "
                f"(before env_state): resume it with that version, or start the run afresh"
            )
        self.env_state = _state_from_dict(self.env_state, state["state"], self.device)
        self.rng.set_state(state["rng"].cpu())  # generator states live on the host

    def lean_core(self) -> LeanCore | None:
        """The lean step as a pure function, for compiling; None where the env has none.

        With the noise drawn by `torch.rand(shape, generator=self.rng)` in order, one
        lean_core step must give what lean_step gives.
        """
        return None

    def compile_step(self) -> bool:
        """compile.env for an env with no lean_core: compile the pure part of its own step
        in place (its lean_step then runs it) and return True; False (the default) where
        it has nothing to compile. MarineNav's resets draw from a scenario pool, so it
        compiles its step's physics, perception and reward this way."""
        return False

    # -- lean face ------------------------------------------------------------------------
    def lean_reset(self) -> TensorDict:
        """Reset every env; return the observation to act on."""
        self._reset_all()
        return self._observation_td()

    def lean_step(self, action: torch.Tensor) -> tuple[TensorDict, TensorDict]:
        """Step, then reset the envs that are done, all under masks.

        `action` is the action tensor (or a TensorDict holding it at the action key).
        Returns (next, obs): `next` holds the observation reached by this step (before
        any reset), reward, done, terminated and truncated (and the group's), as in
        TorchRL's ("next", ...) entries; `obs` is the observation to act on at the
        following step, already reset where the episode ended.
        """
        if type(action) is not torch.Tensor and isinstance(action, TensorDictBase):
            action = action.get(self.action_key)
        result = self._advance_checked(action)
        reached = self._observation() if result.reached is None else result.reached
        done = result.terminated | result.truncated
        nxt = self._next_td(reached, result, done)
        done = done.reshape(self.batch_size)
        self._reset_where(done)
        return nxt, self._td(self._restarted_observation(reached, done))

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """The greedy-return fallback: the mean return of one episode per env."""
        return {"return": self.play_episodes(policy)["return"].mean().item()}

    @property
    def evaluates_by_run(self) -> bool:
        # the fallback's episodes split by env slice; an env's own protocol may not
        return type(self).evaluation_protocol is NativeEnv.evaluation_protocol

    def evaluation_by_run(self, policy, runs: int) -> list[dict[str, float]]:
        """The fallback for `runs` runs at once: each slice's mean return. A run's
        episodes do not depend on the other runs' actions: a native env draws its
        randomness for every env at every reset and step (noise_shapes)."""
        returns = self.play_episodes(policy)["return"].reshape(runs, -1).mean(1)
        return [{"return": r} for r in returns.tolist()]

    @torch.no_grad()
    def play_episodes(self, policy, max_steps: int | None = None) -> dict[str, torch.Tensor]:
        """One episode in every env from a reset, acting with `policy` (the caller makes
        it greedy): per env [batch] its return (summed over robots), length, and whether
        it ended terminated (a goal or a crash, not max_steps). For evaluation: it reads
        the device every 64 steps to stop once every episode has ended. The observation
        carries TorchRL's "is_init" [*batch, 1], True where an episode begins (a recurrent
        policy restarts its state there)."""
        batch = self.batch_size
        start = self.rng.get_state()
        obs = self.lean_reset()
        obs.set("is_init", torch.ones((*batch, 1), dtype=torch.bool, device=self.device))
        ret = torch.zeros(batch, device=self.device)
        length = torch.zeros(batch, device=self.device)
        alive = torch.ones(batch, dtype=torch.bool, device=self.device)
        terminated = torch.zeros(batch, dtype=torch.bool, device=self.device)
        for t in range(max_steps or self.max_episode_steps):
            nxt, obs = self.lean_step(policy(obs)["action"])
            obs.set("is_init", nxt["done"].reshape(*batch, -1).any(-1, keepdim=True))
            ret += nxt["reward"].reshape(*batch, -1).sum(-1) * alive
            length += alive
            terminated |= nxt["terminated"].reshape(*batch, -1).any(-1) & alive
            alive &= ~nxt["done"].reshape(*batch, -1).any(-1)
            if t % 64 == 63 and not alive.any():
                break
        # The generator leaves in a state drawn from the one it came in with, not advanced
        # by however many steps the longest episode took: with N runs' copies in one env
        # (trainer.num_seeds), no run's next evaluation depends on another run's episodes.
        self.rng.set_state(start)
        nxt = torch.randint(2**62, (1,), generator=self.rng, device=self.rng.device)
        self.rng.manual_seed(int(nxt.item()))
        return {"return": ret, "length": length, "terminated": terminated}


def _state_to_dict(state: tuple) -> dict:
    """A state NamedTuple as a plain dict (nested NamedTuples as nested dicts): what a
    checkpoint stores, loadable without the state's class."""
    return {k: _state_to_dict(v) if isinstance(v, tuple) else v for k, v in state._asdict().items()}


def _state_from_dict(like: tuple, saved: dict, device) -> tuple:
    """A state of `like`'s type from _state_to_dict's dict, its tensors on `device`."""
    values = []
    for name, current in zip(like._fields, like, strict=True):
        value = saved[name]
        if isinstance(current, tuple):
            value = _state_from_dict(current, value, device)
        elif isinstance(value, torch.Tensor):
            value = value.to(device)
        values.append(value)
    return like._make(values)
