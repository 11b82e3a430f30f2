"""Any Gymnasium task through TorchRL's GymWrapper, with `num_envs` copies in one process.

Copies run in a gymnasium SyncVectorEnv (no worker processes: on a few CPU cores the
pipes cost more than classic-control physics) with autoreset disabled, so TorchRL's
partial "_reset" drives resets, as for native envs. Discrete actions are integers
(Categorical), as in gpurl's native envs. These envs step on the CPU; observations
and rewards are moved to `device`.
"""

from __future__ import annotations

import torch
from torchrl.envs import DeviceCastTransform, GymWrapper

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.config import EnvConfig, collector_key
from gpurl.envs.foreign import ForeignEnv
from gpurl.errors import ConfigError


class CPUGymWrapper(GymWrapper):
    """GymWrapper whose reset input is brought to the CPU first: TorchRL 0.14 hands the
    partial-reset mask to numpy() (a CUDA mask fails), and a transform to the device
    does not move "_reset" back."""

    def _reset(self, tensordict=None, **kwargs):
        if tensordict is not None:
            tensordict = tensordict.to("cpu")  # a no-op for a CPU tensordict
        return super()._reset(tensordict, **kwargs)


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
    vector = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id)] * int(num_envs),
        autoreset_mode=gym.vector.AutoresetMode.DISABLED,
    )
    env = CPUGymWrapper(vector, categorical_action_encoding=True, device="cpu")
    env.set_seed(seed)
    # The simulator is on the CPU: the env stays there and, on another device, a
    # transform moves observations and rewards to the device and actions back.
    cast = DeviceCastTransform(device, "cpu") if torch.device(device).type != "cpu" else None
    steps = gym.spec(env_id).max_episode_steps or 1000
    return ForeignEnv(env, cast, max_episode_steps=steps, collector=collector)
