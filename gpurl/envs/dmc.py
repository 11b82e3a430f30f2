"""DeepMind Control Suite tasks from their state, as a batched TorchRL env: `env=dmc`
(docs/envs/dmc.md).

Each copy is TorchRL's DMControlEnv (dm_control's suite.load(domain, task)) with two
transforms: DoubleToFloat (dm_control's float64 observations, rewards and actions as
float32) and CatTensors (the task's observation entries, e.g. walker's orientations,
height and velocity, concatenated into one "observation" vector, in the order the task
lists them). `num_envs` copies step one after another in TorchRL's SerialEnv (MuJoCo
steps a copy in well under a millisecond: worker processes would cost more than they
save on a few cores). The layout:

    observation               float32 [num_envs, d] (cartpole-swingup: d = 5)
    action                    float32 [num_envs, a], bounds -1..1 (every suite task's)
    reward                    float32 [num_envs, 1], in 0..1 per control step (summed
                              over frame_skip steps)
    done / truncated          the suite's time limit: 1000 control steps, so
                              1000 / frame_skip agent steps; terminated never (suite
                              tasks have no terminal states)

Evaluation is ForeignEnv's: each evaluation copy's first episode return, greedy.
Video (python -m gpurl.eval RUN --video, trainer.video_interval) is MuJoCo's picture from
the task's first camera, 240 x 320, drawn headless through EGL: MUJOCO_GL is set to egl
where libEGL is found (a value of your own wins), and to disable elsewhere, where a
video request then stops with one line.
"""

from __future__ import annotations

import ctypes.util
import os

import numpy as np
import torch
from torchrl.envs import (
    CatTensors,
    Compose,
    DeviceCastTransform,
    DoubleToFloat,
    SerialEnv,
    TransformedEnv,
)

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.config import ForeignEnvConfig
from gpurl.envs.foreign import ForeignEnv
from gpurl.errors import ConfigError

MISSING = "env=dmc needs dm_control and mujoco<4: pip install -e '.[dmc]'"
EPISODE_CONTROL_STEPS = 1000  # every suite task's time limit, in control steps


def import_suite():
    """dm_control's suite, or a one-line ConfigError naming the install."""
    # headless rendering for video where the machine has EGL; training renders nothing
    os.environ.setdefault("MUJOCO_GL", "egl" if ctypes.util.find_library("EGL") else "disable")
    try:
        import mujoco
        from dm_control import suite
    except ImportError:
        raise ConfigError(MISSING) from None
    # dm_control 1.0.50 reads MjModel fields MuJoCo 4 removed (flex_vertedge)
    if int(mujoco.__version__.split(".")[0]) >= 4:
        raise ConfigError(
            f"env=dmc: dm_control does not run on mujoco {mujoco.__version__}: "
            f"pip install 'mujoco>=3.17,<4' (the dmc extra pins it)"
        )
    return suite


FRAME = (240, 320)  # dm_control's default picture size


def dmc_task(domain: str, task: str, frame_skip: int = 1, tasks: list | None = None):
    """One copy of a suite task, its observation entries in one float32 vector; the
    suite env is appended to `tasks`, for its renderer."""
    from torchrl.envs.libs.dm_control import DMControlWrapper

    suite_env = import_suite().load(domain, task)
    if tasks is not None:
        tasks.append(suite_env)
    env = DMControlWrapper(suite_env, frame_skip=int(frame_skip))
    keys = list(env.observation_spec.keys())
    return TransformedEnv(
        env,
        Compose(DoubleToFloat(), CatTensors(keys, out_key="observation", del_keys=True)),
    )


@declare
class DMCConfig(ForeignEnvConfig):
    """DeepMind Control Suite tasks from their state (gpurl/envs/dmc.py, docs/envs/dmc.md), e.g.
      python -m gpurl.train env=dmc env.domain=walker env.task=stand agent=sac
    Needs the dmc extra: pip install -e '.[dmc]' (dm_control, with mujoco<4)."""

    obs = "vector"

    _target_: str = key("gpurl.envs.dmc.make_dmc_env", "the factory (gpurl/envs/dmc.py)")
    name: str = key("dmc", "the run directory's label")
    domain: str = key(
        "cartpole", "a suite domain (dm_control.suite.ALL_TASKS lists domain, task pairs)"
    )
    task: str = key("swingup", "a task of the domain")
    num_envs: int = key(1, "copies stepped one after another (TorchRL's SerialEnv)", ge=1)
    eval_envs: int = key(5, "evaluation copies: each plays one greedy episode", ge=1)
    frame_skip: int = key(
        1,
        "control steps per action (rewards summed); episodes last 1000 / frame_skip actions",
        ge=1,
    )
    max_episode_steps: int | None = key(
        None, "evaluation's cap on an episode; null: the task's own (1000 / frame_skip)", ge=1
    )


@register("env", "dmc", DMCConfig)
def make_dmc_env(
    domain: str = "cartpole",
    task: str = "swingup",
    num_envs: int = 1,
    device="cpu",
    seed: int = 0,
    frame_skip: int = 1,
    max_episode_steps: int | None = None,
) -> ForeignEnv:
    """The `_target_` of configs/env/dmc.yaml: `num_envs` copies of a suite task (SerialEnv,
    on the CPU), each copy seeded from the last by TorchRL's seed generator (a hash, so
    neighbouring run seeds share no copy); observations moved to `device`."""
    suite = import_suite()
    if (domain, task) not in suite.ALL_TASKS:
        tasks = ", ".join(f"{d}-{t}" for d, t in suite.BENCHMARKING[:6])
        raise ConfigError(
            f"env.domain={domain} env.task={task} is not a DeepMind Control task: "
            f"e.g. {tasks} (dm_control.suite.ALL_TASKS lists them)"
        )
    n, skip = int(num_envs), int(frame_skip)
    if n < 1 or skip < 1:
        raise ConfigError(f"env.num_envs and env.frame_skip must be >= 1, got {n} and {skip}")
    tasks = []  # the copies' suite envs, made when SerialEnv starts them
    env = SerialEnv(n, lambda: dmc_task(domain, task, skip, tasks))
    env.set_seed(int(seed))
    cast = DeviceCastTransform(device, "cpu") if torch.device(device).type != "cpu" else None
    steps = int(max_episode_steps or -(-EPISODE_CONTROL_STEPS // skip))
    return ForeignEnv(env, cast, max_episode_steps=steps, frames=render_tasks(tasks, n))


def render_tasks(tasks: list, n: int):
    """The renderer of n DMC copies: each suite env's picture from its first camera.
    The copies are the last n suite envs made (SerialEnv first makes one to read the
    specs, and makes them again when it restarts)."""

    def frames() -> torch.Tensor:
        try:
            drawn = [t.physics.render(*FRAME, camera_id=0) for t in tasks[-n:]]
        except Exception as err:  # no OpenGL backend: MuJoCo says which
            raise ConfigError(
                f"env=dmc cannot draw its frames (MUJOCO_GL={os.environ.get('MUJOCO_GL')}): "
                f"{str(err).splitlines()[0]}; set MUJOCO_GL=egl or osmesa"
            ) from None
        return torch.from_numpy(np.stack(drawn))

    return frames
