"""MinAtar (Young & Tian 2019): five miniature Atari games on a 10 x 10 grid, batched on
the device. One module per game; env.py is the shell registered as `env=minatar`."""

from gpurl.envs.minatar.env import MinAtarConfig, MinAtarEnv

__all__ = ["MinAtarConfig", "MinAtarEnv"]
