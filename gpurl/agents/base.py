"""What every agent shares: checking the action space, optimisers, target networks, state.

An agent is built from (cfg, EnvInfo, Progress): it owns its networks, target
networks, optimisers and a PolicyWrapper for acting, and declares what it needs from
the trainer:

    on_policy        which trainer fits (trainer=off_policy or trainer=on_policy)
    replay_spec()    off-policy: n-step, gamma, prioritized replay (trainers/replay.py)
    update(batch, progress) -> TensorDict of device scalars (losses and the like); for
                     prioritized replay also a "priority" entry [batch] the trainer
                     hands back to the buffer

The trainer accumulates the metrics and reads them once per log interval.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import Bounded

from gpurl.core.distributed import average_gradients
from gpurl.core.private import foreach_copy_, foreach_lerp_
from gpurl.core.progress import Progress
from gpurl.core.replay import ReplaySpec
from gpurl.envs.info import EnvInfo, describe_action
from gpurl.errors import ConfigError


def require_discrete(info: EnvInfo, agent: str, fits: str) -> int:
    if not info.discrete:
        raise ConfigError(
            f"agent={agent} needs a discrete action space but this env's actions are "
            f"{describe_action(info)}: use agent={fits}"
        )
    return info.n_actions


def require_continuous(info: EnvInfo, agent: str, fits: str) -> int:
    spec = info.action_spec
    if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
        raise ConfigError(
            f"agent={agent} needs a continuous (bounded) action space but this env's actions "
            f"are {describe_action(info)}: use agent={fits}"
        )
    return info.action_dim


def make_optimizer(params: Iterable[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    # fused Adam keeps its step counters as device tensors: no .item() per step (the
    # default foreach Adam reads them on the host) and about 3x faster on small CPU nets.
    return torch.optim.Adam(params, lr=lr, fused=True)


def target_copy(net: nn.Module) -> nn.Module:
    return copy.deepcopy(net).requires_grad_(False)


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """target <- target + tau (online - target), one fused lerp over all parameters."""
    foreach_lerp_(target.parameters(), online.parameters(), tau)


@torch.no_grad()
def hard_update(target: nn.Module, online: nn.Module) -> None:
    foreach_copy_(target.parameters(), online.parameters())


def clip_and_step(optimizer: torch.optim.Optimizer, params, loss, max_norm: float | None):
    """Backward, average over torchrun's ranks, clip, step; outside autocast (compile.amp
    autocasts the forward passes only: gradients and optimizer state stay fp32).

    Every agent steps its optimizers here, so this is where data-parallel training
    averages gradients (core/distributed.py; nothing happens with one process)."""
    params = list(params)
    with torch.autocast(loss.device.type, enabled=False):
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(params)
        if max_norm:
            torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        optimizer.step()


def replay_spec_from(cfg) -> ReplaySpec:
    """The replay an off-policy agent config asks for (agent.n_step, agent.prioritized...)."""
    return ReplaySpec(
        n_step=int(cfg.get("n_step", 1)),
        gamma=float(cfg.gamma),
        prioritized=bool(cfg.get("prioritized", False)),
        alpha=float(cfg.get("priority_alpha", 0.6)),
        beta_start=float(cfg.get("priority_beta_start", 0.4)),
        beta_end=float(cfg.get("priority_beta_end", 1.0)),
        beta_frames=int(cfg.get("priority_beta_frames", 0)),
        sampler=str(cfg.get("priority_sampler", "auto")),
    )


class Agent:
    """Holds named modules and optimisers so checkpoints need no per-agent code."""

    name: str
    policy: nn.Module
    on_policy: bool = False
    # The methods holding each gradient step, tensors in and tensors out with no Python
    # state touched: what compile.update / compile.cudagraphs / compile.amp wrap.
    compiled_steps: tuple[str, ...] = ()

    def __init__(self, cfg, info: EnvInfo, progress: Progress):
        self.cfg, self.info, self.progress = cfg, info, progress
        self.updates = 0

    def replay_spec(self) -> ReplaySpec:
        return replay_spec_from(self.cfg)

    def modules(self) -> Mapping[str, nn.Module]:
        return {k: v for k, v in vars(self).items() if isinstance(v, nn.Module) and k[0] != "_"}

    def optimizers(self) -> Mapping[str, torch.optim.Optimizer]:
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.optim.Optimizer)}

    def state_dict(self) -> dict:
        return {
            "modules": {k: m.state_dict() for k, m in self.modules().items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
            "updates": self.updates,
        }

    def load_state_dict(self, state: Mapping) -> None:
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items():
            o.load_state_dict(state["optimizers"][k])
        self.updates = state["updates"]

    def update(self, batch: TensorDict, progress: Progress) -> TensorDict:
        raise NotImplementedError

    def count_update(self) -> bool:
        """Count one update; True when a hard target copy is due (agent.target_update
        hard, every agent.target_update_interval updates)."""
        self.updates += 1
        cfg = self.cfg
        return (
            cfg.get("target_update") == "hard"
            and self.updates % int(cfg.target_update_interval) == 0
        )


class AnnealedLRAgent(Agent):
    """An on-policy agent with one optimizer whose learning rate can anneal linearly to 0
    over the run (agent.anneal_lr; PPO, A2C, PQN). The lr is a device tensor, so the
    schedule is a closed-form function of the frame counter with no host read. The
    subclass builds its optimizer with `self.lr` and does its gradient step in `learn`."""

    def __init__(self, cfg, info: EnvInfo, progress: Progress):
        super().__init__(cfg, info, progress)
        self.lr = torch.tensor(float(cfg.lr), device=info.device)
        self.anneal_frames = 0

    def set_horizon(self, total_frames: int) -> None:
        """Called by the on-policy trainer with trainer.total_frames."""
        self.anneal_frames = int(total_frames) if self.cfg.anneal_lr else 0

    def update(self, batch: TensorDict, progress: Progress | None = None) -> TensorDict:
        progress = progress if progress is not None else self.progress
        if self.anneal_frames:
            frac = 1.0 - progress.frames.double() / self.anneal_frames
            self.lr.copy_(frac.clamp(min=0.0) * float(self.cfg.lr))
        metrics = self.learn(batch)
        self.updates += 1
        return metrics

    def learn(self, batch: TensorDict) -> TensorDict:
        raise NotImplementedError
