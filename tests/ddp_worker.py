"""Gradient equivalence under torchrun (tests/test_distributed.py): every rank updates an
agent on its half of one fixed minibatch; the parameters after the updates must equal
those of one process updating on the whole minibatch.

    python -m torch.distributed.run --nproc-per-node 2 tests/ddp_worker.py OUT.pt OVERRIDES...
"""

from __future__ import annotations

import sys

import torch

from gpurl.agents import make_agent
from gpurl.core import distributed
from gpurl.core.progress import Progress
from gpurl.envs import make_env
from gpurl.envs.info import env_info
from gpurl.train import load_config
from gpurl.trainers.collector import make_collector
from gpurl.trainers.replay import DeviceReplay

BATCH, UPDATES = 64, 3
CPU = torch.device("cpu")


def fixed_minibatch(overrides: list[str]):
    """The same BATCH transitions in every process: random acting from seed 0, then one
    seeded draw from the replay."""
    cfg = load_config(overrides)
    torch.manual_seed(0)
    env = make_env(cfg.env, device=CPU, seed=0)
    info = env_info(env)
    progress = Progress(CPU)
    agent = make_agent(cfg.agent, info, progress, random_frames=10**9)  # uniform random acting
    replay = DeviceReplay(agent.replay_spec(), info, agent.policy.in_keys, 1000, BATCH, CPU)
    collector = make_collector(env, agent.policy, info, env.num_envs, progress)
    for _ in range(400 // env.num_envs):
        replay.extend(collector.rollout())
    torch.manual_seed(1)
    return replay.sample(progress).clone()


def fixed_sequences(overrides: list[str]):
    """A recurrent on-policy agent's minibatch of BATCH whole sequences [L, BATCH], the
    same in every process: a rollout of random acting from seed 0 with random targets."""
    cfg = load_config([*overrides, f"env.num_envs={BATCH}", "trainer.rollout_steps=8"])
    torch.manual_seed(0)
    env = make_env(cfg.env, device=CPU, seed=0)
    info = env_info(env)
    progress = Progress(CPU)
    agent = make_agent(cfg.agent, info, progress)
    rollout = make_collector(env, agent.policy, info, 8 * BATCH, progress).rollout()
    keys = [*agent.policy.in_keys, *agent.policy.out_keys]
    batch = rollout.select(*keys).clone()
    batch.set("done", rollout.get(("next", "done")).reshape(batch.shape).float())
    batch.set("advantage", torch.randn(batch.shape))
    batch.set("value_target", torch.randn(batch.shape))
    return batch


def updated_parameters(overrides: list[str], part: slice = slice(None)) -> dict:
    """An agent built from seed 2, after UPDATES updates on `part` of the fixed minibatch
    (of its sequences, for a recurrent on-policy agent)."""
    if "agent=ppo" in overrides:
        batch = fixed_sequences(overrides)[:, part]
    else:
        batch = fixed_minibatch(overrides)[part]
    cfg = load_config(overrides)
    env = make_env(cfg.env, device=CPU, seed=0)
    progress = Progress(CPU)
    torch.manual_seed(2)
    agent = make_agent(cfg.agent, env_info(env), progress)
    distributed.broadcast_modules(agent.modules().values())
    for _ in range(UPDATES):
        agent.update(batch, progress)
        progress.add_update()
    return {
        f"{name}.{k}": v.detach().clone()
        for name, module in agent.modules().items()
        for k, v in module.state_dict().items()
    }


if __name__ == "__main__":
    out, overrides = sys.argv[1], sys.argv[2:]
    distributed.setup(CPU)
    rank, world = distributed.rank(), distributed.world_size()
    share = BATCH // world
    params = updated_parameters(overrides, slice(rank * share, (rank + 1) * share))
    if rank == 0:
        torch.save(params, out)
    distributed.shutdown()
