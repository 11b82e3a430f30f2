"""Trained MarineNav agents beside the scripted and random baselines, on the fixed set.

Plays the 60 evaluation episodes (10 per curriculum stage, seed 253), all side by side
in one batched env, with the scripted baseline, a uniform random policy (discrete and
continuous action versions) and the greedy policy of every run given with --runs (a run
directory or a checkpoint inside one, loaded as gpurl's TrainedPolicy, as `python -m
gpurl.eval RUN` loads it; that command plays the same protocol for one run, without
baselines, risk levels or table). Prints one JSON record per (policy, stage):
success rate, travel time and energy (over successful episodes), collisions, timeouts.

With --table FILE it also writes one markdown table, a row per (policy, stage): runs
of the same agent (its seeds) are grouped, each cell their mean and, with more than one
run, +- their standard deviation (travel time and energy over successful episodes only;
collisions and timeouts count robots over the stage's 10 episodes).

    python tools/eval_marinenav.py
    python tools/eval_marinenav.py --policies scripted --action discrete
    python tools/eval_marinenav.py --runs runs/record/marinenav_iqn_s* --table /tmp/t.md

--cvar A [B ...] evaluates every IQN run once per risk level (its greedy action maximises
CVaR_A of the return, agent.eval_cvar; 1 is the mean). Choose a level on scenarios the
protocol never uses (--scenario-seed other than 253), then report it on the fixed set:
    python tools/eval_marinenav.py --policies --runs R --cvar 1 0.5 0.25 --scenario-seed 1253

For AC-IQN runs --cvar goes with --search G: the critic picks, by CVaR_A, among the
actor's action and a G x G grid (agent.eval_search); --search 0 evaluates the actor alone.
    python tools/eval_marinenav.py --policies --runs R --search 0 5 --cvar 1 0.25
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
import torchrl

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs.marinenav import MarineNavContinuousEnv, MarineNavEnv  # noqa: E402
from gpurl.envs.marinenav.env import make_eval_env  # noqa: E402
from gpurl.envs.marinenav.evaluation import (  # noqa: E402
    EVAL_SEED,
    evaluation_scenarios,
    run_episodes,
    summarize,
)
from gpurl.envs.marinenav.scripted import RandomPolicy, ScriptedPolicy  # noqa: E402
from gpurl.errors import ConfigError  # noqa: E402
from gpurl.trainers.evaluation import greedy  # noqa: E402
from tools.common import gpurl_commit, trained_policy  # noqa: E402


def policies(args):
    """(label, action kind, policy, source) for every policy to evaluate."""
    out = []
    for action in args.action:
        continuous = action == "continuous"
        for name in args.policies:
            if name == "scripted":
                policy = ScriptedPolicy(continuous=continuous)
            else:
                policy = RandomPolicy(continuous=continuous, seed=0, device=args.device)
            out.append((f"{name} ({action})", action, policy, None))
    for run in args.runs:
        trained = trained_policy(run, args.device)
        cfg = trained.cfg
        if not cfg.env.name.startswith("marinenav"):
            raise ConfigError(f"{run} trained on env={cfg.env.name}, not MarineNav")
        action = "continuous" if cfg.env.name == "marinenav_continuous" else "discrete"
        name = cfg.agent.name
        if not args.cvar and args.search is None:
            out.append((name, action, greedy(trained.policy), str(run)))
            continue
        # Below, each level gets its own copy of the run (the policies are played one
        # after the other); the setting lives on the policy's network, the IQN's
        # QuantileNetwork or the AC-IQN's CriticCheckedActor (agent.eval_cvar, eval_search).
        if name == "iqn" and args.search is None:
            for alpha in args.cvar:
                risky = trained_policy(run, args.device).policy
                risky.network.eval_cvar = alpha
                out.append((f"iqn cvar {alpha:g}", action, greedy(risky), str(run)))
            continue
        if name != "acqin" or args.search is None:
            raise ConfigError(
                f"--cvar applies to IQN runs, --search (with --cvar) to AC-IQN runs; "
                f"{run} is agent={name}"
            )
        for grid in args.search:
            for alpha in (args.cvar or [1.0]) if grid else [1.0]:  # the actor: no level
                checked = trained_policy(run, args.device).policy
                checked.network.set_search(grid, alpha)
                label = f"acqin search {grid} cvar {alpha:g}" if grid else "acqin actor"
                out.append((label, action, greedy(checked), str(run)))
    return out


METRICS = ("success_rate", "travel_time_s", "energy", "collisions", "timeouts")
DIGITS = {"success_rate": 2, "travel_time_s": 1, "energy": 0, "collisions": 1, "timeouts": 1}
HEADERS = {"device": "evaluated on"}  # column titles other than the field's name


def cell(values: list, digits: int) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def table(records: list[dict], keys: tuple[str, ...] = ("policy",)) -> str:
    """One markdown row per (policy, stage); runs of one agent are grouped. `keys` are the
    record fields that name a group, each a column before runs and stage (tools/
    table_marinenav.py adds "device")."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    order = []
    for r in records:
        key = (*(str(r[k]) for k in keys), str(r["stage"]))
        if key not in groups:
            order.append(key)
        groups[key].append(r)
    names = [HEADERS.get(k, k) for k in keys]
    head = "| " + " | ".join(names) + " | runs | stage | success | travel time (s) | energy "
    head += "| collisions | timeouts |"
    lines = [head, "|" + "---|" * (len(keys) + 7)]
    for key in order:
        rows = groups[key]
        cells = [cell([r[m] for r in rows], DIGITS[m]) for m in METRICS]
        named = " | ".join(key[:-1])
        lines.append(f"| {named} | {len(rows)} | {key[-1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--policies", nargs="*", default=["scripted", "random"])
    p.add_argument("--action", nargs="*", default=["discrete", "continuous"])
    p.add_argument("--runs", nargs="*", default=[], help="run directories or checkpoints")
    p.add_argument("--table", help="write the markdown table here")
    p.add_argument(
        "--max-steps",
        type=int,
        default=1000,
        help="episode limit: the protocol's 1000; less for quick checks",
    )
    p.add_argument(
        "--cvar",
        nargs="*",
        type=float,
        default=[],
        help="IQN runs: evaluate at each of these risk levels (agent.eval_cvar, in (0, 1])",
    )
    p.add_argument(
        "--search",
        nargs="*",
        type=int,
        help="AC-IQN runs: grid points per action dimension for the critic's pick "
        "(agent.eval_search; 0: the actor alone), each with every --cvar level",
    )
    p.add_argument(
        "--scenario-seed",
        type=int,
        default=EVAL_SEED,
        help=f"the scenarios' seed: the protocol's {EVAL_SEED}; another for a validation set",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: leave as is)")
    args = p.parse_args(argv)
    if any(not 0 < a <= 1 for a in args.cvar):
        p.error(f"--cvar levels must lie in (0, 1], got {args.cvar}")
    if args.search is not None and any(g < 0 or g == 1 for g in args.search):
        p.error(f"--search takes 0 (the actor alone) or >= 2 grid points, got {args.search}")
    if args.threads:
        torch.set_num_threads(args.threads)
    scenarios = evaluation_scenarios(seed=args.scenario_seed)
    envs = {
        kind: make_eval_env(cls, device=args.device, max_episode_steps=args.max_steps)
        for kind, cls in (("discrete", MarineNavEnv), ("continuous", MarineNavContinuousEnv))
    }
    records = []
    commit = gpurl_commit()
    for label, action, policy, source in policies(args):
        begin = time.perf_counter()
        metrics = run_episodes(envs[action], policy, scenarios, seed=args.scenario_seed)
        wall = time.perf_counter() - begin
        for row in summarize(metrics):
            record = {
                "eval": "marinenav",
                "policy": label,
                "action": action,
                "run": source,
                "scenario_seed": args.scenario_seed,
                **row,
                "wall_s": round(wall, 2),
                "device": args.device,
                "commit": commit,
                "torch": torch.__version__,
                "torchrl": torchrl.__version__,
                "threads": torch.get_num_threads(),
            }
            records.append(record)
            print(json.dumps(record), flush=True)
    if args.table:
        Path(args.table).write_text(table(records))


if __name__ == "__main__":
    main()
