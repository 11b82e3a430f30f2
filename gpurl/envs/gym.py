"""Any Gymnasium task through TorchRL's GymWrapper, with `num_envs` copies in one process.

Copies run in a gymnasium SyncVectorEnv (no worker processes: on a few CPU cores the
pipes cost more than classic-control physics) with autoreset disabled, so TorchRL's
partial "_reset" drives resets, as for native envs. Discrete actions are integers
(Categorical), as in gpurl's native envs. These envs step on the CPU; observations
and rewards are moved to `device`.

On the CPU, gpurl's lean collector steps the vector env itself (LeanGymEnv): the action
tensor's numpy view in, the step's arrays copied into tensors allocated once, the envs
that ended reset through the vector env's reset mask. TorchRL's step, its spec checks
and its TensorDict building cost about ten times Acrobot's own physics per step; the
TorchRL face (env.collector=torchrl) is the wrapper's, unchanged.

The copies are made without a render mode and draw once asked (render_frames: video):
some tasks do more work per step while any mode is set (LunarLander adds a Box2D body
for every flame particle its engines throw, a decoration that the physics then steps).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical
from torchrl.envs import DeviceCastTransform, GymWrapper

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.config import EnvConfig, collector_key
from gpurl.envs.foreign import ForeignEnv, first_copy_seed
from gpurl.errors import ConfigError


class CPUGymWrapper(GymWrapper):
    """GymWrapper whose reset input is brought to the CPU first: TorchRL 0.14 hands the
    partial-reset mask to numpy() (a CUDA mask fails), and a transform to the device
    does not move "_reset" back."""

    def _reset(self, tensordict=None, **kwargs):
        if tensordict is not None:
            tensordict = tensordict.to("cpu")  # a no-op for a CPU tensordict
        return super()._reset(tensordict, **kwargs)


class LeanGymEnv(ForeignEnv):
    """A Gymnasium vector env whose lean path skips TorchRL: see the module docstring.
    It takes this path for a Box observation and a Discrete or Box action on the CPU,
    and ForeignEnv's otherwise."""

    def __init__(
        self, wrapper: GymWrapper, vector, cast, max_episode_steps, collector, render_mode=None
    ):
        frames = drawn_when_asked(vector, render_mode) if render_mode == "rgb_array" else None
        super().__init__(wrapper, cast, max_episode_steps, collector, frames)
        self.vector = vector
        obs_spec = self.full_observation_spec
        action_spec = self.full_action_spec[self.action_key]
        self.direct = (
            cast is None
            and list(obs_spec.keys()) == ["observation"]
            and isinstance(action_spec, Bounded | Categorical)
        )
        if self.direct:
            b = self.batch_size
            zeros = {
                "observation": obs_spec["observation"].zero(),
                "reward": self.full_reward_spec["reward"].zero(),
                **{k: torch.zeros((*b, 1), dtype=torch.bool) for k in _FLAGS},
            }
            self._next = TensorDict(zeros, batch_size=b)
            # two observations, used in turn: the collector reads the one it acted on
            # after the step that fills the other
            self._pair = [
                TensorDict({"observation": obs_spec["observation"].zero()}, batch_size=b)
                for _ in range(2)
            ]
            # numpy views of those tensors (shared memory): a step's arrays go in by
            # np.copyto, several times cheaper than a torch copy_ on a few numbers each
            nxt = self._next
            self._next_views = [nxt.get(k).numpy() for k in ("observation", "reward", *_FLAGS)]
            self._pair_views = [td.get("observation").numpy() for td in self._pair]
            self._turn = 0

    def lean_reset(self) -> TensorDictBase:
        self._obs = super().lean_reset()  # TorchRL's reset: seeded as the wrapper is
        if not self.direct:
            return self._obs
        self._turn = 0
        first = self._pair[0]
        first.get("observation").copy_(self._obs.get("observation"))
        self._obs = first
        return first

    def lean_step(self, action: torch.Tensor) -> tuple[TensorDictBase, TensorDictBase]:
        if not self.direct:
            return super().lean_step(action)
        if self._obs is None:  # after a resume: the envs start afresh
            self.lean_reset()
        if self.validate_actions:
            self.check_action(action)
        obs, reward, terminated, truncated, _ = self.vector.step(action.numpy())
        done = terminated | truncated
        next_obs, next_reward, *flags = self._next_views
        np.copyto(next_obs, obs)
        np.copyto(next_reward[:, 0], reward)
        for view, flag in zip(flags, (terminated, truncated, done), strict=True):
            np.copyto(view[:, 0], flag)
        self._turn ^= 1
        after = self._pair[self._turn]
        if done.any():  # host numpy flags: no device is read
            obs, _ = self.vector.reset(options={"reset_mask": done})
        np.copyto(self._pair_views[self._turn], obs)
        self._obs = after
        nxt = self._next
        return nxt, after


_FLAGS = ("terminated", "truncated", "done")


def drawn_when_asked(vector, mode: str):
    """render_copies(vector), the copies' render mode set to `mode` at the first call:
    they were made without one (the module docstring says why)."""
    frames = None

    def draw() -> torch.Tensor:
        nonlocal frames
        if frames is None:
            for copy in vector.envs:
                copy.unwrapped.render_mode = mode
            vector.render_mode = mode
            frames = render_copies(vector)
        return frames()

    return draw


def render_copies(vector):
    """The renderer of a vector env made with render_mode="rgb_array": every copy's
    picture as Gymnasium draws it, uint8 [N, H, W, 3] on the host."""

    # pygame greets on import, and SDL looks for a display and a sound card at init:
    # rgb_array frames need neither
    for name, value in (
        ("PYGAME_HIDE_SUPPORT_PROMPT", "1"),
        ("SDL_VIDEODRIVER", "dummy"),
        ("SDL_AUDIODRIVER", "dummy"),
    ):
        os.environ.setdefault(name, value)

    def frames() -> torch.Tensor:
        import gymnasium as gym

        try:
            return torch.from_numpy(np.stack(vector.render()))
        except gym.error.DependencyNotInstalled as err:  # pygame for classic control
            raise ConfigError(f"env=gym cannot draw its frames: {err}") from None

    return frames


def rendering(gym, env_id: str) -> str | None:
    """ "rgb_array" where the task draws pictures of itself (its metadata lists the
    mode), else None: the mode the copies draw in once asked (drawn_when_asked)."""
    probe = gym.make(env_id)
    modes = probe.metadata.get("render_modes", [])
    probe.close()
    return "rgb_array" if "rgb_array" in modes else None


@declare(name="gym", num_envs=1, eval_envs=10)
class GymConfig(EnvConfig):
    """Any Gymnasium task through TorchRL's GymWrapper: env=gym env.id=Acrobot-v1"""

    id: str = key("CartPole-v1", "the Gymnasium env id")
    collector: str = collector_key()


@register("env", "gym", GymConfig)
def make_gym_env(
    id: str = "CartPole-v1",
    num_envs: int = 1,
    device="cpu",
    seed: int = 0,
    collector: str = "auto",
) -> ForeignEnv:
    """`num_envs` copies of the Gymnasium task `id` (a registered Gymnasium id)."""
    env_id = id
    try:
        import gymnasium as gym
    except ImportError as err:
        raise ConfigError("env=gym needs gymnasium: pip install -e '.[gym]'") from err
    if int(num_envs) < 1:
        raise ConfigError(f"num_envs must be >= 1, got {num_envs}: set env.num_envs=1 or more")
    try:
        gym.spec(env_id)
    except gym.error.Error as err:
        raise ConfigError(
            f"unknown Gymnasium env id '{env_id}' ({err}): pass a registered id, "
            "e.g. env.id=Acrobot-v1"
        ) from err
    mode = rendering(gym, env_id)
    vector = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id)] * int(num_envs),  # no render mode until one is drawn
        autoreset_mode=gym.vector.AutoresetMode.DISABLED,
    )
    env = CPUGymWrapper(vector, categorical_action_encoding=True, device="cpu")
    env.set_seed(seed)
    # copy i starts from first + i: a first copy drawn from the seed, so that no two
    # runs' copies share a seed (foreign.first_copy_seed)
    first = first_copy_seed(seed)
    vector.reset(seed=[first + i for i in range(int(num_envs))])
    # The simulator is on the CPU: the env stays there and, on another device, a
    # transform moves observations and rewards to the device and actions back.
    cast = DeviceCastTransform(device, "cpu") if torch.device(device).type != "cpu" else None
    steps = gym.spec(env_id).max_episode_steps or 1000
    return LeanGymEnv(env, vector, cast, steps, collector, render_mode=mode)
