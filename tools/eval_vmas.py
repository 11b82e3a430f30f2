"""A VMAS preset's floors and trained runs on its evaluation envs: return, success, length.

    python tools/eval_vmas.py vmas_navigation_dqn vmas_navigation_sac --seeds 0 1 2
    python tools/eval_vmas.py --runs runs/record/vmas_navigation_sac_s0 --passes 5
    python tools/eval_vmas.py vmas_navigation_sac --policies heuristic -- env.n_agents=3

Builds the evaluation env a run of that seed builds (gpurl.envs.make_eval_env: seed +
10,000, env.eval_envs copies) and plays one episode in each copy, `--passes` times, as
the run's evaluation does (ForeignEnv.evaluation_protocol: each copy's first episode,
at most env.max_episode_steps steps). Policies:

    random     uniform actions from the action spec (discrete or continuous)
    heuristic  navigation's scripted controller (below): toward the own goal, away
               from what the lidar sees
    trained    a run's checkpoint, greedy (--runs), on its own seed's evaluation env:
               the run loaded as gpurl's TrainedPolicy, as `python -m gpurl.eval RUN`
               loads it (which reports one pass's mean return, no success or length)

One JSON record per (policy, preset or run, seed): each pass's mean return (the root
reward, the agents' sum), the mean over passes, success (the fraction of episodes
that ended terminated, navigation: every agent on its goal, rather than at the step
limit) and the mean episode length.

VMAS draws every env's resets from one random stream per process (vmas's
Environment.vmas_random_state), so an evaluation is a draw of fresh episodes from the
scenario's distribution, not a fixed set: passes differ, and a run's own evaluations
(the learning curve) saw other episodes than this tool does.

The heuristic is not VMAS's (navigation's HeuristicPolicy solves a CLF-QP through
cvxpylayers, which the extra does not bring, and ignores the other agents): a PD
controller toward the agent's own goal plus a repulsion from each lidar ray's reading,
u = clip(-kp (pos - goal) - kd vel - kr sum_k lidar_k dir_k, -1, 1), with kp 8, kd 4,
kr 30, chosen over a small grid on envs of seed 100 (no evaluation env's); with
discrete actions each axis takes the force whose sign u has beyond +-1/3 (0 within).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

# run as `python tools/NAME.py` from the checkout: its root holds the tools package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs import make_eval_env  # noqa: E402
from gpurl.envs.foreign import first_episode_returns  # noqa: E402
from gpurl.train import load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit, trained_policy  # noqa: E402

ACTION = ("agents", "action")
OBS = ("agents", "observation")
GAINS = {"kp": 8.0, "kd": 4.0, "kr": 30.0}


def random_policy(env):
    spec = env.full_action_spec[ACTION]

    def act(td):
        td.set(ACTION, spec.rand())
        return td

    return act


def navigation_heuristic(env, kp=GAINS["kp"], kd=GAINS["kd"], kr=GAINS["kr"]):
    """The scripted controller above, for navigation's observation: pos (0:2), vel
    (2:4), pos - goal (4:6), then max_range - distance per lidar ray (rays evenly
    spaced from angle 0, VMAS's Lidar default; agents do not rotate here)."""
    spec = env.full_action_spec[ACTION]
    discrete = not spec.dtype.is_floating_point
    rays = env.observation_spec[OBS].shape[-1] - 6
    if rays < 0 or (discrete and spec.space.n != 9):
        raise SystemExit("the heuristic is navigation's: pos, vel, pos - goal, lidar rays")
    angle = torch.arange(rays, dtype=torch.float32) * 2 * math.pi / max(rays, 1)
    directions = torch.stack([angle.cos(), angle.sin()], -1).to(spec.device)  # [rays, 2]

    def act(td):
        obs = td.get(OBS)
        u = -kp * obs[..., 4:6] - kd * obs[..., 2:4]
        if rays:
            u = u - kr * obs[..., 6:] @ directions
        u = u.clamp(-1, 1)
        if discrete:  # VMAS's 3 x 3 moves: flat index 3 ax + ay, 0 stay, 1 minus, 2 plus
            axis = torch.where(u > 1 / 3, 2, torch.where(u < -1 / 3, 1, 0))
            td.set(ACTION, axis[..., 0] * 3 + axis[..., 1])
        else:
            td.set(ACTION, u)
        return td

    return act


def play(env, policy, passes: int) -> dict:
    """`passes` evaluations as the run's own (each copy's first episode), measured."""
    returns, success, length = [], [], []
    for _ in range(passes):
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            rollout = env.rollout(env.max_episode_steps, policy, break_when_any_done=False)
        returns.append(first_episode_returns(rollout).mean().item())
        done = rollout["next", "done"].reshape(*rollout.shape)
        terminated = rollout["next", "terminated"].reshape(*rollout.shape)
        first = done.float().argmax(1)  # each env's first done (the cap truncates)
        success.append(terminated.gather(1, first[:, None]).float().mean().item())
        length.append((first + 1).float().mean().item())
    mean = sum(returns) / len(returns)
    return {
        "pass_returns": [round(r, 4) for r in returns],
        "mean_return": round(mean, 4),
        "success": round(sum(success) / len(success), 4),
        "mean_length": round(sum(length) / len(length), 2),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("presets", nargs="*", help="experiment presets (gpurl/configs/experiment)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--policies", nargs="+", default=["random", "heuristic"])
    p.add_argument("--runs", nargs="*", default=[], help="trained run directories")
    p.add_argument("--passes", type=int, default=5)
    args, overrides = p.parse_known_args(argv)
    overrides = [o for o in overrides if o != "--"]
    torch.set_num_threads(1)
    jobs = []
    for preset in args.presets:
        for seed in args.seeds:
            cfg = load_config([f"experiment={preset}", f"seed={seed}", *overrides])
            for name in args.policies:
                jobs.append((name, preset, cfg, None))
    for run in args.runs:
        trained = trained_policy(run)
        jobs.append(("trained", str(run), trained.cfg, trained.policy))
    makers = {"random": random_policy, "heuristic": navigation_heuristic}
    for name, source, cfg, policy in jobs:
        seed = int(cfg.seed)
        torch.manual_seed(seed)
        env = make_eval_env(cfg.env, device="cpu", seed=seed)
        # "preset" as tools/random_return.py names it: tools/plot_curves.py --floors reads both
        origin = {"run": source} if policy is not None else {"preset": source}
        policy = makers[name](env) if policy is None else policy
        record = {"tool": "eval_vmas", "policy": name, **origin, "seed": seed}
        record["scenario"], record["eval_envs"] = str(cfg.env.scenario), int(cfg.env.eval_envs)
        record["continuous_actions"] = bool(cfg.env.continuous_actions)
        if name == "heuristic":
            record["gains"] = GAINS
        record |= play(env, policy, args.passes)
        record |= {"overrides": overrides, "commit": gpurl_commit()}
        emit(record | environment_record("cpu"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
