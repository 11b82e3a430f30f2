"""The seed benchmark's episode with the packing agent's full-size networks, one JSON record.

    python tools/bench_seed_packing.py --bf16            # CPU, 3 repeats, median
    python tools/bench_seed_packing.py --device cuda --bf16

The old command (`train_hrl_packing.py --episodes 1 --max_steps 10 --num_objects 20
--resolution 200 --grid_step 4 --num_workers 1`) timed one episode of at most 10
placements at epsilon 0.9 with no gradient update (its replay never reached a batch of
128): per step, candidate building, the networks' acting passes and the two U-Net passes
of the bootstrap, and the reward. This tool does that work with gpurl's agent:

    act        the manager over the K = 20 candidates' 7-map stacks (ResNet-18 trunk) and
               the worker U-Net over all 24 orientations of the chosen item (whether the
               step explores or not, as a batched epsilon-greedy policy does)
    env step   placement, heightmap update, reward, next candidates
    bootstrap  the Double DQN targets of the transition (agent.targets, under the agent's
               autocast as agent.learn runs them): the online manager over the next
               state's candidates and the target manager at its argmax, the online worker
               U-Net over the next item's 24 orientations and the target U-Net at its
               argmax

`elapsed_sec` is the wall time of the episode from reset to the last placement, after an
untimed warm-up episode of --warmup-steps steps (first-call allocation, oneDNN's kernel
choice; a compiled z-map kernel compiles there). The record also carries process CPU
time, the time in each phase, and `unet_floor_sec`: the worker U-Net's passes alone (24
orientation maps, as many times as the episode ran them) in a tight loop, which no
implementation of this work with these networks can go below on this device. The
seed's figures on this machine (68.0 s with its YCB catalog, 214 s with 16 synthetic
primitives, medians of 3) give `speedup_vs_seed_*`. --max-elapsed-sec makes it exit 1 above a limit.
On CUDA the phases are timed by CUDA events, not by syncing the device after each one
(--phase-sync: the older way, which serialises the host's launches with the device's
work); the record's phase_timing says which.
--profile adds one more episode under torch.profiler: `profile` in the record holds its
wall time, the device's kernel time in it, the launches and the top operators.

The record also carries the work's arithmetic: GFLOP per U-Net map and per manager
candidate (torch's FLOP counter), the passes the episode ran, the rate a large matmul
reaches on this device in the same precision and threads (`gemm_gflops`: about the most
any conv kernel gets), and `arith_floor_sec`, the networks' FLOPs at that rate: the
time below which no implementation of this work goes here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from torch.utils.flop_counter import FlopCounterMode

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.agents.hrl_dqn import HRLDQNAgent, worker_inputs  # noqa: E402
from gpurl.core.progress import Progress  # noqa: E402
from gpurl.envs.info import env_info  # noqa: E402
from gpurl.envs.packing.env import PackingEnv  # noqa: E402
from gpurl.envs.packing.features import (  # noqa: E402
    MANAGER_SCALARS,
    all_orientations,
    manager_maps,
)
from tools.common import emit, environment_record, gpurl_commit, profile_summary  # noqa: E402

SEED_YCB_SEC = 68.0
SEED_SYNTHETIC_SEC = 214.0
AGENT_CONFIG = "gpurl/configs/agent/hrl_dqn.yaml"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def episode(
    env: PackingEnv, agent: HRLDQNAgent, bootstrap: bool, device, steps=None, phase_sync=False
) -> dict:
    """One episode of up to max_steps (or `steps`) placements; wall times of its phases.

    The loop reads each step's done flag on the host (one read a step, as the seed's
    loop stops). On CUDA the phases are timed by CUDA events read after the episode, so
    the host launches a phase while the device still runs the one before; with
    `phase_sync` each phase ends with a device sync and is timed on the host (the
    phases then run one after another: records without a phase_timing field were
    taken so)."""
    times = {"act": 0.0, "env": 0.0, "bootstrap": 0.0}
    events = device.type == "cuda" and not phase_sync
    marks = []  # (phase, start event, end event)
    clock = time.perf_counter

    def phase(name, fn):
        if events:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            out = fn()
            end.record()
            marks.append((name, begin, end))
            return out
        t = clock()
        out = fn()
        sync(device)
        times[name] += clock() - t
        return out

    sync(device)
    placed = int(env.placements)
    start, cpu0 = clock(), time.process_time()
    td = env.lean_reset()
    limit, steps = steps or env.max_episode_steps, 0
    for _ in range(limit):
        td = phase("act", lambda td=td: agent.policy(td))
        nxt, next_td = phase("env", lambda td=td: env.lean_step(td["action"]))
        if bootstrap:
            phase("bootstrap", lambda td=td, nxt=nxt: bootstrap_targets(agent, td, nxt))
        steps += 1
        td = next_td
        if bool(nxt["done"].all()):  # a benchmark of one env: one host read a step is fine
            break
    sync(device)
    elapsed = clock() - start
    for name, begin, end in marks:
        times[name] += begin.elapsed_time(end) / 1e3
    return {
        "elapsed_sec": elapsed,
        "cpu_sec": time.process_time() - cpu0,
        "steps": steps,
        "placements": int(env.placements) - placed,
        **{f"{k}_sec": v for k, v in times.items()},
    }


def bootstrap_targets(agent: HRLDQNAgent, td, nxt) -> None:
    """The Double DQN targets of the transition, as agent.learn runs them."""
    batch = transition(td, nxt, agent.cfg.gamma)
    with torch.no_grad(), agent.autocast():
        agent.targets(batch)


def transition(td, nxt, gamma: float) -> TensorDict:
    """The replay's view of one step: compact state, action, reward, discount, next state."""
    keys = ["heightmap", "items", "candidates", "candidate_mask", "candidate_features"]
    b = td.batch_size
    discount = gamma * (~nxt["terminated"].reshape(b)).float()
    return TensorDict(
        {
            **{k: td[k] for k in keys},
            "action": td["action"],
            "reward": nxt["reward"].reshape(b),
            "discount": discount,
            "weight": torch.ones(b, device=td.device),
            "valid": torch.ones(b, device=td.device),
            "next": TensorDict({k: nxt[k] for k in keys}, batch_size=b),
        },
        batch_size=b,
    )


def first_item_maps(agent: HRLDQNAgent, env: PackingEnv) -> torch.Tensor:
    """The worker's input maps [24, C, R, R] for the env's first item, as when acting."""
    hm, pid = env.hm, env.items[:, 0]
    z, legal = agent.geom.placement(hm, pid)
    return worker_inputs(agent.geom, hm, pid, all_orientations(hm.device), z, legal)[0]


@torch.no_grad()
def unet_floor(agent: HRLDQNAgent, env: PackingEnv, passes: int, device) -> tuple[float, float]:
    """The worker U-Net over 24 orientation maps, `passes` times, in a tight loop, in the
    agent's chunks of orientations as the episode runs them: (wall, process CPU) seconds."""
    maps = first_item_maps(agent, env)
    chunks = [maps[i : i + agent.worker_chunk] for i in range(0, len(maps), agent.worker_chunk)]
    with agent.autocast():
        for chunk in chunks:  # warm-up
            agent.worker.scores(chunk)
        sync(device)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(passes):
            for chunk in chunks:
                agent.worker.scores(chunk)
        sync(device)
    return time.perf_counter() - t, time.process_time() - c


@torch.no_grad()
def gflop_per_pass(agent: HRLDQNAgent, env: PackingEnv) -> tuple[float, float]:
    """GFLOP of one U-Net map and of one manager candidate at the env's resolution."""
    hm = env.hm
    maps = first_item_maps(agent, env)[:1]
    cand = manager_maps(agent.geom, hm, env.items[:, :1])
    scalars = torch.zeros(1, 1, MANAGER_SCALARS, device=hm.device)
    counts = []
    for run in (lambda: agent.worker.scores(maps), lambda: agent.manager(cand, scalars)):
        with FlopCounterMode(display=False) as counter:
            run()
        counts.append(counter.get_total_flops() / 1e9)
    return counts[0], counts[1]


def gemm_gflops(device: torch.device, bf16: bool, n: int = 4096, reps: int = 5) -> float:
    """GFLOP/s of an n x n matmul in the episode's precision: this device's practical peak."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def profile_episode(env, agent, bootstrap: bool, device, top: int, phase_sync=False) -> dict:
    """One episode under torch.profiler: where its time goes (kernels against launches
    and host work)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        episode(env, agent, bootstrap, device, phase_sync=phase_sync)
        sync(device)
        wall = time.perf_counter() - t0
    summary = profile_summary(prof, 1, cuda, top)
    busy = summary["device_kernel_s"]
    return {
        "profiled_wall_s": round(wall, 4),
        "device_busy_fraction": None if busy is None else round(busy / wall, 4),
        **summary,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--kernel", choices=["compiled", "eager"], default="compiled")
    ap.add_argument("--no-bootstrap", action="store_true", help="leave out the bootstrap passes")
    ap.add_argument(
        "--bf16",
        action="store_true",
        help="forward passes in bf16 (CUDA, or a CPU with native bf16: AVX-512 BF16 / AMX)",
    )
    ap.add_argument("--warmup-steps", type=int, default=1)
    ap.add_argument(
        "--resolution", type=int, default=200, help="200 is the seed's; less: a smoke run"
    )
    ap.add_argument(
        "--small", action="store_true", help="tiny networks: a smoke run, not the benchmark"
    )
    ap.add_argument(
        "--worker-chunk",
        type=int,
        default=None,
        help="orientations per U-Net pass (default: the agent config's)",
    )
    ap.add_argument(
        "--gemm-size", type=int, default=4096, help="side of the matmul that measures the peak"
    )
    ap.add_argument(
        "--phase-sync",
        action="store_true",
        help="a device sync after each phase, phases timed on the host (episode() says why)",
    )
    ap.add_argument("--max-elapsed-sec", type=float, default=None)
    ap.add_argument("--profile", action="store_true", help="one more episode under torch.profiler")
    ap.add_argument("--profile-top", type=int, default=12, help="operators listed per table")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    options = dict(
        num_objects=20, resolution=args.resolution, grid_step=4, max_steps=10, num_candidates=20
    )
    env = PackingEnv(
        num_envs=1,
        device=device,
        seed=args.seed,
        compile_placement=args.kernel == "compiled",
        **options,
    )
    cfg = OmegaConf.load(AGENT_CONFIG)
    cfg.bf16 = args.bf16
    if args.worker_chunk:
        cfg.worker_chunk = args.worker_chunk
    if args.small:
        cfg.manager = dict(channels=[8], blocks=[1], stem=8, scalar_features=8, hidden=[16])
        cfg.worker = dict(channels=[4, 8], corner_features=True)
    progress = Progress(device)  # episode 0: epsilon 0.1 + 0.8 = 0.9, stage 1
    agent = HRLDQNAgent(cfg, env_info(env), progress)
    bootstrap = not args.no_bootstrap
    episode(env, agent, bootstrap, device, args.warmup_steps, args.phase_sync)
    runs = []
    for i in range(args.repeats):
        runs.append(episode(env, agent, bootstrap, device, phase_sync=args.phase_sync))
        print(f"episode {i}: {runs[-1]['elapsed_sec']:.1f} s", file=sys.stderr, flush=True)
    median = statistics.median(r["elapsed_sec"] for r in runs)
    mid = min(runs, key=lambda r: abs(r["elapsed_sec"] - median))
    # one acting pass per step, one online bootstrap pass per step: 24 maps each
    unet_passes = mid["steps"] * (2 if bootstrap else 1)
    floor, floor_cpu = unet_floor(agent, env, unet_passes, device)
    unet_gf, manager_gf = gflop_per_pass(agent, env)
    # per step: the U-Net over 24 orientations (acting, and the online bootstrap) and the
    # target U-Net at one; the manager over K candidates (acting, online bootstrap) and
    # the target manager at one
    k = env.num_candidates
    unet_maps = unet_passes * 24 + (mid["steps"] if bootstrap else 0)
    manager_cands = mid["steps"] * ((2 * k + 1) if bootstrap else k)
    gemm = gemm_gflops(device, bool(agent.bf16), args.gemm_size)
    work_gf = unet_maps * unet_gf + manager_cands * manager_gf
    record = {
        "tool": "bench_seed_packing",
        "elapsed_sec": round(median, 3),
        "elapsed_sec_runs": [round(r["elapsed_sec"], 3) for r in runs],
        "cpu_sec": round(mid["cpu_sec"], 3),
        "placements": mid["placements"],
        "steps": mid["steps"],
        "act_sec": round(mid["act_sec"], 3),
        "env_sec": round(mid["env_sec"], 3),
        "bootstrap_sec": round(mid["bootstrap_sec"], 3),
        "phase_timing": "cuda events"
        if device.type == "cuda" and not args.phase_sync
        else "host, a sync after each phase",
        "unet_floor_sec": round(floor, 3),
        "unet_floor_cpu_sec": round(floor_cpu, 3),
        "unet_gflop_per_map": round(unet_gf, 3),
        "manager_gflop_per_candidate": round(manager_gf, 3),
        "unet_maps": unet_maps,
        "manager_candidates": manager_cands,
        "network_tflop": round(work_gf / 1e3, 3),
        "unet_floor_gflops": round(unet_passes * 24 * unet_gf / floor, 1),
        "gemm_gflops": round(gemm, 1),
        "arith_floor_sec": round(work_gf / gemm, 3),
        "seed_ycb_sec": SEED_YCB_SEC,
        "seed_synthetic_sec": SEED_SYNTHETIC_SEC,
        "speedup_vs_seed_ycb": round(SEED_YCB_SEC / median, 2),
        "speedup_vs_seed_synthetic": round(SEED_SYNTHETIC_SEC / median, 2),
        "config": {
            **options,
            "epsilon": round(float(agent.schedule.epsilon(progress)), 3),
            "bootstrap": bootstrap,
            "kernel": args.kernel,
            "bf16": bool(agent.bf16),
            "manager_params": sum(p.numel() for p in agent.manager.parameters()),
            "worker_params": sum(p.numel() for p in agent.worker.parameters()),
            "worker_chunk": agent.worker_chunk,
            "small_networks": args.small,
        },
        "device": str(device),
        "threads": torch.get_num_threads(),
        "commit": gpurl_commit(),
        **environment_record(device),
    }
    if args.profile:
        record["profile"] = profile_episode(
            env, agent, bootstrap, device, args.profile_top, args.phase_sync
        )
    emit(record)
    if args.max_elapsed_sec is not None and median > args.max_elapsed_sec:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
