"""End-to-end training frames/s of on-policy presets (the pixel presets by default),
against the floor the env and the network alone allow.

    python tools/bench_train.py                                  # ppo, pqn; 1,024 and 4,096 envs
    python tools/bench_train.py --agents ppo pqn a2c --num-envs 1024 4096 16384 \\
        --modes eager compile cudagraphs --device cuda --max-mem-delta 0
    python tools/bench_train.py --agents ppo --set agent.shared_encoder=true
    python tools/bench_train.py --presets vmas_navigation_ippo --num-envs 32 \\
        --rollout-steps 100 --modes eager --rounds 2      # any on-policy preset

For each agent (its preset, experiment=pixels_AGENT: the preset's networks, epochs and
minibatches; or each of --presets, any on-policy preset), num_envs and mode it builds
the trainer as `python -m gpurl.train` does (env.num_envs=N,
trainer.rollout_steps=--rollout-steps), and times, in rounds that interleave the three
sides (a shared machine disturbs them alike):

    train   trainer.iteration(): the rollout of T x N frames (env, acting policy,
            collector), the bootstrap value and GAE (or Q(lambda)), and epochs x
            minibatches updates over a device permutation
    env     the same env alone (a second copy) stepping T x N frames under random actions
    net     the networks alone on the same shapes: the acting policy T times on [N]
            observations, the bootstrap value once on [N], and the agent's update
            (forward, backward and optimizer step) epochs x minibatches times on a
            minibatch of the trainer's own

and prints one JSON record per case: `train_frames_per_sec`, `env_frames_per_sec`,
`floor_frames_per_sec` (frames / (env time + net time): what env and network alone
allow) and `efficiency` (train / floor), the phase times, and the peak memory before
and after the timed train iterations (CUDA: max_memory_allocated; CPU: the process's
peak RSS) with their delta; `--max-mem-delta BYTES` exits 1 when a delta exceeds it.
GPU times come from CUDA events. Modes: `eager`; `compile` (compile.update and
compile.policy: the pixel env has no pure lean core for compile.env); `cudagraphs`
(compile.cudagraphs alone: the eager update and acting policy captured as CUDA graphs;
CUDA only, elsewhere a record saying it was skipped).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchrl.envs.utils import ExplorationType, set_exploration_type  # noqa: E402

from gpurl.envs import make_env  # noqa: E402
from gpurl.train import build, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

PRESETS = {"ppo": "pixels_ppo", "pqn": "pixels_pqn", "a2c": "pixels_a2c"}
MODES = {
    "eager": [],
    "compile": ["compile.update=true", "compile.policy=true"],
    "cudagraphs": ["compile.cudagraphs=true"],
}


class Clock:
    """Wall time of a block: CUDA events on the GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def time(self, fn) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def peak_memory(device: torch.device) -> int:
    """Peak bytes so far: CUDA max_memory_allocated, or the process's peak RSS (VmHWM)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return -1


def trainer_for(preset: str, mode: str, num_envs: int, args, run_dir: str):
    overrides = [
        f"experiment={preset}",
        *MODES[mode],
        f"device={args.device}",
        f"env.num_envs={num_envs}",
        "env.eval_envs=2",
        f"trainer.rollout_steps={args.rollout_steps}",
        # iterations are driven here, not by the budget: room for many rollouts at any size
        f"trainer.total_frames={num_envs * args.rollout_steps * 4096}",
        "logger=none",
        "trainer.progress=false",
        f"threads={args.threads}",
        *args.set,
    ]
    torch.manual_seed(0)
    cfg = load_config(overrides)
    return cfg, build(cfg, run_dir), overrides


def bench_case(preset: str, mode: str, num_envs: int, args) -> dict:
    device = torch.device(args.device)
    clock = Clock(device)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg, tr, overrides = trainer_for(preset, mode, num_envs, args, run_dir)
    # the floor's env: a second copy, so the trainer's collector keeps its own state
    env = make_env(cfg.env, device=device, seed=int(cfg.seed) + 1)
    T, N = tr.steps, num_envs
    frames = T * N
    updates = tr.epochs * tr.minibatches
    torch.manual_seed(0)  # uniform random actions from the env's own action spec
    actions = env.full_action_spec[env.action_key].rand(torch.Size([T])).to(device)

    t0 = time.perf_counter()
    for _ in range(args.warmup):  # allocates the rollout buffers, compiles, captures
        tr.iteration()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    warmup_s = time.perf_counter() - t0
    obs = env.lean_reset()
    minibatch = tr._minibatch  # a real minibatch of the last warm-up iteration
    acting, agent_ = tr.acting, tr.agent

    def env_alone():
        for t in range(T):
            env.lean_step(actions[t])

    def net_alone():
        with set_exploration_type(ExplorationType.RANDOM):
            for _ in range(T):
                acting(obs)
        with torch.no_grad():
            agent_.value(obs)
        for _ in range(updates):
            agent_.update(minibatch, tr.progress)

    # one call of each floor piece first (the compiled ones were compiled by the warm-up)
    env.lean_step(actions[0])
    with set_exploration_type(ExplorationType.RANDOM):
        acting(obs)
    agent_.update(minibatch, tr.progress)
    mem_before = peak_memory(device)
    train_s, env_s, net_s = [], [], []
    for _ in range(args.rounds):
        train_s.append(clock.time(tr.iteration))
        env_s.append(clock.time(env_alone))
        net_s.append(clock.time(net_alone))
    mem_after = peak_memory(device)
    train, env_t, net_t = sum(train_s), sum(env_s), sum(net_s)
    floor = env_t + net_t
    n = args.rounds * frames
    return {
        "bench": "bench_train",
        "agent": str(cfg.agent.name),
        "preset": preset,
        "num_envs": N,
        "mode": mode,
        "overrides": overrides,
        "rollout_steps": T,
        "epochs": tr.epochs,
        "minibatches": tr.minibatches,
        "minibatch_size": tr.minibatch_size,
        "frames_per_iteration": frames,
        "rounds": args.rounds,
        "warmup_iterations": args.warmup,
        "warmup_s": round(warmup_s, 2),
        "train_frames_per_sec": round(n / train, 1),
        "env_frames_per_sec": round(n / env_t, 1),
        "net_frames_per_sec": round(n / net_t, 1),
        "floor_frames_per_sec": round(n / floor, 1),
        "efficiency": round(floor / train, 4),
        "round_efficiency": [
            round((e + t) / s, 4) for s, e, t in zip(train_s, env_s, net_s, strict=True)
        ],
        "train_s": [round(x, 4) for x in train_s],
        "env_s": [round(x, 4) for x in env_s],
        "net_s": [round(x, 4) for x in net_s],
        "timing": "cuda_events" if device.type == "cuda" else "perf_counter",
        "memory": "cuda_max_memory_allocated" if device.type == "cuda" else "peak_rss",
        "peak_mem_before": mem_before,
        "peak_mem_after": mem_after,
        "peak_mem_delta": mem_after - mem_before,
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--agents", nargs="+", default=["ppo", "pqn"], choices=list(PRESETS))
    p.add_argument(
        "--presets", nargs="+", default=[], help="on-policy presets to time instead of --agents"
    )
    p.add_argument("--num-envs", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--modes", nargs="+", default=["eager", "compile"], choices=list(MODES))
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="Hydra overrides added to every case (e.g. agent.shared_encoder=true)",
    )
    p.add_argument(
        "--rollout-steps",
        type=int,
        default=4,
        help="T of the rollout (the presets' epochs and minibatches are kept); short, so a "
        "CPU round stays short",
    )
    p.add_argument("--warmup", type=int, default=2, help="iterations before timing")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds (train, env, net each)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument(
        "--max-mem-delta",
        type=int,
        default=None,
        help="exit 1 if peak memory grows by more than this many bytes over the timed "
        "train iterations",
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.device(args.device).type == "cuda"
    failed = False
    presets = args.presets or [PRESETS[agent] for agent in args.agents]
    for num_envs in args.num_envs:
        for preset in presets:
            for mode in args.modes:
                if mode == "cudagraphs" and not cuda:
                    emit(
                        {
                            "bench": "bench_train",
                            "preset": preset,
                            "num_envs": num_envs,
                            "mode": mode,
                            "skipped": "compile.cudagraphs needs CUDA: run with --device cuda",
                        }
                    )
                    continue
                record = bench_case(preset, mode, num_envs, args)
                bound = args.max_mem_delta
                record["mem_check"] = None if bound is None else record["peak_mem_delta"] <= bound
                failed |= record["mem_check"] is False
                emit(record)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
