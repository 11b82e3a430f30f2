"""Compiled against eager, gpurl against the peers a user would pick: one JSON record each.

    python tools/bench_compile.py --what env                       # 64 and 1,024 envs
    python tools/bench_compile.py --what env --num-envs 1024 --impls gpurl_eager envpool
    python tools/bench_compile.py --what env --pin-cpu 1 --out docs/bench/peers/x.jsonl
    python tools/bench_compile.py --what agents --num-envs 64               # CPU
    python tools/bench_compile.py --what agents --device cuda --num-envs 1024 16384
    python tools/bench_compile.py --what agents --agents marinenav --num-envs 64 # six presets

--what agents: per agent (dqn, ddpg, td3, sac on their envs, ppo on CartPole; the six
MarineNav presets marinenav_{iqn,acqin,rainbow,dqn,ddpg,sac} with their own networks and
batch sizes at 5 robots per env, whose records add collected robot-steps/s) and mode
(eager; compiled = compile=full; compiled_amp = compile=full compile.amp=true;
cudagraphs = compile=cudagraphs, CUDA only): updates/s of agent.update on one fixed
batch (--batch-size replay samples; PPO: a minibatch of num_envs) and collected
frames/s of the trainer's collector (one step of every env per rollout), best of
--rounds rounds of --calls calls after --warmup untimed calls (compiling, capturing).
--draw (off-policy agents; several: a case each) says where an update's sample comes
from: `fixed` (default) one sample drawn before timing, the update alone; `sample` the
replay's eager draw then the update, each call; `trainer` as the trainer runs it: the
eager draw, or, where the trainer fuses the draw into a compiled update
(trainers/off_policy.py), that one step.

--what env: CartPole-v1, env only (no policy), uniformly random actions, one thread.
Implementations (--impls; peers are skipped with a one-line note when not importable):

  gpurl_eager             gpurl's CartPoleEnv.lean_step (step + masked autoreset), a fresh
                          random action drawn on the device per step
  gpurl_compiled          the same, lean_step compiled (gpurl.envs.compile.compile_lean_step)
  gpurl_compiled_dynamo   the same through torch.compile (Dynamo guards on every call)
  gpurl_compiled_counter  compiled lean_step, reset noise drawn in the graph by the
                          counter-based RNG (rng="counter") instead of eagerly from env.rng
  gpurl_compiled_rollout  the whole random rollout compiled, --chunk steps unrolled per
                          call, actions and resets drawn in-graph (compile_rollout)
  envpool                 envpool's C++ CartPole-v1, its own batched sync API
                          (num_threads=1, batch_size=num_envs), numpy random actions
  gymnax_step             gymnax CartPole-v1, jax.jit(vmap(step)) called once per step
  gymnax_scan             gymnax CartPole-v1, the whole rollout in one jitted lax.scan

Per-step impls (gpurl_eager, gpurl_compiled*, envpool, gymnax_step) hand every step's
observations, rewards and done flags back to Python. The two whole-rollout impls
(gpurl_compiled_rollout, gymnax_scan) do the same work per step (random action, step,
autoreset, count finished episodes and summed rewards per env) but return only the
per-env counts at the end; the figures compare like with like within those two groups.

Threads: torch.set_num_threads(--threads); XLA is given one thread by setting
XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" before jax
is imported; envpool runs num_threads=1. --pin-cpu N pins the whole process (every
thread of every impl, and the compilers) to CPU N with sched_setaffinity, like
`taskset -c N`. Each impl is built and warmed up (compiles included, timed apart as
compile_seconds), then the impls are timed in interleaved rounds (--rounds), --steps
env steps per round; env_steps_per_sec is the best round (the least disturbed by other
processes), with the median and every round alongside. JAX runs are timed to
block_until_ready. Run with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 for cold compile times.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tools.common import gpurl_commit  # noqa: E402

ENV_IMPLS = (
    "gpurl_eager",
    "gpurl_compiled",
    "gpurl_compiled_dynamo",
    "gpurl_compiled_counter",
    "gpurl_compiled_rollout",
    "envpool",
    "gymnax_step",
    "gymnax_scan",
)
DEFAULT_ENV_IMPLS = tuple(i for i in ENV_IMPLS if i != "gpurl_compiled_dynamo")


class Skip(Exception):
    """An implementation that cannot run here (a peer not installed)."""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# -- env implementations: build() warms up and returns run(steps) ------------------------


class Impl:
    versions: dict
    compile_seconds: float | None = None
    chunk: int | None = None

    def __init__(self, num_envs: int, steps: int, seed: int, chunk: int):
        self.num_envs, self.steps, self.seed, self.chunk_arg = num_envs, steps, seed, chunk

    def build(self):
        """Construct, compile and warm up; return run(), which does `steps` steps of all envs."""
        raise NotImplementedError


class GpurlStep(Impl):
    backend: str | None = None  # None: eager
    rng = "env"

    def build(self):
        from gpurl.envs.cartpole import CartPoleEnv
        from gpurl.envs.compile import compile_lean_step

        n, device = self.num_envs, torch.device("cpu")
        env = CartPoleEnv(num_envs=n, device=device, seed=self.seed)
        gen = torch.Generator(device=device)
        gen.manual_seed(self.seed)
        env.lean_reset()
        step = env.lean_step
        if self.backend is not None:
            step = compile_lean_step(env, backend=self.backend, rng=self.rng)
            t0 = time.perf_counter()
            step(torch.randint(0, 2, (n,), generator=gen, device=device))
            self.compile_seconds = time.perf_counter() - t0
        self.versions = {"torch": torch.__version__}

        def run():
            for _ in range(self.steps):
                step(torch.randint(0, 2, (n,), generator=gen, device=device))

        run()  # warm-up
        return run


class GpurlEager(GpurlStep):
    backend = None


class GpurlCompiled(GpurlStep):
    backend = "inductor"


class GpurlCompiledDynamo(GpurlStep):
    backend = "dynamo"


class GpurlCompiledCounter(GpurlStep):
    backend = "inductor"
    rng = "counter"


class GpurlCompiledRollout(Impl):
    def build(self):
        from gpurl.envs.cartpole import CartPoleEnv
        from gpurl.envs.compile import compile_rollout

        env = CartPoleEnv(num_envs=self.num_envs, seed=self.seed)
        env.lean_reset()
        self.chunk = self.chunk_arg
        t0 = time.perf_counter()
        rollout = compile_rollout(env, chunk=self.chunk)
        self.compile_seconds = time.perf_counter() - t0
        self.versions = {"torch": torch.__version__}
        if self.steps % self.chunk:
            raise SystemExit(f"--steps {self.steps} must be a multiple of --chunk {self.chunk}")

        def run():
            rollout(self.steps)

        run()
        return run


class Envpool(Impl):
    def build(self):
        try:
            import envpool
            import numpy as np
        except ImportError as err:
            raise Skip(f"envpool not importable ({err}): pip install -e '.[peers]'") from err
        n = self.num_envs
        env = envpool.make(
            "CartPole-v1",
            env_type="gymnasium",
            num_envs=n,
            batch_size=n,
            num_threads=1,
            seed=self.seed,
        )
        rng = np.random.default_rng(self.seed)
        env.reset()
        self.versions = {"envpool": _version("envpool"), "numpy": np.__version__}

        def run():
            for _ in range(self.steps):
                env.step(rng.integers(0, 2, n, dtype=np.int32))

        run()
        return run


def _gymnax(num_envs: int):
    try:
        import gymnax
        import jax
    except ImportError as err:
        raise Skip(f"gymnax/jax not importable ({err}): pip install -e '.[peers]'") from err
    jax.config.update("jax_platforms", "cpu")
    env, params = gymnax.make("CartPole-v1")
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def random_step(key, state):
        key, k_act, k_step = jax.random.split(key, 3)
        action = jax.random.randint(k_act, (num_envs,), 0, 2)
        obs, state, reward, terminated, truncated, _ = step(
            jax.random.split(k_step, num_envs), state, action, params
        )
        return key, state, obs, reward, terminated | truncated

    versions = {"jax": jax.__version__, "jaxlib": _version("jaxlib"), "gymnax": _version("gymnax")}
    return jax, reset, random_step, params, versions


class GymnaxStep(Impl):
    def build(self):
        jax, reset, random_step, params, self.versions = _gymnax(self.num_envs)
        key = jax.random.PRNGKey(self.seed)
        key, k = jax.random.split(key)
        _, state = reset(jax.random.split(k, self.num_envs), params)
        jitted = jax.jit(random_step)
        t0 = time.perf_counter()
        jax.block_until_ready(jitted(key, state))
        self.compile_seconds = time.perf_counter() - t0
        carry = {"key": key, "state": state}

        def run():
            key, state = carry["key"], carry["state"]
            for _ in range(self.steps):
                key, state, obs, reward, done = jitted(key, state)
            jax.block_until_ready((key, state, obs, reward, done))
            carry.update(key=key, state=state)

        run()
        return run


class GymnaxScan(Impl):
    def build(self):
        jax, reset, random_step, params, self.versions = _gymnax(self.num_envs)
        jnp = jax.numpy
        key = jax.random.PRNGKey(self.seed)
        key, k = jax.random.split(key)
        _, state = reset(jax.random.split(k, self.num_envs), params)
        steps = self.steps

        def body(carry, _):
            key, state, episodes, total = carry
            key, state, _, reward, done = random_step(key, state)
            return (key, state, episodes + done, total + reward), None

        @jax.jit
        def rollout(key, state):
            zeros = jnp.zeros(self.num_envs, jnp.int32), jnp.zeros(self.num_envs, jnp.float32)
            carry, _ = jax.lax.scan(body, (key, state, *zeros), None, length=steps)
            return carry

        t0 = time.perf_counter()
        jax.block_until_ready(rollout(key, state))
        self.compile_seconds = time.perf_counter() - t0
        carry = {"key": key, "state": state}

        def run():
            key, state, episodes, total = rollout(carry["key"], carry["state"])
            jax.block_until_ready((key, state, episodes, total))
            carry.update(key=key, state=state)

        run()
        return run


IMPLS = {
    "gpurl_eager": GpurlEager,
    "gpurl_compiled": GpurlCompiled,
    "gpurl_compiled_dynamo": GpurlCompiledDynamo,
    "gpurl_compiled_counter": GpurlCompiledCounter,
    "gpurl_compiled_rollout": GpurlCompiledRollout,
    "envpool": Envpool,
    "gymnax_step": GymnaxStep,
    "gymnax_scan": GymnaxScan,
}


def bench_env(args: argparse.Namespace, num_envs: int) -> list[dict]:
    built, records = {}, []
    for name in args.impls:
        impl = IMPLS[name](num_envs, args.steps, args.seed, args.chunk)
        try:
            built[name] = (impl, impl.build())
        except Skip as why:
            print(f"skipping {name}: {why}", file=sys.stderr, flush=True)
    rounds: dict[str, list[float]] = {name: [] for name in built}
    for _ in range(args.rounds):
        for name, (_, run) in built.items():
            t0 = time.perf_counter()
            run()
            rounds[name].append(time.perf_counter() - t0)
    frames = num_envs * args.steps
    for name, (impl, _) in built.items():
        rates = [frames / s for s in rounds[name]]
        records.append(
            {
                "bench": "bench_compile",
                "what": "env",
                "impl": name,
                "env": "CartPole-v1",
                "num_envs": num_envs,
                "env_steps_per_sec": round(max(rates), 1),
                "env_steps_per_sec_median": round(statistics.median(rates), 1),
                "env_steps_per_sec_rounds": [round(r, 1) for r in rates],
                "steps": args.steps,
                "rounds": args.rounds,
                "chunk": impl.chunk,
                "compile_seconds": None
                if impl.compile_seconds is None
                else round(impl.compile_seconds, 3),
                # "1": Inductor's caches off (TORCHINDUCTOR_FORCE_DISABLE_CACHES), so the
                # compile times are cold; otherwise they may be cache hits
                "inductor_caches_disabled": os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES")
                == "1",
                "threads": {
                    "torch": torch.get_num_threads(),
                    "xla_flags": os.environ.get("XLA_FLAGS"),
                    "envpool_num_threads": 1 if name == "envpool" else None,
                    "cpu_affinity": sorted(os.sched_getaffinity(0)),
                },
                "device": "cpu",
                "device_name": platform.processor() or platform.machine(),
                "cpu_count": os.cpu_count(),
                "versions": {"python": platform.python_version(), **impl.versions},
                "date": datetime.date.today().isoformat(),
                "commit": gpurl_commit(),
            }
        )
    return records


# -- agents: updates/s and collected frames/s, eager vs compiled ---------------------------

AGENT_CASES = {
    "dqn": ["env=cartpole", "agent=dqn"],
    "ddpg": ["env=pendulum", "agent=ddpg"],
    "td3": ["env=pendulum", "agent=td3"],
    "sac": ["env=pendulum", "agent=sac"],
    "ppo": ["env=cartpole", "agent=ppo"],
}
# The six MarineNav agents as their presets build them (networks, batch size, replay),
# at the curriculum's last stage (5 robots per env, 4 obstacles): --agents marinenav.
MARINENAV_AGENTS = ("iqn", "acqin", "rainbow", "dqn", "ddpg", "sac")
MARINENAV_ROBOTS = 5
AGENT_CASES.update(
    {f"marinenav_{a}": [f"experiment=marinenav_{a}", "env.stage=5"] for a in MARINENAV_AGENTS}
)
# The packing agent as its CPU preset builds it (16 envs, batch 32): --agents packing_hrl_cpu.
AGENT_CASES["packing_hrl_cpu"] = ["experiment=packing_hrl_cpu"]
AGENT_MODES = {
    "eager": [],
    "compiled": ["compile=full"],
    "compiled_amp": ["compile=full", "compile.amp=true"],
    "cudagraphs": ["compile=cudagraphs"],  # CUDA only
}


def _timed(fn, calls: int, device) -> float:
    """Seconds per call, the device synchronised around the timed calls."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls


def bench_agent(args, agent: str, mode: str, num_envs: int, draw: str = "fixed") -> dict:
    """One agent in one mode: its update on a fixed batch (batch_size samples, or a
    num_envs minibatch for PPO) and its collector's rollout of one step of every env."""
    import tempfile

    from gpurl.agents import OnPolicyAgent, agent_class
    from gpurl.train import build, load_config
    from tools.common import environment_record, training_batch

    device = torch.device(args.device)
    on_policy = issubclass(agent_class(load_config(AGENT_CASES[agent]).agent), OnPolicyAgent)
    # a preset's networks and batch size
    preset = agent.startswith(("marinenav_", "packing_"))
    # The env stays eager for the presets: packing's step has nothing to compile, and
    # MarineNav's compiled step (tools/bench_marinenav.py --compile times it) would add its
    # compile to every case; the packing policy is not a PolicyWrapper for compile.policy
    keep_eager = ["compile.env=false"] + (["compile.policy=false"] if "packing" in agent else [])
    compile_overrides = AGENT_MODES[mode] + (keep_eager if preset and AGENT_MODES[mode] else [])
    overrides = [
        *AGENT_CASES[agent],
        *compile_overrides,
        f"device={device}",
        f"env.num_envs={num_envs}",
        *([] if preset else ["env.eval_envs=2", f"agent.hidden=[{args.hidden},{args.hidden}]"]),
        "logger=none",
        "trainer.progress=false",
        *([] if on_policy else ["trainer.init_random_frames=1000000000"]),
        *([] if on_policy or preset else [f"trainer.batch_size={args.batch_size}"]),
        *([] if on_policy else [f"trainer.frames_per_batch={num_envs}"]),
        *(["trainer.rollout_steps=1", "agent.minibatches=1"] if on_policy else []),
    ]
    torch.manual_seed(0)
    cfg = load_config(overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        tr = build(cfg, run_dir)
    batch = training_batch(tr)
    draw = "fixed" if on_policy else draw
    fused = draw == "trainer" and tr.fused

    def update():  # as the trainer runs it: the update, then counted (TD3's delay reads it)
        if fused:
            tr.agent.update(tr.buffer.bounds, tr.progress)
        else:
            sample = batch if draw == "fixed" else tr.buffer.sample(tr.progress)
            tr.agent.update(sample, tr.progress)
        tr.progress.add_update()

    t0 = time.perf_counter()
    for _ in range(args.warmup):  # compiles, captures graphs
        update()
        tr.collector.rollout()
    if device.type == "cuda":
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    per_update, per_rollout = [], []
    for _ in range(args.rounds):
        per_update.append(_timed(update, args.calls, device))
        per_rollout.append(_timed(tr.collector.rollout, args.calls, device))
    frames = tr.collector.frames_per_batch
    robots = MARINENAV_ROBOTS if preset else None
    return {
        "bench": "bench_compile",
        "what": "agents",
        "agent": agent,
        "env": tr.meta["env"],
        "mode": mode,
        "compile": compile_overrides,
        "num_envs": num_envs,
        "batch_size": batch.numel(),
        "draw": draw,
        "draw_fused": fused,
        "hidden": list(cfg.agent.get("hidden") or []),
        "updates_per_sec": round(1 / min(per_update), 1),
        "samples_per_sec": round(batch.numel() / min(per_update), 1),
        "updates_per_sec_median": round(1 / statistics.median(per_update), 1),
        "collect_frames_per_sec": round(frames / min(per_rollout), 1),
        "collect_frames_per_sec_median": round(frames / statistics.median(per_rollout), 1),
        "robots_per_env": robots,
        "collect_robot_steps_per_sec": round(robots * frames / min(per_rollout), 1)
        if robots
        else None,
        "warmup_calls": args.warmup,
        "warmup_seconds": round(warmup_s, 2),
        "calls": args.calls,
        "rounds": args.rounds,
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def bench_agents(args) -> list[dict]:
    modes = [m for m in args.modes if m != "cudagraphs" or args.device.startswith("cuda")]
    records = []
    for num_envs in args.num_envs:
        for agent in args.agents:
            for mode in modes:
                for draw in args.draw:
                    # each case compiles afresh, as in a run of its own: Dynamo's caches
                    # from the cases before would otherwise fill its recompile limit (8
                    # frames of clip_and_step) and leave the later cases running eager
                    torch._dynamo.reset()
                    record = bench_agent(args, agent, mode, num_envs, draw)
                    print(json.dumps(record), flush=True)
                    records.append(record)
    return records


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--what", choices=["env", "agents"], default="env", help="which section")
    p.add_argument("--num-envs", type=int, nargs="+", default=[64, 1024])
    p.add_argument(
        "--agents",
        nargs="+",
        choices=[*AGENT_CASES, "marinenav"],
        default=[a for a in AGENT_CASES if not a.startswith("marinenav_")],
        help="agents: names, or marinenav for the six MarineNav presets",
    )
    p.add_argument("--modes", nargs="+", choices=list(AGENT_MODES), default=list(AGENT_MODES))
    p.add_argument("--device", default="cpu", help="agents: cpu or cuda")
    p.add_argument(
        "--draw",
        nargs="+",
        choices=["fixed", "sample", "trainer"],
        default=["fixed"],
        help="agents: where an update's sample comes from, one case each (module docstring)",
    )
    p.add_argument("--batch-size", type=int, default=256, help="agents: replay batch size")
    p.add_argument("--hidden", type=int, default=256, help="agents: hidden layer width")
    p.add_argument("--warmup", type=int, default=8, help="agents: untimed calls first")
    p.add_argument("--calls", type=int, default=50, help="agents: calls per timed round")
    p.add_argument("--impls", nargs="+", choices=ENV_IMPLS, default=list(DEFAULT_ENV_IMPLS))
    p.add_argument("--steps", type=int, default=512, help="env steps per timed round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds per impl")
    p.add_argument("--chunk", type=int, default=16, help="steps per compiled rollout call")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--pin-cpu", type=int, default=None, help="pin the process to this CPU")
    p.add_argument("--out", type=Path, default=None, help="also append the records here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Before jax is imported (the peers import it lazily): one XLA thread.
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_ONE_THREAD}".strip()
    if args.pin_cpu is not None:
        os.sched_setaffinity(0, {args.pin_cpu})
    torch.set_num_threads(args.threads)
    if args.what == "agents":
        if "marinenav" in args.agents:
            args.agents.remove("marinenav")
            args.agents += [f"marinenav_{a}" for a in MARINENAV_AGENTS]
        records = bench_agents(args)
    else:
        records = [r for n in args.num_envs for r in bench_env(args, n)]
        for record in records:
            print(json.dumps(record), flush=True)
    if args.out is not None:
        with args.out.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
