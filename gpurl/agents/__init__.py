"""Agents by name. Each builds its policy, losses and optimisers from the env's specs."""

from __future__ import annotations

from torchrl.data import Composite

from gpurl.agents.base import Agent
from gpurl.agents.ddpg import DDPGAgent
from gpurl.agents.dqn import DQNAgent
from gpurl.agents.sac import SACAgent
from gpurl.agents.td3 import TD3Agent
from gpurl.errors import ConfigError

AGENTS: dict[str, type[Agent]] = {
    "dqn": DQNAgent,
    "ddpg": DDPGAgent,
    "td3": TD3Agent,
    "sac": SACAgent,
}


def make_agent(agent_cfg, observation_spec, action_spec, device, random_frames: int = 0) -> Agent:
    name = agent_cfg["name"]
    if name not in AGENTS:
        raise ConfigError(f"unknown agent '{name}': choose one of {', '.join(sorted(AGENTS))}")
    if isinstance(action_spec, Composite) and "agents" in action_spec.keys():
        # one shared policy over a robots dimension: IQN, AC-IQN and Rainbow, not built yet
        raise ConfigError(
            f"agent={name} acts for one agent per env, and this env's actions are a "
            f"multi-robot ('agents', 'action') group: no multi-robot agent exists yet; drive "
            f"the env from Python (gpurl.envs.marinenav, tools/eval_marinenav.py) meanwhile"
        )
    return AGENTS[name](agent_cfg, observation_spec, action_spec, device, random_frames)
