"""PolicyWrapper: one batched module that turns observations into env actions.

It wraps a Q-network (discrete action specs) or an actor (continuous, bounded specs)
and adds exploration, all on the device:
- discrete: greedy argmax under an optional action mask; epsilon-greedy with a coin
  per env and random actions uniform over the legal ones;
- continuous: the actor's action in [-1, 1]^d, plus Gaussian or Ornstein-Uhlenbeck
  noise for deterministic actors or a sample for stochastic ones, an optional
  epsilon-uniform action, then mapped to the bounds held as buffers;
- before `random_frames` frames every action is uniform random (warm-up).
Epsilon and noise scales are closed-form schedules of a step counter kept in a device
buffer, advanced by the batch size at every exploring call.

Exploration follows TorchRL's global exploration type rather than train()/eval():
inside `set_exploration_type(ExplorationType.DETERMINISTIC)` (evaluation) the action
is greedy; under RANDOM, or outside any context, the policy explores.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.data import Bounded, Categorical, OneHot
from torchrl.envs.utils import ExplorationType, exploration_type

from gpurl.errors import ConfigError
from gpurl.policies.exploration import LinearSchedule, ou_step, uniform_legal_action


def exploring() -> bool:
    return exploration_type() in (None, ExplorationType.RANDOM)


class PolicyWrapper(TensorDictModuleBase):
    def __init__(
        self,
        network: nn.Module,
        action_spec,
        obs_key="observation",
        action_key="action",
        mask_key=None,
        epsilon: LinearSchedule | None = None,
        noise: str = "none",
        noise_scale: LinearSchedule | None = None,
        ou_theta: float = 0.15,
        random_frames: int = 0,
    ):
        super().__init__()
        self.network = network
        self.obs_key, self.action_key, self.mask_key = obs_key, action_key, mask_key
        self.in_keys = [obs_key] + ([mask_key] if mask_key else [])
        self.out_keys = [action_key]
        self.discrete = isinstance(action_spec, Categorical | OneHot)
        if isinstance(action_spec, OneHot):
            raise ConfigError("one-hot action specs are not supported: use integer (Categorical)")
        if not self.discrete and not isinstance(action_spec, Bounded):
            raise ConfigError(f"unsupported action spec {type(action_spec).__name__}")
        if self.discrete:
            self.n_actions = int(action_spec.space.n)
        else:
            low = action_spec.space.low.reshape(-1)[: action_spec.shape[-1]]
            high = action_spec.space.high.reshape(-1)[: action_spec.shape[-1]]
            self.register_buffer("low", low.clone().float())
            self.register_buffer("high", high.clone().float())
            self.action_dim = int(action_spec.shape[-1])
        if noise not in ("none", "gaussian", "ou"):
            raise ConfigError(f"unknown exploration noise '{noise}': use none, gaussian or ou")
        self.epsilon = epsilon or LinearSchedule(0.0, 0.0, 0)
        self.noise = noise
        self.noise_scale = noise_scale or LinearSchedule(0.1, 0.1, 0)
        self.ou_theta = ou_theta
        self.random_frames = int(random_frames)
        self.register_buffer("step", torch.zeros((), dtype=torch.int64, device=self.device_hint()))
        self.register_buffer("ou_state", torch.zeros(0), persistent=False)

    def device_hint(self):
        p = next(self.network.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    # -- action scaling -----------------------------------------------------------------
    def scale(self, action: torch.Tensor) -> torch.Tensor:
        """[-1, 1]^d -> env bounds."""
        return self.low + (action + 1) * 0.5 * (self.high - self.low)

    def unscale(self, action: torch.Tensor) -> torch.Tensor:
        """env bounds -> [-1, 1]^d (what critics consume)."""
        return (action - self.low) / (self.high - self.low) * 2 - 1

    # -- acting ---------------------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        mask = tensordict.get(self.mask_key) if self.mask_key else None
        tensordict.set(self.action_key, self.act(tensordict.get(self.obs_key), mask))
        return tensordict

    @torch.no_grad()
    def act(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The env action for a batch of observations: the tensor path under forward()."""
        explore = exploring()
        if self.discrete:
            return self._discrete(obs, mask, explore)
        return self.scale(self._continuous(obs, explore))

    def _epsilon(self) -> torch.Tensor:
        eps = self.epsilon(self.step)
        return torch.where(self.step < self.random_frames, 1.0, eps)

    def _discrete(self, obs, mask, explore):
        q = self.network(obs)
        if mask is not None:
            q = q.masked_fill(~mask, float("-inf"))
        greedy = q.argmax(-1)
        if not explore:
            return greedy
        if mask is None:
            random = torch.randint(self.n_actions, greedy.shape, device=q.device)
        else:
            random = uniform_legal_action(mask)
        coin = torch.rand(greedy.shape, device=q.device) < self._epsilon()
        self.step.add_(greedy.numel())
        return torch.where(coin, random, greedy)

    def _continuous(self, obs, explore):
        if not explore:
            return self.network(obs)
        if getattr(self.network, "stochastic", False):
            action, _ = self.network.sample(obs)
        else:
            action = self.network(obs)
            if self.noise == "gaussian":
                action = action + self.noise_scale(self.step) * torch.randn_like(action)
            elif self.noise == "ou":
                if self.ou_state.shape != action.shape:
                    self.ou_state = torch.zeros_like(action)
                self.ou_state = ou_step(self.ou_state, self.ou_theta, 1.0)
                action = action + self.noise_scale(self.step) * self.ou_state
        batch = action.shape[:-1].numel()
        coin = torch.rand(action.shape[:-1] + (1,), device=action.device) < self._epsilon()
        uniform = torch.rand_like(action) * 2 - 1
        self.step.add_(batch)
        return torch.where(coin, uniform, action).clamp(-1.0, 1.0)
