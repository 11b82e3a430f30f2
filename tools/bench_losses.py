"""gpurl's agent updates against TorchRL's loss modules: time per update and host reads.

For each algorithm, the same networks (2 x hidden MLPs) and batch are trained with
(a) gpurl's agent.update and (b) the matching TorchRL LossModule (DQNLoss, DDPGLoss,
TD3Loss, SACLoss) + fused Adam + SoftUpdate. The sides alternate, best round kept.
One JSON record per algorithm: ms per update for each side, their ratio, and host
reads per update (gpurl.utils.host_reads) for each side.

    python tools/bench_losses.py [--batch 256] [--hidden 256] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchrl.data import Bounded, Categorical  # noqa: E402
from torchrl.modules import MLP, ProbabilisticActor, QValueActor, TanhNormal, ValueOperator  # noqa: E402
from torchrl.objectives import DDPGLoss, DQNLoss, SACLoss, SoftUpdate, TD3Loss  # noqa: E402

from gpurl.agents import make_agent  # noqa: E402
from gpurl.train import load_config  # noqa: E402
from gpurl.utils.host_reads import count_host_reads  # noqa: E402
from tools.common import emit, environment_record  # noqa: E402

# gpurl's DQN trains on CartPole (4 features, 2 actions), the others on Pendulum (3
# features, torque in [-2, 2]; TorchRL's actors act in [-1, 1], so their batch is scaled).
OBS_DIM = {"dqn": 4, "ddpg": 3, "td3": 3, "sac": 3}


def batch(n, obs_dim, action, device):
    return TensorDict(
        {
            "observation": torch.randn(n, obs_dim),
            "action": action,
            ("next", "observation"): torch.randn(n, obs_dim),
            ("next", "reward"): torch.randn(n, 1),
            ("next", "done"): torch.zeros(n, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(n, 1, dtype=torch.bool),
        },
        [n],
        device=device,
    )


def torchrl_update(name, hidden, device):
    cells = [hidden, hidden]
    OBS = OBS_DIM[name]
    spec = Bounded(-1.0, 1.0, (1,), device=device)
    qv = ValueOperator(
        MLP(in_features=OBS + 1, out_features=1, num_cells=cells), ["observation", "action"]
    )
    if name == "dqn":
        net = MLP(in_features=OBS, out_features=2, num_cells=cells)
        loss = DQNLoss(
            QValueActor(net, in_keys=["observation"], spec=Categorical(2)),
            action_space="categorical",
            delay_value=True,
            double_dqn=True,
        )
    elif name == "sac":
        actor_net = nn.Sequential(
            MLP(in_features=OBS, out_features=2, num_cells=cells), NormalParamExtractor()
        )
        actor = ProbabilisticActor(
            TensorDictModule(actor_net, ["observation"], ["loc", "scale"]),
            in_keys=["loc", "scale"],
            spec=spec,
            distribution_class=TanhNormal,
            return_log_prob=True,
        )
        loss = SACLoss(actor, qv, num_qvalue_nets=2, action_spec=spec)
    else:
        det = TensorDictModule(
            nn.Sequential(MLP(in_features=OBS, out_features=1, num_cells=cells), nn.Tanh()),
            ["observation"],
            ["action"],
        )
        loss = TD3Loss(det, qv, action_spec=spec) if name == "td3" else DDPGLoss(det, qv)
    loss = loss.to(device)
    opt = torch.optim.Adam(loss.parameters(), lr=1e-4, fused=True)
    target = SoftUpdate(loss, tau=0.005)

    def update(td):
        out = loss(td)
        total = sum(v for k, v in out.items() if k.startswith("loss"))
        opt.zero_grad()
        total.backward()
        opt.step()
        target.step()

    return update


def gpurl_update(name, hidden, device):
    env = "cartpole" if name == "dqn" else "pendulum"
    cfg = load_config([f"env={env}", f"agent={name}", f"agent.hidden=[{hidden},{hidden}]"])
    from gpurl.envs import make_env

    e = make_env(cfg.env, device=device)
    agent = make_agent(cfg.agent, e.observation_spec, e.action_spec, device)
    return agent.update


def time_side(update, td, iters, device):
    for _ in range(3):
        update(td)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        update(td)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--agents", nargs="+", default=["dqn", "ddpg", "td3", "sac"])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for name in args.agents:
        n = args.batch
        if name == "dqn":
            td = theirs_td = batch(n, OBS_DIM[name], torch.randint(0, 2, (n,)), args.device)
        else:
            unit = torch.rand(n, 1) * 2 - 1
            td = batch(n, OBS_DIM[name], unit * 2, args.device)
            theirs_td = td.clone().set("action", unit.to(args.device))
        ours = gpurl_update(name, args.hidden, args.device)
        theirs = torchrl_update(name, args.hidden, args.device)
        best_ours = best_theirs = float("inf")
        for _ in range(args.repeats):
            best_ours = min(best_ours, time_side(ours, td, args.iters, args.device))
            best_theirs = min(best_theirs, time_side(theirs, theirs_td, args.iters, args.device))
        with count_host_reads() as r_ours:
            ours(td)
        with count_host_reads() as r_theirs:
            theirs(theirs_td)
        emit(
            {
                "tool": "bench_losses",
                "agent": name,
                "batch": args.batch,
                "hidden": [args.hidden, args.hidden],
                "gpurl_ms_per_update": round(best_ours * 1e3, 3),
                "torchrl_ms_per_update": round(best_theirs * 1e3, 3),
                "torchrl_over_gpurl": round(best_theirs / best_ours, 2),
                "gpurl_host_reads_per_update": r_ours.count,
                "torchrl_host_reads_per_update": r_theirs.count,
                "torchrl_host_read_sites": sorted(r_theirs.sites),
                **environment_record(args.device),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
