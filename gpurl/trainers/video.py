"""Video of a greedy episode: frames an env draws from its state (EnvHooks.render_frames;
a foreign env's own renderer: Gymnasium's rgb_array, DMC's camera, VMAS's view),
written by a maintained encoder (imageio with ffmpeg for MP4, Pillow for GIF; the
`video` extra: pip install -e '.[video]')."""

from __future__ import annotations

from pathlib import Path

import torch
from torchrl.envs.utils import step_mdp

from gpurl.envs import make_eval_env
from gpurl.errors import ConfigError
from gpurl.trainers.evaluation import greedy_mode, start_evaluation

FPS = 30


def video_env(env_cfg, device, seed: int):
    """The env a video episode plays in: one evaluation copy, on the evaluation's seed (a
    foreign env draws every copy it has, so the video's env has one)."""
    return make_eval_env({**env_cfg, "eval_envs": 1}, device=device, seed=int(seed))


def record_episode(env, policy, max_steps: int, name: str = "this env") -> torch.Tensor:
    """The frames [T + 1, H, W, 3] (uint8, on the CPU) of the first env copy's first
    greedy episode: the start and each state reached, up to its end or `max_steps`
    steps. Recording reads each step's done flag on the host: it is not the hot path."""
    td = env.reset()
    first = env.render_frames()
    if first is None:
        raise ConfigError(
            f"env={name} draws no frames, so it has no video: record a native env (cartpole, "
            f"pendulum, pixels, packing, marinenav, minatar), gym, dmc or vmas, or drop the "
            f"video option"
        )
    frames = [first.reshape(-1, *first.shape[-3:])[0].cpu()]
    start_evaluation(policy)  # a recurrent policy's greedy state starts from zeros
    with greedy_mode():
        for _ in range(int(max_steps)):
            td = env.step(policy(td))
            drawn = env.render_frames()
            frames.append(drawn.reshape(-1, *drawn.shape[-3:])[0].cpu())
            if bool(td.get(("next", "done")).reshape(-1)[0]):
                break
            td = step_mdp(td)
    return torch.stack(frames)


def write_video(frames: torch.Tensor, path: str | Path, fps: int = FPS) -> Path:
    """Frames [T, H, W, 3] uint8 as an MP4 (H.264) or, for a .gif path, a GIF."""
    try:
        import imageio.v3 as iio
    except ImportError:
        raise ConfigError("video needs imageio: pip install -e '.[video]'") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = frames.numpy()
    if path.suffix == ".gif":
        iio.imwrite(path, array, extension=".gif", duration=1000 / fps, loop=0)
    else:
        iio.imwrite(path, array, extension=".mp4", fps=fps, codec="libx264", macro_block_size=1)
    return path
