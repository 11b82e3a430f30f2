"""MinAtar env steps per second, gpurl beside the NumPy reference and gymnax: one JSON record
per (game, side, num_envs).

    python tools/bench_minatar.py                       # 5 games, 4 sides, 1 64 1024 8192 envs
    python tools/bench_minatar.py --games breakout seaquest --num-envs 64 1024
    python tools/bench_minatar.py --sides gpurl minatar --max-seconds-per-case 10
    python tools/bench_minatar.py --sides floor memset --num-envs 1024 8192
    python tools/bench_minatar.py --steps 500 --repeats 5 --out docs/bench/envs/minatar.jsonl

Sides (--sides; a side whose package is not importable is skipped with one line on
stderr, as is a game gymnax does not have):

  gpurl    gpurl's batched env (env=minatar env.game=G), its lean path env.lean_step(action):
           the step, the observation reached, then fresh episodes where done and their
           observations (autoreset). A fresh random action per env per step is drawn on
           the device (--device, cpu by default).
  gpurl-compiled
           the same step compiled by Inductor (gpurl.envs.compile.compile_lean_step,
           rng="counter": the step's noise drawn inside the compiled graph), compiled
           before timing (compile_seconds), with the game's own Inductor options (scalar
           loops on CPU); the actions drawn as on the gpurl side.
  floor    what a compiled step of gpurl's design does at the least, with no game rules:
           the sticky-action draw (a uniform per env) and the game's observation, one
           cell per channel at a position that the action moves, written as zeros and
           one scatter of the set cells; compiled as the gpurl-compiled side is
           (traced once, Inductor with the game's options, the counter generator's
           hash for the draw). Its steps/s bound the compiled step's from above.
  memset   the observation's bytes written and nothing else (obs.zero_(), eager): what
           the memory system allows, the floor of any implementation that returns a dense
           bool observation.
  minatar  the reference NumPy package (minatar.Environment(game, sticky_action_prob=0.1,
           difficulty_ramping=True)), num_envs instances stepped in a Python loop, as a
           user batches it without a vector env: per env and step act(a), state(), and
           where the episode ended reset() and state() again, the observations written
           into one [num_envs, 10, 10, C] array. Random actions from NumPy, one vector
           per step, from each game's minimal action set.
  gymnax   gymnax's MinAtar envs (gymnax.make("Breakout-MinAtar") ...), one step of all
           envs is one call of jax.jit(vmap(env.step)) with the random actions drawn in
           it (jax.random); gymnax's step always computes a reset and selects it where
           done (autoreset). Compiled before timing (compile_seconds: the first two
           calls, as Freeway compiles twice), and each timed run is blocked on
           (block_until_ready).

What differs between the sides, recorded in each record's settings: gpurl and the
reference have sticky actions (sticky_action_prob 0.1), gymnax has none; gymnax truncates
episodes at its max_steps_in_episode (1000; Freeway 2500), gpurl at 10,000, the reference
never. Alike on every side: difficulty ramping in Asterix, Seaquest and Space Invaders
(difficulty_ramping null: the game has no ramp), and the random actions drawn from the
game's minimal action set (num_actions of them; gymnax's default, gpurl's action space,
the reference's minimal_action_set()).

Timing: one torch thread (torch.set_num_threads(1)); XLA is given one thread by setting
XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" before jax
is imported (recorded as xla_flags). Per case, --warmup steps (at least one) run first
and set the pace (their median step); then --steps steps are timed with perf_counter,
--repeats times (after a synchronize on CUDA), and the figures are those of the median
run. steps_per_s is env steps per second, num_envs x steps / seconds.
--max-seconds-per-case caps the timed repeats: when the warmup's pace says they would
take longer, the steps per repeat are cut to fit (the NumPy side at 8192 envs); `steps`
is what was timed, steps_cut says whether it was cut from steps_requested.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

GAMES = ("breakout", "asterix", "freeway", "seaquest", "space_invaders")
SIDES = ("gpurl", "gpurl-compiled", "floor", "memset", "minatar", "gymnax")
DEFAULT_SIDES = ("gpurl", "gpurl-compiled", "minatar", "gymnax")
GYMNAX_IDS = {
    "breakout": "Breakout-MinAtar",
    "asterix": "Asterix-MinAtar",
    "freeway": "Freeway-MinAtar",
    "seaquest": "Seaquest-MinAtar",
    "space_invaders": "SpaceInvaders-MinAtar",
}
# the games that ramp up their difficulty over an episode (the others have no ramp anywhere)
RAMPING = ("asterix", "seaquest", "space_invaders")
STICKY = 0.1  # MinAtar's published sticky-action probability, on the two sides that have it
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


class Skip(Exception):
    """A side that cannot run here (its package not installed, a game it lacks)."""


@dataclass
class Case:
    """One side built for one game and batch: run(steps) steps every env `steps` times and
    returns when the work is done."""

    run: Callable[[int], None]
    device: str
    settings: dict
    versions: dict
    compile_seconds: float | None = None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpurl_case(game: str, num_envs: int, seed: int, device: str, compiled: bool = False) -> Case:
    import torchrl

    from gpurl.envs import make_env

    device = torch.device(device)
    cfg = {"name": "minatar", "game": game, "sticky_prob": STICKY, "difficulty_ramping": True}
    env = make_env(cfg, device=device, seed=seed, num_envs=num_envs)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    n_actions = env.action_spec.space.n
    env.lean_reset()
    step, compile_seconds = env.lean_step, None
    if compiled:
        from gpurl.envs.compile import compile_lean_step

        t0 = time.perf_counter()
        step = compile_lean_step(env, rng="counter")
        step(torch.randint(0, n_actions, (num_envs,), generator=gen, device=device))
        compile_seconds = time.perf_counter() - t0

    def run(steps: int):
        for _ in range(steps):
            action = torch.randint(0, n_actions, (num_envs,), generator=gen, device=device)
            step(action)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    settings = {
        "sticky_action_prob": env.sticky_prob,
        "difficulty_ramping": env.ramping if game in RAMPING else None,
        "action_set": "minimal",
        "num_actions": n_actions,
        "max_episode_steps": env.max_episode_steps,
    }
    versions = {"torch": torch.__version__, "torchrl": torchrl.__version__}
    return Case(run, str(device), settings, versions, compile_seconds=compile_seconds)


def floor_case(game: str, num_envs: int, seed: int, device: str, memset: bool) -> Case:
    from gpurl.core.private import inductor_compile
    from gpurl.envs import make_env
    from gpurl.envs.compile import CounterRNG

    device = torch.device(device)
    cfg = {"name": "minatar", "game": game, "sticky_prob": STICKY, "difficulty_ramping": True}
    env = make_env(cfg, device=device, seed=seed, num_envs=num_envs)
    b, (c, h, w) = num_envs, env.observation_spec["observation"].shape[-3:]
    n_actions = env.action_spec.space.n
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    obs = torch.zeros(b, c, h, w, dtype=torch.bool, device=device)
    rng = CounterRNG([(b,)], seed, device)
    offsets = torch.arange(c, device=device) * (h * w)  # channel k's cells start here

    def floor(pos, last, counter, action, key, lanes, offsets):
        # as the compiled step draws its noise (rng="counter"): a hash of (step, env)
        (u,) = CounterRNG.draws(key, counter, (lanes,))
        act = torch.where(u < STICKY, last, action)
        pos = (pos + act.unsqueeze(1)) % (h * w)
        # zeros, then one scatter of the set cells: ~5x faster compiled on this CPU than
        # comparing every cell with the positions (the cheapest draw measured)
        grid = torch.zeros(b, c * h * w, dtype=torch.bool, device=pos.device)
        obs = grid.scatter(1, pos + offsets, True).view(b, c, h, w)
        return pos, act, counter + 1, obs

    state = [
        (torch.arange(c, device=device) * 7).expand(b, c).contiguous(),  # channels apart
        torch.zeros(b, dtype=torch.long, device=device),
        rng.counter.clone(),
    ]
    fixed = (rng.key, rng.lanes[0], offsets)
    compile_seconds = None
    if not memset:
        t0 = time.perf_counter()
        example = (*state, state[1], *fixed)
        floor = inductor_compile(floor, example, env.lean_core().inductor_options)
        floor(*example)
        compile_seconds = time.perf_counter() - t0

    def run(steps: int):
        for _ in range(steps):
            action = torch.randint(0, n_actions, (b,), generator=gen, device=device)
            if memset:
                obs.zero_()
            else:
                state[:3] = floor(*state, action, *fixed)[:3]
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    settings = {"sticky_action_prob": None if memset else STICKY, "channels": c}
    versions = {"torch": torch.__version__}
    return Case(run, str(device), settings, versions, compile_seconds=compile_seconds)


def minatar_case(game: str, num_envs: int, seed: int) -> Case:
    import numpy as np
    from minatar import Environment

    envs = []
    for i in range(num_envs):
        env = Environment(game, sticky_action_prob=STICKY, difficulty_ramping=True)
        env.seed(seed + i)
        env.reset()
        envs.append(env)
    actions = np.asarray(envs[0].minimal_action_set())
    rng = np.random.default_rng(seed)
    obs = np.zeros((num_envs, *envs[0].state_shape()), dtype=bool)
    rewards = np.zeros(num_envs, dtype=np.float32)
    dones = np.zeros(num_envs, dtype=bool)

    def run(steps: int):
        for _ in range(steps):
            chosen = actions[rng.integers(0, len(actions), num_envs)]
            for i, env in enumerate(envs):
                reward, terminal = env.act(int(chosen[i]))
                obs[i] = env.state()  # what the step reached
                if terminal:
                    # as MinAtar's own examples run it: the next episode and its first state
                    env.reset()
                    obs[i] = env.state()
                rewards[i], dones[i] = reward, terminal

    settings = {
        "sticky_action_prob": STICKY,
        "difficulty_ramping": True if game in RAMPING else None,
        "action_set": "minimal",
        "num_actions": len(actions),
        "max_episode_steps": None,  # the reference has no cap
    }
    versions = {"minatar": _version("MinAtar"), "numpy": np.__version__}
    return Case(run, "cpu", settings, versions)


def gymnax_case(game: str, num_envs: int, seed: int) -> Case:
    import jax

    # before gymnax's import makes arrays: JAX then starts its CPU backend alone, with no
    # probe (and log line) for accelerators it would not use
    jax.config.update("jax_platforms", "cpu")
    import gymnax

    if GYMNAX_IDS[game] not in gymnax.registered_envs:
        raise Skip(f"gymnax {_version('gymnax')} has no {GYMNAX_IDS[game]}")
    env, params = gymnax.make(GYMNAX_IDS[game])
    n_actions = env.num_actions
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    @jax.jit
    def random_step(key, state):
        key, k_act, k_step = jax.random.split(key, 3)
        action = jax.random.randint(k_act, (num_envs,), 0, n_actions)
        obs, state, reward, terminated, truncated, _ = step(
            jax.random.split(k_step, num_envs), state, action, params
        )
        return key, state, obs, reward, terminated | truncated

    key, k = jax.random.split(jax.random.PRNGKey(seed))
    _, state = reset(jax.random.split(k, num_envs), params)
    t0 = time.perf_counter()
    # Two calls: in some games (Freeway) reset's state has weak-typed leaves that the
    # step's state has not, so the second call compiles again.
    jax.block_until_ready(random_step(*random_step(key, state)[:2]))
    compile_seconds = time.perf_counter() - t0
    carry = {"key": key, "state": state}

    def run(steps: int):
        key, state = carry["key"], carry["state"]
        for _ in range(steps):
            key, state, obs, reward, done = random_step(key, state)
        jax.block_until_ready((key, state, obs, reward, done))
        carry.update(key=key, state=state)

    settings = {
        "sticky_action_prob": 0.0,  # gymnax's MinAtar has no sticky actions
        # Space Invaders has no ramping param: its episodes always ramp
        "difficulty_ramping": getattr(params, "ramping", True) if game in RAMPING else None,
        "action_set": "minimal",
        "num_actions": n_actions,
        "max_episode_steps": params.max_steps_in_episode,
    }
    versions = {"gymnax": _version("gymnax"), "jax": jax.__version__, "jaxlib": _version("jaxlib")}
    return Case(run, "cpu", settings, versions, compile_seconds=compile_seconds)


# the packages a side imports, and the extra that installs them
NEEDS = {
    "gpurl": ((), None),
    "gpurl-compiled": ((), None),
    "floor": ((), None),
    "memset": ((), None),
    "minatar": (("minatar",), "dev"),
    "gymnax": (("gymnax", "jax"), "peers"),
}


def missing(side: str) -> str | None:
    """Why a side cannot run here (a package it needs not importable), or None."""
    modules, extra = NEEDS[side]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            return f"{module} not importable ({err}): pip install -e '.[{extra}]'"
    return None


def build(side: str, game: str, num_envs: int, args: argparse.Namespace) -> Case:
    if side in ("gpurl", "gpurl-compiled"):
        return gpurl_case(game, num_envs, args.seed, args.device, side == "gpurl-compiled")
    if side in ("floor", "memset"):
        return floor_case(game, num_envs, args.seed, args.device, side == "memset")
    if side == "minatar":
        return minatar_case(game, num_envs, args.seed)
    return gymnax_case(game, num_envs, args.seed)


def capped_steps(requested: int, seconds_per_step: float, repeats: int, cap: float | None) -> int:
    """The steps per repeat that keep `repeats` timed repeats within `cap` seconds at the
    given pace (at least one), or `requested` when they fit or there is no cap (0)."""
    if not cap or seconds_per_step <= 0:
        return requested
    return max(1, min(requested, int(cap / (repeats * seconds_per_step))))


def measure(case: Case, side: str, game: str, num_envs: int, args: argparse.Namespace) -> dict:
    # The warmup also sets the pace for the cap: its median step, which a one-off cost
    # (a first call, a late compile) does not move.
    warmup = max(1, args.warmup)
    paces = []
    for _ in range(warmup):
        t0 = time.perf_counter()
        case.run(1)
        paces.append(time.perf_counter() - t0)
    pace = statistics.median(paces)
    steps = capped_steps(args.steps, pace, args.repeats, args.max_seconds_per_case)
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        case.run(steps)
        runs.append(time.perf_counter() - t0)
    seconds = statistics.median(runs)
    return {
        "tool": "bench_minatar",
        "game": game,
        "side": side,
        "num_envs": num_envs,
        "steps": steps,
        "steps_requested": args.steps,
        "steps_cut": steps < args.steps,
        "warmup": warmup,
        "repeats": args.repeats,
        "max_seconds_per_case": args.max_seconds_per_case,
        "steps_per_s": num_envs * steps / seconds,
        "steps_per_s_runs": [round(num_envs * steps / r, 1) for r in runs],
        "seconds": seconds,
        "compile_seconds": case.compile_seconds,
        "settings": case.settings,
        "versions": case.versions,
        "threads": {"torch": torch.get_num_threads(), "xla_flags": os.environ.get("XLA_FLAGS")},
        "seed": args.seed,
        "commit": gpurl_commit(),
        **environment_record(case.device),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--games", nargs="+", choices=GAMES, default=list(GAMES))
    p.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024, 8192])
    p.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=list(DEFAULT_SIDES),
        help="default: every side but the floors (floor, memset)",
    )
    p.add_argument("--steps", type=int, default=500, help="measured steps per repeat")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (at least 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats; figures: the median")
    p.add_argument(
        "--max-seconds-per-case",
        type=float,
        default=30.0,
        help="cut the steps per repeat so a case's timed repeats fit in this many seconds"
        " (0: no cap)",
    )
    p.add_argument(
        "--device", default="cpu", help="the gpurl and floor sides' device (cpu, cuda[:N])"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also append the records here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Before jax is imported (gymnax_case imports it lazily): one XLA thread, as torch has.
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_ONE_THREAD}".strip()
    torch.set_num_threads(1)
    sides = []
    for side in args.sides:
        if why := missing(side):
            print(f"skipping {side}: {why}", file=sys.stderr, flush=True)
        else:
            sides.append(side)
    for game in args.games:
        skipped = set()
        for num_envs in args.num_envs:
            for side in sides:
                if side in skipped:
                    continue
                try:
                    case = build(side, game, num_envs, args)
                except Skip as why:
                    print(f"skipping {side} {game}: {why}", file=sys.stderr, flush=True)
                    skipped.add(side)  # one line per side and game, not per batch size
                    continue
                emit(measure(case, side, game, num_envs, args), args.out)
                del case  # free the envs (8192 NumPy instances) before the next case
    return 0


if __name__ == "__main__":
    sys.exit(main())
