"""ForeignEnv: any TorchRL EnvBase (a Gymnasium task, an env a user brings) as a gpurl env.

It is a TransformedEnv over the foreign env (the transform moves data between the env's
device and gpurl's, or does nothing), so TorchRL's collector and `rollout` run it as
they would the env itself, and it carries the declared gpurl hooks (envs/hooks.py) with
their defaults:

    evaluation_protocol   greedy episodes: each env's first episode return, rolled out
                          for at most max_episode_steps (envs that finish early are
                          reset and stepped on: a vector env may not be stepped past
                          its end)
    validate_actions      checked at every step of the TorchRL face, as native envs do
    render_frames         the env's own render where its family hands one over (`frames`:
                          Gymnasium's rgb_array, DMC's MuJoCo camera, VMAS's view), else
                          none
    lean_path             gpurl's LeanCollector steps it through lean_reset / lean_step,
                          one generic adapter over TorchRL's step_and_maybe_reset, where
                          that costs no device sync: on the CPU (a host read of host data
                          syncs nothing), and on other devices when a probe of two steps
                          counts no host reads; otherwise TorchRL's Collector runs it.
                          `collector` ("auto", "lean", "torchrl": env.collector) decides

`make_target_env` builds one from a config's `_target_`, a callable that returns a
TorchRL EnvBase (env._target_=my_package.make_env): it hands the callable `num_envs`,
`device`, `seed` and `max_episode_steps` where its signature takes them, batches an
unbatched env in TorchRL's SerialEnv, seeds it, and moves its data to the run's device.

This module is the one place in gpurl that asks a foreign env (or its factory) what it
has: everything else calls the declared hooks.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import DeviceCastTransform, EnvBase, SerialEnv, Transform, TransformedEnv

from gpurl.core.config import MISSING, declare, key
from gpurl.core.registry import register
from gpurl.core.targets import resolve_target
from gpurl.envs.config import COLLECTORS, AnyEnvConfig
from gpurl.envs.hooks import EnvHooks
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads


def first_copy_seed(seed: int) -> int:
    """The seed of a vector env's first copy for a run of `seed`, where the library seeds
    copy i with first + i (Gymnasium's vector reset, envpool): a number drawn from
    `seed` by numpy's SeedSequence (30 bits, so first + i stays a 32-bit int). Handing
    such a library the run's seed itself makes neighbouring seeds share copies (seed
    1's first copy is seed 0's second), and five seeds' ten evaluation copies would
    replay nearly the same start states."""
    return int(np.random.SeedSequence(int(seed)).generate_state(1)[0] >> 2)


def first_episode_returns(rollout: TensorDict) -> torch.Tensor:
    """Sum of rewards up to and including each env's first done, for a rollout [N, T]."""
    done = rollout["next", "done"].reshape(*rollout.shape, -1).any(-1).float()
    alive = (done.cumsum(1) - done) == 0  # True until (and at) the first done
    reward = rollout["next", "reward"].reshape(*rollout.shape, -1).sum(-1)
    return (reward * alive).sum(1)


class ForeignEnv(EnvHooks, TransformedEnv):
    """A TorchRL env with gpurl's hooks; `transform` (optional) sits between them."""

    def __init__(
        self,
        env: EnvBase,
        transform: Transform | None = None,
        max_episode_steps: int = 1000,
        collector: str = "auto",
        frames: Callable[[], torch.Tensor] | None = None,
    ):
        super().__init__(env, transform)
        self.max_episode_steps = int(max_episode_steps)
        self.frames = frames  # the family's renderer of every copy, uint8 [N, H, W, 3]
        self._obs: TensorDictBase | None = None  # the lean path's observation to act on
        self.lean_path = self.choose_collector(collector)

    def choose_collector(self, collector: str) -> bool:
        """Whether gpurl's lean collector runs this env, for env.collector = `collector`."""
        if collector not in COLLECTORS:
            raise ConfigError(
                f"env.collector must be one of {', '.join(COLLECTORS)}, got {collector!r}"
            )
        if collector != "auto":
            return collector == "lean"
        if self.device is None or torch.device(self.device).type == "cpu":
            return True
        return self._probe_host_reads() == 0

    def _probe_host_reads(self) -> int:
        """Host reads of a lean step with a random action, after one to warm up (then
        the envs start afresh)."""
        action = self.full_action_spec[self.action_key]
        self.lean_reset()
        self.lean_step(action.rand())  # warm-up: first calls may allocate and check
        with count_host_reads() as reads:
            self.lean_step(action.rand())
        self._obs = None
        return reads.count

    # -- the lean path -----------------------------------------------------------------------
    def lean_reset(self) -> TensorDictBase:
        """Reset every env; return the observation to act on."""
        self._obs = self.reset()
        return self._obs

    def lean_step(self, action: torch.Tensor) -> tuple[TensorDictBase, TensorDictBase]:
        """Step with `action`, then reset the envs that are done (TorchRL's
        step_and_maybe_reset): (next, obs) as NativeEnv.lean_step returns them, with a
        "truncated" flag of zeros where the env has none. The adapter keeps the
        observation it last returned: the collector's policy writes into that same
        TensorDict. After a resume (a foreign env's state is not saved) it restarts."""
        if self._obs is None:
            self._obs = self.reset()
        td = self._obs.set(self.action_key, action)
        td, self._obs = self.step_and_maybe_reset(td)
        nxt = td.get("next")
        if "truncated" not in nxt.keys():
            nxt.set("truncated", torch.zeros_like(nxt.get("done")))
        return nxt, self._obs

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.validate_actions:  # a Python flag: the check's host read only when asked
            self.check_action(tensordict.get(self.action_key))
        return super()._step(tensordict)

    def render_frames(self) -> torch.Tensor | None:
        """Every copy's current picture, drawn by the foreign env's own renderer (on the
        host: foreign simulators draw there), or None where its family gave none."""
        return None if self.frames is None else self.frames()

    @torch.no_grad()
    def evaluation_protocol(self, policy) -> dict[str, float]:
        """The mean of each env's first greedy episode return, played on the lean path
        (the Gymnasium vector env stepped directly, else TorchRL's step_and_maybe_reset)
        until every env has ended one episode: a host read every 16 steps, where playing
        out max_episode_steps would step a landed LunarLander for hundreds more."""
        n = max(self.batch_size.numel(), 1)  # an unbatched env is one
        obs = self.lean_reset()
        obs.set("is_init", torch.ones((*self.batch_size, 1), dtype=torch.bool, device=self.device))
        ret = torch.zeros(n, device=self.device)
        alive = torch.ones(n, dtype=torch.bool, device=self.device)
        for t in range(self.max_episode_steps):
            nxt, obs = self.lean_step(policy(obs).get(self.action_key))
            done = nxt.get("done").reshape(n, -1).any(-1)
            obs.set("is_init", done.reshape(*self.batch_size, 1))
            ret += nxt.get("reward").reshape(n, -1).sum(-1) * alive
            alive &= ~done
            if t % 16 == 15 and not alive.any():
                break
        self._obs = None  # the next lean step (a collector's) starts from a reset
        return {"return": ret.mean().item()}


def as_gpurl_env(
    env: EnvBase, max_episode_steps: int | None = None, collector: str = "auto"
) -> EnvHooks:
    """`env` itself if it already carries gpurl's hooks, else wrapped in a ForeignEnv.
    The episode cap is `max_episode_steps`, else the env's own attribute of that name
    (Gymnasium's registry value, say), else 1000."""
    if isinstance(env, EnvHooks):
        return env
    steps = max_episode_steps or own_episode_limit(env) or DEFAULT_EPISODE_LIMIT
    return ForeignEnv(env, max_episode_steps=int(steps), collector=collector)


# The evaluation cap of an env that has none of its own and is given no env.max_episode_steps.
DEFAULT_EPISODE_LIMIT = 1000


def own_episode_limit(env) -> int | None:
    """`env`'s own max_episode_steps (a positive int), read without getattr: TorchRL's
    batched and transformed envs, and many wrappers of users' own, forward a name they
    lack through __getattr__, which for an env without one can recurse until
    RecursionError (a thousand-line traceback). Only the instance's and its class's own
    attribute count; a property is called as the class defines it."""
    value = inspect.getattr_static(env, "max_episode_steps", None)
    if isinstance(value, property):
        try:
            value = value.fget(env)
        except Exception:  # a property that fails is no episode limit
            return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


# What make_target_env hands a factory, where its signature takes it.
_RUN_ARGS = ("num_envs", "device", "seed", "max_episode_steps")


@declare
class CustomConfig(AnyEnvConfig):
    """Any env by its factory, without registering it: a callable that returns a TorchRL
    EnvBase (a NativeEnv subclass of your own, or any TorchRL env), e.g.
      python -m gpurl.train env=custom env._target_=my_package.make_env +env.size=5
    gpurl hands the factory num_envs, device, seed and max_episode_steps where its
    signature takes them, and every other key here as a keyword argument; an unbatched
    env is copied num_envs times (TorchRL's SerialEnv). See envs/foreign.py."""

    complete = True

    _target_: str = key(MISSING, "dotted path to the factory")
    name: str = key("custom", "the run directory's label")


@register("env", "custom", CustomConfig)
def make_target_env(
    target,
    options: dict,
    num_envs: int,
    device,
    seed: int,
    max_episode_steps: int | None = None,
    collector: str = "auto",
) -> EnvHooks:
    """The env a `_target_` factory builds, as a gpurl env with `num_envs` envs on `device`:
    a NativeEnv subclass of the user's own as it is, any other EnvBase in a ForeignEnv.

    `options` (the env config's other keys) go to the factory as keyword arguments, and
    so do num_envs, device, seed and max_episode_steps where its signature takes them.
    A factory without `num_envs` that returns one unbatched env is called num_envs times
    inside TorchRL's SerialEnv. A factory without `seed` gets `env.set_seed(seed)`.
    """
    factory = resolve_target(target, "env")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable: hand it options alone
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    run = {"num_envs": int(num_envs), "device": torch.device(device), "seed": int(seed)}
    if max_episode_steps is not None:
        run["max_episode_steps"] = int(max_episode_steps)
    given = {k: v for k, v in run.items() if takes_any or k in params}
    kwargs = {**options, **given}
    build = functools.partial(factory, **kwargs)
    try:
        env = build()
        if not isinstance(env, EnvBase):
            raise ConfigError(
                f"env._target_={target} returned {type(env).__name__}, not a TorchRL EnvBase: "
                f"return one (TorchRL's wrappers turn Gymnasium, DMC, VMAS... envs into one)"
            )
        own_limit = own_episode_limit(env)  # the factory's env's, not a SerialEnv's
        n = int(num_envs)
        unbatched = env.batch_size == torch.Size()
        if "num_envs" not in given and (unbatched or env.batch_size.numel() != n):
            if not unbatched:
                raise ConfigError(
                    f"env._target_={target} built {env.batch_size.numel()} envs and takes no "
                    f"num_envs: set env.num_envs={env.batch_size.numel()}"
                )
            # one env per call: n of them, stepped one after another (one too: the
            # collector and the metrics need a batch dimension)
            env.close()
            env = SerialEnv(n, build)
    except TypeError as err:
        raise ConfigError(f"bad option for env._target_={target}: {err}") from None
    if isinstance(env, ForeignEnv):  # gpurl's hooks on a foreign env (env=envpool, env=dmc)
        if collector != "auto":  # the factory's own ForeignEnv has chosen for auto already
            env.lean_path = env.choose_collector(collector)
        return env
    if isinstance(env, EnvHooks):  # a gpurl env of the user's own (a NativeEnv subclass)
        return env
    if "seed" not in given:
        env.set_seed(int(seed))
    run_device = torch.device(device)
    moved = env.device is not None and torch.device(env.device) != run_device
    cast = DeviceCastTransform(run_device, env.device) if moved else None
    steps = max_episode_steps or own_limit or DEFAULT_EPISODE_LIMIT
    return ForeignEnv(env, cast, max_episode_steps=int(steps), collector=collector)
