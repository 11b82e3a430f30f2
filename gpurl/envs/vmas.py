"""VMAS scenarios (vectorized multi-agent simulator, pure torch) as gpurl multi-robot envs.

`make_vmas_env` builds TorchRL's VmasEnv with every agent in one group, "agents", and
adds what gpurl's multi-robot path reads and VMAS does not give (GroupFlags):

    ("agents", "observation")  [B, R, d]   each agent's observation (VMAS's own)
    ("agents", "action")       [B, R] int (continuous_actions=false) or [B, R, a] float
    ("agents", "reward")       [B, R, 1]   each agent's reward (VMAS's own)
    "reward"                   [B, 1]      the agents' sum, as MarineNav's root reward:
                                           the episode tracker and evaluation read it
    "terminated"               [B, 1]      the scenario's done (navigation: every agent
                                           on its goal)
    "truncated"                [B, 1]      the episode reached max_episode_steps
    "done"                     [B, 1]      terminated or truncated
    ("agents", "terminated"/"truncated"/"done")  [B, R, 1]  the root flags, broadcast:
                                           the replay cuts every agent's stream there

VMAS's own `max_steps` is not used: it ends an episode as terminated, and a learner
would then treat a time limit as a terminal state. GroupFlags counts steps itself and
sets "truncated" instead, so the replay bootstraps through it.

The factory returns it as a ForeignEnv (envs/foreign.py) whose frames are VMAS's own
picture of each env (video: python -m gpurl.eval RUN --video, trainer.video_interval),
and env.collector picks the collector (auto: gpurl's lean collector through the
adapter on the CPU). vmas is an optional extra:
`pip install -e '.[vmas]'`.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import Transform, TransformedEnv

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.config import ForeignEnvConfig
from gpurl.envs.foreign import ForeignEnv
from gpurl.errors import ConfigError

GROUP = "agents"
FLAGS = ("terminated", "truncated", "done")


class GroupFlags(Transform):
    """The root reward (the group's sum), a step limit that sets "truncated", and the
    root done flags broadcast over the group, for an env whose group carries rewards but
    no done flags of its own (VMAS)."""

    def __init__(self, max_steps: int, group: str = GROUP):
        super().__init__(in_keys=[], out_keys=[])
        self.max_steps = int(max_steps)
        self.group = group
        self.steps: torch.Tensor | None = None  # steps since each env's reset, [B]

    def _flags(self, td: TensorDictBase, terminated: torch.Tensor, truncated: torch.Tensor):
        members = td.get(self.group).batch_size[-1]  # the group's tensordict is [B, R]
        done = terminated | truncated
        for name, flag in zip(FLAGS, (terminated, truncated, done), strict=True):
            td.set(name, flag)
            group_shape = (*flag.shape[:-1], members, 1)
            td.set((self.group, name), flag.unsqueeze(-2).expand(group_shape).clone())
        return td

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        batch = tensordict_reset.batch_size
        if self.steps is None or self.steps.shape != batch:
            self.steps = torch.zeros(batch, dtype=torch.long, device=tensordict_reset.device)
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            self.steps.zero_()
        else:
            self.steps.masked_fill_(reset.reshape(batch), 0)
        terminated = tensordict_reset.get("terminated")
        return self._flags(tensordict_reset, terminated, torch.zeros_like(terminated))

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        reward = next_tensordict.get((self.group, "reward"))  # [B, R, 1]
        next_tensordict.set("reward", reward.sum(-2))
        self.steps += 1
        terminated = next_tensordict.get("terminated")
        truncated = (self.steps >= self.max_steps).reshape(terminated.shape) & ~terminated
        return self._flags(next_tensordict, terminated, truncated)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        group = reward_spec[self.group, "reward"]
        batch = reward_spec.shape
        reward_spec["reward"] = Unbounded((*batch, 1), device=group.device)
        return reward_spec

    def transform_done_spec(self, done_spec: Composite) -> Composite:
        batch = done_spec.shape
        members = self.parent.full_action_spec[self.group, "action"].shape[len(batch)]
        device = done_spec.device
        for name in FLAGS:
            done_spec[name] = Categorical(2, (*batch, 1), dtype=torch.bool, device=device)
        done_spec[self.group] = Composite(
            {
                name: Categorical(2, (*batch, members, 1), dtype=torch.bool, device=device)
                for name in FLAGS
            },
            shape=(*batch, members),
            device=device,
        )
        return done_spec


@declare
class VMASConfig(ForeignEnvConfig):
    """A VMAS scenario (vectorized multi-agent simulator, pure torch, on the run's device):
    every agent is one robot of gpurl's multi-robot agents (docs/envs/vmas.md). Needs the
    vmas extra: pip install -e '.[vmas]'. Scenario options go in as env.<option>, e.g.
      python -m gpurl.train env=vmas env.scenario=navigation +env.n_agents=3 agent=sac"""

    open = True  # the scenario's own options (n_agents, shared_rew, ...)
    obs = "vector"

    _target_: str = key("gpurl.envs.vmas.make_vmas_env", "the factory (gpurl/envs/vmas.py)")
    name: str = key("vmas", "the run directory's label")
    num_envs: int = key(32, "VMAS envs stepped as one batch", ge=1)
    eval_envs: int = key(32, "evaluation copies (seed + 10,000), one greedy episode each", ge=1)
    scenario: str = key(
        "navigation", "any VMAS scenario whose agents share one observation and action shape"
    )
    max_episode_steps: int = key(
        100, "episodes end truncated here (the replay bootstraps through it)", ge=1
    )
    continuous_actions: bool = key(
        True, "false: VMAS's discrete actions (navigation: 9 moves) for DQN-like agents"
    )


@register("env", "vmas", VMASConfig)
def make_vmas_env(
    scenario: str = "navigation",
    num_envs: int = 32,
    device="cpu",
    seed: int = 0,
    max_episode_steps: int = 100,
    continuous_actions: bool = True,
    **scenario_kwargs,
) -> ForeignEnv:
    """A VMAS scenario with `num_envs` envs on `device`, every agent in the group
    "agents"; `scenario_kwargs` go to the scenario (navigation: n_agents,
    shared_rew, collisions, ...)."""
    try:
        import vmas  # noqa: F401
        from torchrl.envs.libs.vmas import VmasWrapper
        from torchrl.envs.utils import MarlGroupMapType
    except ImportError as err:
        raise ConfigError(f"env=vmas needs vmas ({err}): pip install -e '.[vmas]'") from None
    if int(max_episode_steps) < 1:
        raise ConfigError(f"env.max_episode_steps must be >= 1, got {max_episode_steps}")
    try:
        with warnings.catch_warnings():
            # VMAS only warns of an option its scenario does not take: make it an error
            warnings.filterwarnings("error", message="Scenario kwargs")
            simulator = vmas.make_env(
                scenario,
                num_envs=int(num_envs),
                device=torch.device(device),
                continuous_actions=bool(continuous_actions),
                max_steps=None,  # GroupFlags truncates: VMAS would call the limit terminal
                seed=int(seed),
                wrapper=None,
                **scenario_kwargs,
            )
            env = VmasWrapper(simulator, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP)
    except (UserWarning, AssertionError, ValueError, TypeError, KeyError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        reason = reason.split(" This will turn into an error")[0]  # VMAS's kwargs warning
        raise ConfigError(f"env=vmas scenario={scenario}: {reason}") from None
    if env.het_specs:
        raise ConfigError(
            f"VMAS scenario {scenario} gives its agents different observation or action "
            f"shapes: gpurl's multi-robot agents need one shape for the whole group"
        )
    env = TransformedEnv(env, GroupFlags(max_episode_steps))
    return ForeignEnv(env, max_episode_steps=int(max_episode_steps), frames=render_envs(simulator))


def render_envs(simulator):
    """The renderer of a VMAS simulator: its picture of each env, uint8 [B, H, W, 3]."""

    def frames() -> torch.Tensor:
        drawn = [simulator.render(mode="rgb_array", env_index=i) for i in range(simulator.num_envs)]
        return torch.from_numpy(np.stack(drawn))

    return frames
