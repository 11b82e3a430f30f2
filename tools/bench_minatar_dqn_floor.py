"""The MinAtar paper's DQN as gpurl trains it (N seeds in one process) beside its floor:
the same updates in a bare PyTorch loop. One JSON record.

    python tools/bench_minatar_dqn_floor.py                   # breakout, 5 seeds, 1 thread
    python tools/bench_minatar_dqn_floor.py --game seaquest --seeds 1 --rounds 5

Sides, timed in interleaved rounds on one thread:

  gpurl  trainer.iteration() of `minatar_<game>_dqn` with trainer.num_seeds=N after
         its random frames: one env step and one update of 32 per seed
  bare   per seed, in plain PyTorch: one acting forward, then the update the preset
         makes (one 16-filter 3 x 3 convolution, 128 hidden units, the Q head; Huber
         loss against a target network, Adam's fused kernel) on random inputs: no env,
         no replay, no config; the floor of the same arithmetic done seed by seed

The record gives ms per iteration of each side, their ratio and what 5M frames a seed
cost at that pace (`hours_5m_frames`).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.train import build, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

FRAMES = 5_000_000  # the paper's budget per seed


def bare_iteration(channels: int, actions: int, seeds: int, batch: int, lr: float):
    """One iteration of `seeds` bare DQNs: act on one observation, update on a batch."""
    steps = []
    for _ in range(seeds):
        q = nn.Sequential(
            nn.Conv2d(channels, 16, 3), nn.ReLU(), nn.Flatten(),
            nn.Linear(16 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, actions),
        )  # fmt: skip
        target = copy.deepcopy(q).requires_grad_(False)
        opt = torch.optim.Adam(q.parameters(), lr=lr, fused=True)
        obs = (torch.rand(batch, channels, 10, 10) < 0.1).float()
        next_obs = (torch.rand(batch, channels, 10, 10) < 0.1).float()
        one = obs[:1]
        action = torch.randint(actions, (batch,))
        reward, discount = torch.rand(batch), torch.full((batch,), 0.99)
        steps.append((q, target, opt, obs, next_obs, one, action, reward, discount))

    def iteration():
        for q, target, opt, obs, next_obs, one, action, reward, discount in steps:
            with torch.no_grad():
                q(one).argmax(-1)  # acting
                y = reward + discount * target(next_obs).amax(-1)
            taken = q(obs).gather(-1, action[:, None]).squeeze(-1)
            loss = F.smooth_l1_loss(taken, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return iteration


def timed(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", default="breakout")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=300, help="per side per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "overrides", nargs="*", help="more Hydra overrides for gpurl's side, e.g. compile.env=true"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    overrides = [
        f"experiment=minatar_{args.game}_dqn",
        f"trainer.num_seeds={args.seeds}",
        "trainer.init_random_frames=200",
        f"threads={args.threads}",
        "logger=none",
        "trainer.progress=false",
        *args.overrides,
    ]
    cfg = load_config(overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = build(cfg, run_dir)
    while trainer.progress.update_count < 50:  # past the random frames, updating
        trainer.iteration()
    info = trainer.info
    (entry,) = info.obs_keys
    channels = info.obs_shapes[entry][-1]
    bare = bare_iteration(channels, info.n_actions, args.seeds, 32, float(cfg.agent.lr))
    bare()
    gpurl_ms, bare_ms = [], []
    for _ in range(args.rounds):
        gpurl_ms.append(timed(trainer.iteration, args.iterations) * 1e3)
        bare_ms.append(timed(bare, args.iterations) * 1e3)
    g, b = statistics.median(gpurl_ms), statistics.median(bare_ms)
    emit(
        {
            "tool": "bench_minatar_dqn_floor",
            "game": args.game,
            "seeds": args.seeds,
            "overrides": list(args.overrides),
            "iterations": args.iterations,
            "rounds": args.rounds,
            "gpurl_ms_per_iteration": round(g, 3),
            "bare_ms_per_iteration": round(b, 3),
            "gpurl_over_bare": round(g / b, 3),
            "hours_5m_frames": {
                "gpurl": round(g * FRAMES / 3.6e6, 2),
                "bare": round(b * FRAMES / 3.6e6, 2),
            },
            "rounds_ms": {
                "gpurl": [round(x, 3) for x in gpurl_ms],
                "bare": [round(x, 3) for x in bare_ms],
            },
            "commit": gpurl_commit(),
            **environment_record(torch.device("cpu")),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
