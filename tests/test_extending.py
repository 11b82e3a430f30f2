"""docs/extending.md's checklists, followed once: a new env and a new agent, each one
module (here, this file), one config (written to a config directory Hydra searches)
and one registration line, trained together through gpurl.train's build.

The env is a corridor: positions 0..length, starting at 0; action 1 steps right, 0
left; reaching the end pays 1 and ends the episode. The agent is REINFORCE (Williams
1992): the policy gradient of each action's discounted return, an OnPolicyAgent whose
targets are those returns. Greedy from scratch the policy goes left (ties pick action
0) and never arrives; trained, it walks right.
"""

from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Unbounded

from gpurl.agents import AGENTS
from gpurl.agents.base import OnPolicyAgent, clip_and_step
from gpurl.core.compile import EAGER
from gpurl.envs import NATIVE_ENVS
from gpurl.envs.base import NativeEnv, StepResult
from gpurl.errors import ConfigError
from gpurl.policies import CategoricalActor, PolicyWrapper, make_encoder
from gpurl.train import build, load_config

# -- the env's module -------------------------------------------------------------------


class CorridorState(NamedTuple):
    position: torch.Tensor  # int64 [B]
    steps: torch.Tensor  # int64 [B]


class CorridorEnv(NativeEnv):
    max_episode_steps = 12

    def __init__(self, num_envs: int = 1, device="cpu", seed: int = 0, length: int = 4):
        super().__init__(num_envs, device, seed)
        self.length = int(length)
        b = self.batch_size
        self._set_specs(
            {"observation": Unbounded(shape=(*b, self.length + 1), device=self.device)},
            Categorical(2, shape=b, device=self.device),
        )
        zeros = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.env_state = CorridorState(zeros, zeros.clone())

    def _reset_where(self, mask):
        state = self.env_state
        self.env_state = CorridorState(
            torch.where(mask, 0, state.position), torch.where(mask, 0, state.steps)
        )

    def _advance(self, action) -> StepResult:
        move = torch.where(action.reshape(self.batch_size) == 1, 1, -1)
        position = (self.env_state.position + move).clamp(0, self.length)
        steps = self.env_state.steps + 1
        self.env_state = CorridorState(position, steps)
        terminated = position == self.length
        truncated = (steps >= self.max_episode_steps) & ~terminated
        reward = terminated.float()
        return StepResult(reward[:, None], terminated[:, None], truncated[:, None])

    def _observation(self):
        one_hot = torch.nn.functional.one_hot(self.env_state.position, self.length + 1)
        return {"observation": one_hot.float()}


# -- the agent's module -----------------------------------------------------------------


class ReinforceAgent(OnPolicyAgent):
    name = "reinforce"

    def __init__(self, cfg, info, progress, compile=EAGER):
        super().__init__(cfg, info, progress, compile)
        self.actor = CategoricalActor(make_encoder(info), info.n_actions, list(cfg.hidden))
        torch.nn.init.zeros_(self.actor.net[-1].weight)  # equal logits: greedy picks 0
        torch.nn.init.zeros_(self.actor.net[-1].bias)
        self.actor.to(info.device)
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=self.lr)
        self.policy = PolicyWrapper(self.actor, info, progress, write_log_prob=True)
        self.learn_step = self.compiled(self.learn)

    def modules(self):
        return {"actor": self.actor}

    def optimizers(self):
        return {"optimizer": self.optimizer}

    @torch.no_grad()
    def compute_targets(self, rollout: TensorDict, last_obs) -> TensorDict:
        """Each step's discounted return to its episode's end inside the rollout."""
        nxt = rollout.get("next")
        reward, done = nxt.get("reward").squeeze(-1), nxt.get("done").squeeze(-1)
        out = self.target_buffers(reward, "return")
        ret = out.get("return").copy_(reward)
        keep = (~done).float() * self.gamma
        for t in range(ret.shape[0] - 2, -1, -1):
            ret[t].addcmul_(keep[t], ret[t + 1])
        return out

    def learn(self, batch: TensorDict) -> TensorDict:
        log_prob, _ = self.actor.evaluate(batch, batch.get("action"))
        loss = -(log_prob * batch.get("return")).mean()
        clip_and_step(self.optimizer, self.actor.parameters(), loss, None)
        return TensorDict(loss=loss.detach())


# -- the two configs ----------------------------------------------------------------------

ENV_CONFIG = """\
name: corridor
num_envs: 16
eval_envs: 2
length: 4
"""

AGENT_CONFIG = """\
name: reinforce
hidden: []
lr: 0.1
anneal_lr: false
gamma: 0.9
epochs: 1
minibatches: 1
bootstrap_truncated: false
"""


def test_a_new_env_and_agent_take_a_module_a_config_and_a_line_each(tmp_path, monkeypatch):
    configs = tmp_path / "configs"
    (configs / "env").mkdir(parents=True)
    (configs / "agent").mkdir()
    (configs / "env" / "corridor.yaml").write_text(ENV_CONFIG)
    (configs / "agent" / "reinforce.yaml").write_text(AGENT_CONFIG)
    # the registration lines (gpurl/envs/__init__.py, gpurl/agents/__init__.py)
    monkeypatch.setitem(NATIVE_ENVS, "corridor", CorridorEnv)
    monkeypatch.setitem(AGENTS, "reinforce", ReinforceAgent)

    cfg = load_config(
        [
            f"hydra.searchpath=[file://{Path(configs).as_posix()}]",
            "env=corridor",
            "agent=reinforce",
            "trainer.rollout_steps=12",
            "trainer.total_frames=3840",  # 20 rollouts of 12 x 16
            "trainer.eval_interval=3840",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path / "run")
    assert isinstance(trainer.env, CorridorEnv) and isinstance(trainer.agent, ReinforceAgent)
    assert trainer.evaluate() == 0.0  # greedy from scratch: left, never arrives
    summary = trainer.train()
    assert summary["eval_return"] == 1.0  # greedy after training: right, to the end
    assert summary["frames"] == 3840


def test_the_same_env_and_agent_by_target_need_no_registration(tmp_path):
    """`_target_` names the classes directly: no registration line, no config file."""
    cfg = load_config(
        [
            "env=custom",
            f"env._target_={__name__}.CorridorEnv",
            "+env.length=4",
            "env.num_envs=16",
            "env.eval_envs=2",
            "agent=custom",
            f"agent._target_={__name__}.ReinforceAgent",
            *[f"+agent.{line.replace(': ', '=')}" for line in AGENT_CONFIG.splitlines()[1:]],
            "trainer.rollout_steps=12",
            "trainer.total_frames=3840",
            "trainer.eval_interval=3840",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    assert "corridor" not in NATIVE_ENVS and "reinforce" not in AGENTS
    trainer = build(cfg, tmp_path / "run")
    assert isinstance(trainer.env, CorridorEnv) and isinstance(trainer.agent, ReinforceAgent)
    assert trainer.train()["eval_return"] == 1.0


class TinyEncoder(torch.nn.Module):
    """An encoder of one's own: the observation through one linear layer."""

    def __init__(self, info, width: int = 8):
        super().__init__()
        (key,) = info.obs_keys
        self.key, self.out_features = key, width
        self.linear = torch.nn.Linear(info.obs_shapes[key][-1], width)

    def forward(self, td):
        return torch.relu(self.linear(td.get(self.key)))


def not_a_module(info):
    return "features"


def no_width(info):
    return torch.nn.Identity()


def test_an_encoder_by_target_is_handed_the_spec(tmp_path):
    overrides = ["env=cartpole", "env.eval_envs=1", "agent=dqn", "agent.hidden=[16]"]
    overrides += ["logger=none", "trainer.batch_size=8", "trainer.init_random_frames=16"]
    target = [f"+agent.encoder._target_={__name__}.TinyEncoder", "+agent.encoder.width=6"]
    trainer = build(load_config([*overrides, *target]), tmp_path / "ok")
    assert isinstance(trainer.agent.q.encoder, TinyEncoder)
    assert trainer.agent.q.encoder.out_features == 6  # its own keys reach it...
    for _ in range(4):  # ...and the agent's other encoder keys (embed...) do not
        trainer.iteration()
    assert trainer.progress.update_count > 0
    for name, message in (("not_a_module", "not an nn.Module"), ("no_width", "out_features")):
        cfg = load_config([*overrides, f"+agent.encoder._target_={__name__}.{name}"])
        with pytest.raises(ConfigError, match=message) as err:
            build(cfg, tmp_path / name)
        assert "\n" not in str(err.value)


def test_an_agent_target_must_be_an_agent_class(tmp_path):
    cfg = load_config(["agent=custom", f"agent._target_={__name__}.TinyEncoder", "logger=none"])
    with pytest.raises(ConfigError, match="not an OffPolicyAgent or OnPolicyAgent") as err:
        build(cfg, tmp_path)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="agent._target_="):
        build(load_config(["agent=custom", "logger=none"]), tmp_path / "missing")
