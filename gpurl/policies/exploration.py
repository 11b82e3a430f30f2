"""Exploration, composed around a policy's action.

Noise levels follow schedules (core/schedules.py) of the progress record's frame
counter, so evaluating them never leaves the device. Each exploration module is
`forward(action, td, frames) -> action`, acting on the batch in one pass:

- EpsilonGreedy: with probability epsilon(frames) per env (or per robot), a uniform
  random action: over the legal actions of a discrete space (action mask), over the
  box [-1, 1]^d of a continuous one; epsilon is 1 before `random_frames` (warm-up).
- GaussianNoise: a + sigma(frames) N(0, 1) in the normalised box.
- OUNoise: a + sigma(frames) x, with x an Ornstein-Uhlenbeck process per env (and
  robot), reset to 0 where an episode ends; its state is a buffer, so it is saved in
  checkpoints.
"""

from __future__ import annotations

import torch
from torch import nn

from gpurl.core.runs import ONE_RUN, Runs
from gpurl.core.schedules import LinearSchedule
from gpurl.errors import ConfigError


def uniform_legal_action(mask: torch.Tensor) -> torch.Tensor:
    """An action drawn uniformly among the True entries of mask [..., n], without syncs.

    Uniform noise is zeroed on illegal actions and the argmax taken: every legal action
    is equally likely to hold the largest draw. An all-False row yields action 0.
    """
    return (torch.rand(mask.shape, device=mask.device) * mask).argmax(-1)


def ou_step(state: torch.Tensor, theta: float, sigma: float, dt: float = 1e-2) -> torch.Tensor:
    """One Ornstein-Uhlenbeck step toward 0: dx = -theta x dt + sigma sqrt(dt) N(0, 1)."""
    return state - theta * state * dt + sigma * dt**0.5 * torch.randn_like(state)


class Exploration(nn.Module):
    """What PolicyWrapper composes around an action while exploring, with its defaults:
    `forward(action, td, frames, mask) -> action` on the whole batch; stateful modules
    (OU noise) are told where episodes end; epsilon-greedy reports its epsilon."""

    #: keeps state across steps that must restart with an episode (episode_end)
    stateful: bool = False

    def episode_end(self, done: torch.Tensor) -> None:
        """Restart the state of the envs (or robots) where done [*env batch] is True."""

    def epsilon(self, frames: torch.Tensor) -> torch.Tensor | None:
        """The exploration rate at `frames` (a device scalar), for logging; None if none."""
        return None


class EpsilonGreedy(Exploration):
    def __init__(
        self,
        epsilon: LinearSchedule,
        n_actions: int | None = None,
        random_frames=0,
        runs: Runs = ONE_RUN,
    ):
        super().__init__()
        self.schedule = epsilon
        self.runs = runs  # N runs: a schedule per run, spread over each run's envs
        self.n_actions = n_actions  # None: a continuous action in [-1, 1]^d
        self.random_frames = int(random_frames)

    def epsilon(self, frames: torch.Tensor) -> torch.Tensor:
        return torch.where(frames < self.random_frames, 1.0, self.schedule(frames))

    def forward(self, action, td, frames, mask=None):
        if self.n_actions is None:
            coin = torch.rand(action.shape[:-1] + (1,), device=action.device)
            coin = coin < self.runs.per_row(self.epsilon(frames), coin)
            return torch.where(coin, torch.rand_like(action) * 2 - 1, action)
        if mask is None:
            random = torch.randint(self.n_actions, action.shape, device=action.device)
        else:
            random = uniform_legal_action(mask)
        coin = torch.rand(action.shape, device=action.device)
        coin = coin < self.runs.per_row(self.epsilon(frames), coin)
        return torch.where(coin, random, action)


class GaussianNoise(Exploration):
    def __init__(self, sigma: LinearSchedule):
        super().__init__()
        self.sigma = sigma

    def forward(self, action, td, frames, mask=None):
        return action + self.sigma(frames) * torch.randn_like(action)


class OUNoise(Exploration):
    """Ornstein-Uhlenbeck noise with one process per action slot of the training env."""

    stateful = True

    def __init__(self, sigma: LinearSchedule, shape, theta: float = 0.15, device="cpu"):
        super().__init__()
        self.sigma, self.theta = sigma, float(theta)
        self.register_buffer("state", torch.zeros(tuple(shape), device=device))

    def forward(self, action, td, frames, mask=None):
        if action.shape != self.state.shape:
            raise ConfigError(
                f"OU noise was sized for actions {tuple(self.state.shape)}, got "
                f"{tuple(action.shape)}: OU exploration runs on the training env only"
            )
        self.state.copy_(ou_step(self.state, self.theta, 1.0))
        return action + self.sigma(frames) * self.state

    def episode_end(self, done: torch.Tensor) -> None:
        """Restart the process where done [*env batch] is True."""
        keep = (~done).reshape(done.shape + (1,) * (self.state.dim() - done.dim()))
        self.state.mul_(keep)


def make_exploration(cfg, info, random_frames: int = 0, runs: Runs = ONE_RUN) -> list[Exploration]:
    """The exploration an agent config asks for, for the env's action space.

    Keys read (all optional): epsilon_start / epsilon_end / epsilon_frames (epsilon
    greedy; discrete agents default to 1 -> 0.05 over 10k frames, continuous ones to 0),
    noise (none | gaussian | ou), noise_start / noise_end / noise_frames, ou_theta.
    With N runs, epsilon_start and epsilon_end may be per run (trainer.per_seed).
    """
    cfg = dict(cfg)
    explore: list[Exploration] = []
    if not info.discrete:
        noise = cfg.get("noise", "none")
        sigma = LinearSchedule(
            cfg.get("noise_start", 0.1), cfg.get("noise_end", 0.1), cfg.get("noise_frames", 0)
        )
        if noise == "gaussian":
            explore.append(GaussianNoise(sigma))
        elif noise == "ou":
            shape = (*info.slot_shape, info.action_dim)
            explore.append(OUNoise(sigma, shape, cfg.get("ou_theta", 0.15), info.device))
        elif noise not in ("none", None):
            raise ConfigError(f"unknown exploration noise '{noise}': use none, gaussian or ou")
    default = (1.0, 0.05, 10000) if info.discrete else (0.0, 0.0, 0)
    epsilon = LinearSchedule(
        runs.value("epsilon_start", cfg.get("epsilon_start", default[0]), info.device),
        runs.value("epsilon_end", cfg.get("epsilon_end", default[1]), info.device),
        cfg.get("epsilon_frames", default[2]),
    )
    n = info.n_actions if info.discrete else None
    explore.append(EpsilonGreedy(epsilon, n, random_frames, runs))
    return explore
