"""gpurl's TD3 update against Stable-Baselines3's (the `peers` extra), from the same
weights, batch and target-noise draws: after a critic-only update and then a critic,
actor and targets update (policy delay 2), every parameter of both agents agrees. What
tools/bench_peers.py's TD3 comparisons rest on: the same algorithm on both sides."""

import pytest
import torch
from tensordict import TensorDict

sb3 = pytest.importorskip("stable_baselines3")

from gpurl.agents import make_agent  # noqa: E402
from gpurl.core.progress import Progress  # noqa: E402
from gpurl.envs import make_env  # noqa: E402
from gpurl.envs.info import env_info  # noqa: E402
from gpurl.train import load_config  # noqa: E402

B, HIDDEN, GAMMA = 64, [32, 32], 0.99


def _linears(*modules) -> list[torch.nn.Linear]:
    return [m for module in modules for m in module.modules() if isinstance(m, torch.nn.Linear)]


def _copy(src: list[torch.nn.Linear], dst: list[torch.nn.Linear]) -> None:
    assert [tuple(s.weight.shape) for s in src] == [tuple(d.weight.shape) for d in dst]
    with torch.no_grad():
        for s, d in zip(src, dst, strict=True):
            d.weight.copy_(s.weight)
            d.bias.copy_(s.bias)


def _pairs(agent, model):
    """gpurl's and SB3's Linear layers, in the same order, per network."""
    return {
        "actor": (_linears(agent.actor), _linears(model.actor)),
        "actor_target": (_linears(agent.actor_target), _linears(model.actor_target)),
        "critic": (_linears(agent.critic), _linears(model.critic)),
        "critic_target": (_linears(agent.critic_target), _linears(model.critic_target)),
    }


def test_td3_update_is_sb3s_step_for_step():
    import gymnasium as gym
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    cfg = load_config(
        ["agent=td3", "env=pendulum", f"agent.hidden=[{HIDDEN[0]},{HIDDEN[1]}]",
         "agent.actor_lr=1e-3", "agent.critic_lr=1e-3", f"agent.gamma={GAMMA}"]
    )  # fmt: skip
    info = env_info(make_env(cfg.env, num_envs=2))
    progress = Progress("cpu")
    agent = make_agent(cfg.agent, info, progress)
    model = sb3.TD3(
        "MlpPolicy", gym.make("Pendulum-v1"), learning_rate=1e-3, batch_size=B,
        gamma=GAMMA, tau=0.005, policy_delay=2, target_policy_noise=0.2,
        target_noise_clip=0.5, policy_kwargs={"net_arch": HIDDEN}, device="cpu", seed=0,
    )  # fmt: skip
    model.set_logger(configure(None, []))
    for src, dst in _pairs(agent, model).values():
        _copy(src, dst)

    g = torch.Generator().manual_seed(1)
    obs, next_obs = torch.randn(B, 3, generator=g), torch.randn(B, 3, generator=g)
    action = torch.rand(B, 1, generator=g) * 2 - 1  # SB3 stores actions scaled to [-1, 1]
    reward = torch.randn(B, generator=g)
    done = (torch.rand(B, generator=g) < 0.1).float()
    samples = ReplayBufferSamples(obs, action, next_obs, done[:, None], reward[:, None])
    model.replay_buffer.sample = lambda batch_size, env=None: samples
    batch = TensorDict(
        {
            "observation": obs,
            "action": action * 2.0,  # Pendulum's torque box is [-2, 2]: gpurl stores it so
            "reward": reward,
            "discount": GAMMA * (1 - done),
            "next": TensorDict({"observation": next_obs}, batch_size=[B]),
        },
        batch_size=[B],
    )
    actor0 = _linears(agent.actor)[0].weight.detach().clone()
    for step in range(2):  # the first updates the critics only, the second all
        torch.manual_seed(100 + step)  # the target noise: one draw of [B, 1] on each side
        agent.update(batch, progress)
        progress.add_update()
        torch.manual_seed(100 + step)
        model.train(gradient_steps=1, batch_size=B)
        for name, (ours, theirs) in _pairs(agent, model).items():
            for a, b in zip(ours, theirs, strict=True):
                for p, q in ((a.weight, b.weight), (a.bias, b.bias)):
                    assert torch.allclose(p, q, atol=1e-6, rtol=1e-5), (step, name)
        # the actor moves at the second update only (the delay), on both sides alike
        moved = not torch.equal(_linears(agent.actor)[0].weight, actor0)
        assert moved == (step == 1)
