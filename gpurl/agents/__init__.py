"""Agents by name, or by `_target_`. Each agent registers itself by name with its config
keys, from its own module (gpurl/core/registry.py), and builds its policy, losses and
optimisers from an EnvInfo. `agent._target_=my_package.MyAgent` names an OffPolicyAgent
or OnPolicyAgent subclass of one's own (it may subclass a gpurl agent: `agent=ppo
+agent._target_=my_package.MyPPO` keeps PPO's keys); the config's keys are its cfg."""

from __future__ import annotations

from torchrl.data import MultiCategorical

from gpurl.agents.base import Agent, OffPolicyAgent, OnPolicyAgent
from gpurl.core import registry
from gpurl.core.compile import EAGER, CompileSpec
from gpurl.core.progress import Progress
from gpurl.core.targets import TARGET, resolve_target
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError

__all__ = ["Agent", "OffPolicyAgent", "OnPolicyAgent", "agent_class", "make_agent"]


def make_agent(
    agent_cfg,
    info: EnvInfo,
    progress: Progress,
    random_frames: int = 0,
    compile: CompileSpec = EAGER,
) -> Agent:
    """The agent an agent config names, built for `info`. `random_frames` (the trainer's
    init_random_frames) reaches off-policy agents' exploration; on-policy agents have
    no random warm-up."""
    cls = agent_class(agent_cfg)
    name = agent_cfg["name"]
    if isinstance(info.action_spec, MultiCategorical) and not cls.multi_part_actions:
        raise ConfigError(
            f"agent={name} cannot act in this env: its action is a multi-part discrete "
            f"choice (packing's item, orientation and corner), which the hierarchical "
            f"agent fits: use agent=hrl_dqn (e.g. experiment=packing_hrl_cpu)"
        )
    if issubclass(cls, OffPolicyAgent):
        return cls(agent_cfg, info, progress, random_frames=random_frames, compile=compile)
    return cls(agent_cfg, info, progress, compile=compile)


def agent_class(agent_cfg) -> type[Agent]:
    """The class an agent config names: its `_target_`, else its registered `name`."""
    from omegaconf import DictConfig, OmegaConf

    if TARGET in agent_cfg.keys():  # keys(): a DictConfig leaves "???" out of `in`
        if isinstance(agent_cfg, DictConfig) and OmegaConf.is_missing(agent_cfg, TARGET):
            raise ConfigError(
                "agent=custom needs the agent's class: add agent._target_=my_package.MyAgent "
                "(an OffPolicyAgent or OnPolicyAgent subclass)"
            )
        target = agent_cfg[TARGET]
        cls = resolve_target(target, "agent")
        if not (isinstance(cls, type) and issubclass(cls, OffPolicyAgent | OnPolicyAgent)):
            raise ConfigError(
                f"agent._target_={target} is not an OffPolicyAgent or OnPolicyAgent subclass "
                f"(gpurl.agents): subclass one of them"
            )
        return cls
    found = registry.get("agent", agent_cfg["name"], "agent.name")
    if not (
        isinstance(found.target, type) and issubclass(found.target, OffPolicyAgent | OnPolicyAgent)
    ):
        raise ConfigError(
            f"agent={found.name} ({found.package}: {found.module}) is not an OffPolicyAgent or "
            f"OnPolicyAgent subclass: register the agent class"
        )
    return found.target
