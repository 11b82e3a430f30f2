"""Compile a native env's lean step, or a whole random-action rollout, with Inductor.

    env = make_env({"name": "cartpole"}, num_envs=1024)
    step = compile_lean_step(env)                  # env.lean_step, compiled
    nxt, obs = step(action)                        # steps `env`

    rollout = compile_rollout(env, chunk=16)       # env-only benchmarking
    stats = rollout(10_000)                          # 10,000 steps of every env

Both start from the env's LeanCore (NativeEnv.lean_core): its lean step as one pure
function of tensors (working state, action, uniform noise) -> (working state, next),
and the observation as a function of the state. CartPole and Pendulum have one.

compile_lean_step (mode "step"), rng="env" (default): each step draws its noise eagerly
from the env's own generator, exactly as the eager path does (same calls, same order),
then runs the compiled core and stores the new state in env.env_state. The env's
methods are left as they are: whoever steps it (the collector, a benchmark) holds the
compiled step. So for the same seed and actions the compiled env follows the eager
env's trajectories: done, terminated and truncated flags and step counts equal,
observations and rewards equal to rounding (Inductor fuses and reorders float math and
has its own sin/cos, so a chaotic trajectory may drift by float ulps; the tests check
1e-5 from the same state and the flags over whole free-running trajectories).
rng="counter" draws the noise in the graph instead (see below): the same
distributions, another stream.

compile_rollout (mode "rollout"): the whole loop, actions included, is one compiled
function of `chunk` unrolled steps; Inductor fuses the chain into one pass over the
envs, and one call advances every env `chunk` steps. Its randomness comes from a
CounterRNG, a counter-based generator whose state (key, step counter) is tensors: a
32-bit integer hash of key, step and lane, a few vectorized integer ops. It is not the
eager generator's stream, so a compiled rollout is not the trajectory of an eager
lean_step loop with env.rng; it equals, to rounding, the same rollout run eagerly
(`compile=False`), and each of its steps is the env's LeanCore step, which is tested
equal to lean_step. Everything a compiled call must see changing lives in tensors.

Backends: "inductor" (default) traces the pure core once (make_fx, fixed shapes) and
compiles the graph with torch._inductor.compile, with no Dynamo guards to evaluate per
call (about one eager op of overhead); the compiled step re-traces itself when the
action's shape or dtype, or force_reset, changes. "dynamo" is plain
torch.compile(core, **torch_compile_kwargs) with Dynamo's guards, which costs tens of
microseconds per call on a small CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torchrl.data import Bounded, Categorical

from gpurl.core.compile import compile_flat
from gpurl.envs.base import LeanCore, NativeEnv, fast_tensordict
from gpurl.errors import ConfigError

# -- compiled lean step ----------------------------------------------------------------


def _core_of(env: NativeEnv) -> LeanCore:
    core = env.lean_core() if isinstance(env, NativeEnv) else None
    if core is None:
        name = type(env).__name__
        raise ConfigError(
            f"{name} has no pure lean step (lean_core) to compile: set compile.env=false"
        )
    return core


def _row_major(x):
    """x (a state: a tensor, or a (named) tuple of them) as the graph was traced with
    it: a computation on the counter generator's column-major lanes can leave a state
    tensor column-major, and the next call, fed that tensor, would fail the graph's
    stride check."""
    if isinstance(x, torch.Tensor):
        return x.contiguous()
    items = [_row_major(t) for t in x]
    return tuple(items) if type(x) is tuple else type(x)(*items)


def _with_core_options(core: LeanCore, backend: str, kwargs: dict) -> dict:
    """The compile kwargs with the core's own Inductor options under the caller's."""
    if backend != "inductor" or not core.inductor_options:
        return kwargs
    return {**kwargs, "options": {**core.inductor_options, **(kwargs.get("options") or {})}}


class CompiledLeanStep:
    """env.lean_step through the compiled LeanCore: a callable with lean_step's
    signature that steps `env` (compile_lean_step builds it)."""

    def __init__(
        self,
        env: NativeEnv,
        backend: str = "inductor",
        rng: str = "env",
        **torch_compile_kwargs,
    ):
        if rng not in ("env", "counter"):
            raise ConfigError(f"unknown compile rng '{rng}': choose env or counter")
        self.env = env
        self.core = _core_of(env)
        self.backend = backend
        self.counter_rng = None
        if rng == "counter":  # keyed by the env's seed, without drawing from env.rng
            seed = _ENV_KEY_SALT ^ env.rng.initial_seed()
            self.counter_rng = CounterRNG(self.core.noise_shapes, seed, env.device)
        self.kwargs = _with_core_options(self.core, backend, torch_compile_kwargs)
        self.compiled: dict[tuple, tuple] = {}
        self.compile_seconds = 0.0
        self.device, self.batch_size = env.device, env.batch_size
        self._last: tuple | None = None  # (force_reset, dtype, shape, entry) of the last call

    def _compile(self, key: tuple, action: torch.Tensor) -> tuple:
        env, core = self.env, self.core
        force_reset = key[0]
        n_state = len(env.env_state)
        layout = {}
        counter_rng = self.counter_rng

        def flat_step(*args):
            state, action, rest = args[:n_state], args[n_state], args[n_state + 1 :]
            if counter_rng is None:
                noise, advanced = rest, ()
            else:  # rest: key, counter, lanes
                noise = tuple(CounterRNG.draws(rest[0], rest[1], rest[2:]))
                advanced = (rest[1] + 1,)
            work, nxt = core.step(core.unpack(*state), action, noise, force_reset)
            state = tuple(_row_major(core.pack(*work)))
            obs = core.observe(*state)  # may alias the state, as _observation() does
            layout["next"], layout["obs"] = tuple(nxt), tuple(obs)
            return (*state, *advanced, *nxt.values(), *obs.values())

        state = tuple(env.env_state)
        if counter_rng is None:  # placeholders: compiling must not draw from env.rng
            noise = tuple(torch.zeros(s, device=env.device) for s in core.noise_shapes)
        else:
            noise = (counter_rng.key, counter_rng.counter, *counter_rng.lanes)
        inputs = (*state, action, *noise)
        t0 = time.perf_counter()
        flat_step(*inputs)  # records the output layout
        fn = compile_flat(flat_step, inputs, self.backend, **self.kwargs)
        if self.backend == "dynamo":  # compiles on its first call: pay for it here
            fn(*inputs)
        self.compile_seconds += time.perf_counter() - t0
        n_pre_next = n_state + (counter_rng is not None)
        n_pre_obs = n_pre_next + len(layout["next"])
        # the packed entries (LeanCore.views), by output position, viewed after the graph
        views = {
            n_pre + i: core.views[k]
            for n_pre, keys in ((n_pre_next, layout["next"]), (n_pre_obs, layout["obs"]))
            for i, k in enumerate(keys)
            if k in core.views
        }
        entry = (fn, layout["next"], layout["obs"], n_pre_next, n_pre_obs, views)
        self.compiled[key] = entry
        return entry

    def _noise_inputs(self) -> tuple:
        """The step's noise drawn now from the env's generator (in the eager path's calls
        and order), or the counter-based generator's state (drawn in the graph)."""
        if self.counter_rng is None:
            rng, device = self.env.rng, self.device
            return tuple(
                torch.rand(s, generator=rng, device=device) for s in self.core.noise_shapes
            )
        c = self.counter_rng
        return (c.key, c.counter, *c.lanes)

    def __call__(self, action: torch.Tensor):
        env = self.env
        if env.validate_actions:
            env.check_action(action)
        if not action.is_contiguous():
            action = action.contiguous()
        last = self._last
        if (
            last is not None
            and action.dtype is last[1]
            and env.force_reset is last[0]
            and action.shape == last[2]
        ):
            entry = last[3]
        else:
            key = (env.force_reset, action.dtype, action.shape)
            entry = self.compiled.get(key) or self._compile(key, action)
            self._last = (*key, entry)
        fn, next_keys, obs_keys, n_pre_next, n_pre_obs, views = entry
        state = env.env_state
        n_state = len(state)
        out = fn(*state, action, *self._noise_inputs())
        if views:
            out = list(out)
            for i, view in views.items():
                out[i] = view(out[i])
        env.env_state = state._make(out[:n_state])
        if self.counter_rng is not None:
            self.counter_rng.counter = out[n_state]
        b, device = self.batch_size, self.device
        nxt = fast_tensordict(
            dict(zip(next_keys, out[n_pre_next:n_pre_obs], strict=True)), b, device
        )
        obs = fast_tensordict(dict(zip(obs_keys, out[n_pre_obs:], strict=True)), b, device)
        return nxt, obs


def compile_lean_step(
    env: NativeEnv, backend: str = "inductor", rng: str = "env", **torch_compile_kwargs
) -> CompiledLeanStep:
    """`env.lean_step` running the compiled LeanCore (mode "step"): call it in place of
    env.lean_step; the env is not modified.

    rng="env" (default): each step's noise is drawn eagerly from env.rng, as the eager
    path draws it, so trajectories equal the eager env's for the same seed and actions
    (floats to rounding). rng="counter": the noise is drawn inside the compiled step by a
    CounterRNG (state in tensors, keyed by the env's seed): the same distributions, a
    different stream, and no eager draw per step. Compiles lazily on the first call,
    again if the action's shape or dtype or env.force_reset changes. Raises ConfigError
    for envs without a LeanCore.
    """
    return CompiledLeanStep(env, backend, rng, **torch_compile_kwargs)


# -- counter-based RNG -------------------------------------------------------------------


def _int32(value: int) -> int:
    """The low 32 bits of `value` as a signed int32 (what wrapping int32 arithmetic sees)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


_MUL1 = _int32(0x7FEB352D)
_MUL2 = _int32(0x846CA68B)
_LANE_MUL = _int32(0x2545F491)
_STEP_MUL = _int32(0x9E3779B9)
_ENV_KEY_SALT = 0x5EED  # the compiled step's stream differs from a rollout's of one seed


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (lowbias32) on int32 tensors, wrapping arithmetic.

    Right shifts are masked, so they act as logical shifts on the two's complement bits.
    """
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _MUL1
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _MUL2
    return x ^ ((x >> 16) & 0xFFFF)


def hashed_uniform(step_key: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) float32 of `lanes`' shape: 24 bits of mix32(step_key ^ lanes).

    `step_key` is an int32 scalar tensor, one per (step, draw); `lanes` are distinct
    pre-hashed int32 lane ids (see CounterRNG)."""
    bits = (mix32(step_key ^ lanes) >> 8) & 0xFFFFFF
    return bits.to(torch.float32) * (1.0 / (1 << 24))


class CounterRNG:
    """A counter-based generator whose whole state is tensors: key and step counter.

    draws(key, counter, lanes, t) is a pure function: the uniform [0, 1) tensors, one per
    shape given at construction, for step `counter + t`. Each value is
    hashed_uniform(key + step * golden, lane), a 32-bit hash; lanes are distinct per
    element and per shape. Not torch's generator stream, and not cryptographic.
    """

    def __init__(self, shapes, seed: int, device):
        self.key = mix32(torch.tensor(_int32(seed), dtype=torch.int32, device=device))
        self.counter = torch.zeros((), dtype=torch.int32, device=device)
        lanes, offset = [], 0
        for shape in shapes:
            n = torch.Size(shape).numel()
            ids = torch.arange(offset, offset + n, dtype=torch.int32, device=device)
            # Column-major ([B, k] with the env dim contiguous): each column a contiguous
            # [B] row, the layout a column-wise step reads with vector loads.
            rev = tuple(range(len(shape)))[::-1]
            lanes.append(mix32(ids * _LANE_MUL).reshape(tuple(shape)[::-1]).permute(*rev))
            offset += n
        self.lanes = tuple(lanes)

    @staticmethod
    def draws(key, counter, lanes, t: int = 0) -> list[torch.Tensor]:
        base = key + (counter + t) * _STEP_MUL  # SplitMix-style: mixed per lane below
        return [hashed_uniform(base, lane) for lane in lanes]


def _action_from_uniform(spec) -> Callable[[torch.Tensor], torch.Tensor]:
    if isinstance(spec, Categorical):
        # int32, not the spec's int64: the rollout never hands actions out, and 32-bit
        # lanes keep a vector of them as wide as a vector of float32.
        n = int(spec.space.n)
        return lambda u: (u * n).to(torch.int32).clamp_(max=n - 1)
    if isinstance(spec, Bounded):
        low, high = spec.space.low, spec.space.high
        return lambda u: (low + (high - low) * u).to(spec.dtype)
    raise ConfigError(
        f"random rollouts draw Categorical or Bounded actions, not {type(spec).__name__}"
    )


# -- compiled random rollout -------------------------------------------------------------


class RandomRollout:
    """Random-action rollouts of a native env: `chunk` steps per (compiled) call.

    Calling it with `steps` runs ceil(steps / chunk) chunks; every env advances, resets
    where done (LeanCore semantics) and counts its finished episodes and summed rewards,
    which the call returns as {"episodes": [B] int64, "reward": [B] float32, "frames":
    int} (frames = envs x steps run). Nothing is read on the host. The env's state
    tensors carry on from where they were, and are written back after each call.
    """

    def __init__(
        self,
        env: NativeEnv,
        chunk: int = 16,
        seed: int | None = None,
        compile: bool = True,
        backend: str = "inductor",
        **torch_compile_kwargs,
    ):
        self.env = env
        self.core = core = _core_of(env)
        self.chunk = int(chunk)
        device = env.device
        if seed is None:  # the env's seed, without drawing from env.rng
            seed = env.rng.initial_seed()
        # Draws per step: the action, then the step's noise.
        self.rng = CounterRNG((env.action_spec.shape, *core.noise_shapes), seed, device)
        to_action = _action_from_uniform(env.action_spec)
        step_fn, chunk_len = core.step, self.chunk

        n_state = len(env.env_state)

        def run_chunk(*args):
            state, (key, counter, episodes, reward), lanes = (
                args[:n_state],
                args[n_state : n_state + 4],
                args[n_state + 4 :],
            )
            work = core.unpack(*state)
            ended = torch.zeros_like(episodes, dtype=torch.int32)  # 32-bit lanes in the loop
            for t in range(chunk_len):
                draws = CounterRNG.draws(key, counter, lanes, t)
                work, nxt = step_fn(work, to_action(draws[0]), tuple(draws[1:]), False)
                ended = ended + nxt["done"].reshape(ended.shape)
                reward = reward + nxt["reward"].reshape(reward.shape)
            return (*_row_major(core.pack(*work)), counter + chunk_len, episodes + ended, reward)

        self._fn = run_chunk
        self.compile_seconds = 0.0
        if compile:
            t0 = time.perf_counter()
            inputs = self._inputs(*self._zero_stats())
            kwargs = _with_core_options(core, backend, torch_compile_kwargs)
            self._fn = compile_flat(run_chunk, inputs, backend, **kwargs)
            if backend == "dynamo":
                self._fn(*inputs)
            self.compile_seconds = time.perf_counter() - t0

    def _zero_stats(self):
        b, d = self.env.batch_size, self.env.device
        return torch.zeros(b, dtype=torch.int64, device=d), torch.zeros(b, device=d)

    def _inputs(self, episodes, reward) -> tuple:
        state = self.env.env_state
        rng = self.rng
        return (*state, rng.key, rng.counter, episodes, reward, *rng.lanes)

    def __call__(self, steps: int) -> dict:
        episodes, reward = self._zero_stats()
        chunks = -(-int(steps) // self.chunk)
        env = self.env
        for _ in range(chunks):
            *state, self.rng.counter, episodes, reward = self._fn(*self._inputs(episodes, reward))
            env.env_state = env.env_state._make(state)
        frames = chunks * self.chunk * self.env.batch_size.numel()
        return {"episodes": episodes, "reward": reward, "frames": frames}


def compile_rollout(
    env: NativeEnv, chunk: int = 16, seed: int | None = None, backend: str = "inductor", **kw
) -> RandomRollout:
    """A compiled random-action rollout of `env` (mode "rollout"), `chunk` steps a call."""
    return RandomRollout(env, chunk, seed, compile=True, backend=backend, **kw)
