"""gpurl and a peer library on the same task, in the same run: one JSON record per
(impl, task, seed) in docs/bench/peers/.

    python tools/bench_peers.py vmas --algos iql isac --frames 12800 --seeds 0
    python tools/bench_peers.py solve --task cartpole --seeds 0 1 2 3 4
    python tools/bench_peers.py solve --task pendulum --impls gpurl:sac_pendulum sb3:sac
    python tools/bench_peers.py solve --task acrobot --seeds 0 1 2 3 4
    python tools/bench_peers.py solve --task pendulum --impls gpurl:pendulum_sac_zoo sb3:sac
    python tools/bench_peers.py solve --task lunarlander --seeds 0 1 2 3 4
    python tools/bench_peers.py solve --task halfcheetah --seeds 0 1 2     # MuJoCo: SAC, TD3
    python tools/bench_peers.py solve --task cartpole_masked --seeds 0 1 2 3 4 --stop-at-threshold
    python tools/bench_peers.py atari --frames 20480 --seeds 0

Cases:

vmas   VMAS navigation against BenchMARL 1.5.2 (TorchRL + Hydra MARL). Each BenchMARL
       algorithm runs beside the gpurl preset that matches it, with that preset's
       scenario, frames, env count, network sizes and settings (PAIRS, below):
       iql ~ vmas_navigation_dqn, isac ~ vmas_navigation_sac, ippo ~ vmas_navigation_ippo,
       mappo ~ vmas_navigation_mappo. BenchMARL pins torchrl < 0.12, so it runs in a venv
       of its own (.venv-benchmarl, made on first use: the local torch first, then
       benchmarl and vmas) through tools/peers/benchmarl_run.py. If torchvision (which
       BenchMARL requires and its MLP models never import) cannot load against the CPU
       torch, a stub module stands first on that script's path; the record says so.
       --device cuda runs both sides on the GPU; on a machine with no network,
       BENCHMARL_PYTHON and BENCHMARL_PYTHONPATH name the interpreter and the folder of
       BenchMARL's packages instead of the venv (scripts/gpu_check.sh sets them).
solve  Time to solve against Stable-Baselines3 (the `peers` extra): CartPole >= 475,
       Pendulum >= -200, Acrobot >= -100, LunarLander >= 200, and CartPole without its
       velocities >= 475 (cartpole_masked: gpurl's recurrent PPO, ppo_cartpole_masked_lstm,
       against sb3-contrib's RecurrentPPO on the zoo's CartPoleNoVel-v1 settings, its
       observations and rewards normalised as the zoo does). SB3 runs the RL Zoo's
       tuned hyperparameters (ZOO, below); gpurl runs its presets. Three presets do the
       zoo's work on Gymnasium's env (the same batch, network, update ratio, targets and
       exploration): acrobot_dqn_zoo, lunarlander_dqn_zoo and pendulum_sac_zoo; beside
       SB3 without --stop-at-threshold the run is an equal-work comparison, its
       training frames/s side by side. Each side runs with its library's defaults:
       gpurl flushes denormal floats to zero (flush_denormal), SB3 keeps torch's
       IEEE default unless --sb3-flush-denormal. Both evaluate every --eval-interval
       frames on 10 greedy episodes; the record keeps the frames and the training time
       (the wall time less evaluations) at the first evaluation reaching the threshold.
       With --stop-at-threshold it is a race: both sides end at the threshold (gpurl:
       trainer.stop_at_return), and gpurl's own presets for the task run (acrobot_dqn,
       lunarlander_dqn, pendulum_sac_gym: more envs, fewer updates per frame, smaller
       networks).
       MuJoCo (the `mujoco` extra): HalfCheetah-v5 and Hopper-v5 with SAC and TD3 at
       the zoo's settings on both sides (halfcheetah_sac_zoo, halfcheetah_td3_zoo,
       hopper_sac_zoo, hopper_td3_zoo), 100k steps: no threshold, an equal-work
       comparison of the final return and the training time.
atari  Breakout through envpool: gpurl's atari_breakout_ppo and atari_breakout_pqn at
       --frames, beside the published figures of CleanRL's ppo_atari_envpool and of
       PQN (purejaxql), quoted with their source in tools/peers/published.yaml.

Seeds run interleaved (seed 0 of every impl, then seed 1, ...) with one torch thread
per run, so that a load on the machine falls on both sides alike. An absent peer is
skipped with one line. Each record: the final evaluation and its history, frames,
training frames/s, wall time, time to the threshold, versions of both sides, gpurl's
commit, the device, and notes on what differs between the two sides.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.common import (  # noqa: E402
    emit,
    environment_record,
    gpurl_commit,
    pythonpath,
    train_command,
)

BENCHMARL_VENV = ROOT / ".venv-benchmarl"
BENCHMARL_REQUIREMENTS = ["benchmarl==1.5.2", "vmas==1.5.2"]
PRESETS = ROOT / "gpurl" / "configs" / "experiment"
PUBLISHED = ROOT / "tools" / "peers" / "published.yaml"

# BenchMARL algorithm -> the gpurl preset it runs beside
ON_POLICY = ("ippo", "mappo")  # BenchMARL's on-policy algorithms among PAIRS
PAIRS = {
    "iql": "vmas_navigation_dqn",
    "isac": "vmas_navigation_sac",
    "ippo": "vmas_navigation_ippo",
    "mappo": "vmas_navigation_mappo",
}

# What "solved" means, the SB3 env and the evaluation interval of each solve task
TASKS = {
    "cartpole": {"threshold": 475.0, "gym_id": "CartPole-v1", "eval_interval": 2500},
    "pendulum": {"threshold": -200.0, "gym_id": "Pendulum-v1", "eval_interval": 2000},
    "acrobot": {"threshold": -100.0, "gym_id": "Acrobot-v1", "eval_interval": 5000},
    "lunarlander": {"threshold": 200.0, "gym_id": "LunarLander-v3", "eval_interval": 5000},
    # CartPole with its velocities hidden: gpurl's env.observe_velocity=false; SB3's env is
    # Gymnasium's CartPole-v1 with observation entries 1 and 3 zeroed (the zoo's
    # CartPoleNoVel-v1)
    "cartpole_masked": {
        "threshold": 475.0,
        "gym_id": "CartPole-v1",
        "eval_interval": 5120,
        "hide": [1, 3],
    },
    # MuJoCo (the mujoco extra): no threshold, an equal-work comparison of returns and time
    "halfcheetah": {"threshold": None, "gym_id": "HalfCheetah-v5", "eval_interval": 10000},
    "hopper": {"threshold": None, "gym_id": "Hopper-v5", "eval_interval": 10000},
}
SOLVE_IMPLS = {
    "cartpole": [
        "gpurl:pqn_cartpole",
        "gpurl:dqn_cartpole",
        "gpurl:ppo_cartpole",
        "sb3:dqn",
        "sb3:ppo",
    ],
    "pendulum": [
        "gpurl:sac_pendulum",
        "gpurl:pendulum_sac_gym",
        "gpurl:pendulum_sac_zoo",
        "gpurl:td3_pendulum",
        "sb3:sac",
        "sb3:td3",
    ],
    "acrobot": ["gpurl:acrobot_dqn", "gpurl:acrobot_dqn_zoo", "sb3:dqn"],
    "lunarlander": ["gpurl:lunarlander_dqn", "gpurl:lunarlander_dqn_zoo", "sb3:dqn"],
    "cartpole_masked": ["gpurl:ppo_cartpole_masked_lstm", "sb3:ppo_lstm"],
    "halfcheetah": ["gpurl:halfcheetah_sac_zoo", "sb3:sac", "gpurl:halfcheetah_td3_zoo", "sb3:td3"],
    "hopper": ["gpurl:hopper_sac_zoo", "sb3:sac", "gpurl:hopper_td3_zoo", "sb3:td3"],
}

# RL Zoo (DLR-RM/rl-baselines3-zoo, commit 22e3ff2): hyperparams/dqn.yml, ppo.yml,
# sac.yml and td3.yml, the CartPole-v1, Pendulum-v1, Acrobot-v1 and LunarLander-v3
# entries, as SB3 arguments.
# "lin_x" in the zoo is a schedule falling linearly from x to 0 (SB3's progress_remaining).
ZOO = {
    ("cartpole", "dqn"): {
        "n_timesteps": 50_000,
        "n_envs": 1,
        "kwargs": dict(
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1_000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16,
            exploration_final_eps=0.04,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    },
    ("cartpole", "ppo"): {
        "n_timesteps": 100_000,
        "n_envs": 8,
        "kwargs": dict(
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate="lin_0.001",
            clip_range="lin_0.2",
        ),
    },
    ("acrobot", "dqn"): {  # gpurl's acrobot_dqn_zoo preset does the same work
        "n_timesteps": 100_000,
        "n_envs": 1,
        "kwargs": dict(
            learning_rate=6.3e-4,
            batch_size=128,
            buffer_size=50_000,
            learning_starts=0,
            gamma=0.99,
            target_update_interval=250,
            train_freq=4,
            gradient_steps=-1,
            exploration_fraction=0.12,
            exploration_final_eps=0.1,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    },
    ("pendulum", "sac"): {"n_timesteps": 20_000, "n_envs": 1, "kwargs": dict(learning_rate=1e-3)},
    ("pendulum", "td3"): {
        "n_timesteps": 20_000,
        "n_envs": 1,
        "kwargs": dict(
            gamma=0.98,
            buffer_size=200_000,
            learning_starts=10_000,
            noise_std=0.1,
            gradient_steps=1,
            train_freq=1,
            learning_rate=1e-3,
            policy_kwargs=dict(net_arch=[400, 300]),
        ),
    },
}

# the zoo's LunarLander-v3 entry is its Acrobot-v1 one (lunarlander_dqn_zoo does that work)
ZOO[("lunarlander", "dqn")] = ZOO[("acrobot", "dqn")]
# MuJoCo: the zoo's HalfCheetah-v4 entries (its Hopper-v4 ones are the same), at 100k of
# their 1M steps
ZOO[("halfcheetah", "sac")] = {
    "n_timesteps": 100_000,
    "n_envs": 1,
    "kwargs": dict(learning_starts=10_000),
}
ZOO[("halfcheetah", "td3")] = {
    "n_timesteps": 100_000,
    "n_envs": 1,
    "kwargs": dict(
        learning_starts=10_000,
        noise_std=0.1,
        train_freq=1,
        gradient_steps=1,
        learning_rate=1e-3,
        batch_size=256,
        policy_kwargs=dict(net_arch=[400, 300]),
    ),
}
# sb3-contrib's RecurrentPPO: the zoo's hyperparams/ppo_lstm.yml, CartPoleNoVel-v1 (its
# observations and rewards normalised by VecNormalize)
ZOO[("cartpole_masked", "ppo_lstm")] = {
    "n_timesteps": 100_000,
    "n_envs": 8,
    "normalize": True,
    "policy": "MlpLstmPolicy",
    "kwargs": dict(
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate="lin_0.001",
        clip_range="lin_0.2",
        policy_kwargs=dict(
            ortho_init=False,
            activation_fn="relu",
            lstm_hidden_size=64,
            enable_critic_lstm=True,
            net_arch=dict(pi=[64], vf=[64]),
        ),
    ),
}
ZOO[("hopper", "sac")] = ZOO[("halfcheetah", "sac")]
ZOO[("hopper", "td3")] = ZOO[("halfcheetah", "td3")]


class Skip(Exception):
    """A side that cannot run here (an absent peer or preset): one line, then go on."""


# -- gpurl ---------------------------------------------------------------------------------
def run_gpurl(preset: str, seed: int, overrides: list[str], run_dir: Path) -> dict:
    """`python -m gpurl.train experiment=PRESET`, as a user runs it; its summary.json."""
    if not (PRESETS / f"{preset}.yaml").exists():
        raise Skip(f"gpurl preset {preset} does not exist in this checkout")
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = train_command(preset, seed, run_dir, "threads=1", *overrides)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath(ROOT)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise RuntimeError(f"gpurl {preset} seed {seed} failed: {tail}")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["process_s"] = round(time.perf_counter() - started, 2)
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    summary["flush_denormal"] = bool(saved.get("flush_denormal", False))
    return summary


def training_times(eval_log: list[dict]) -> list[float]:
    """Each evaluation's training time: its wall_s less the evaluations before it."""
    spent, times = 0.0, []
    for entry in eval_log:
        times.append(round(entry["wall_s"] - spent, 2))
        spent += entry.get("eval_s", 0.0)
    return times


def first_reaching(history: list[list], threshold: float | None) -> dict:
    """Frames and training seconds at the first evaluation >= threshold (None if never)."""
    for frames, ret, train_s in history:
        if threshold is not None and ret >= threshold:
            return {"frames_to_threshold": frames, "train_s_to_threshold": train_s}
    return {"frames_to_threshold": None, "train_s_to_threshold": None}


def gpurl_record(summary: dict, threshold: float | None) -> dict:
    log = summary["eval_log"]
    history = [[e["frames"], e["return"], t] for e, t in zip(log, training_times(log), strict=True)]
    train_s = history[-1][2]  # the final evaluation comes at the last frame
    return {
        "impl": "gpurl",
        "frames": summary["frames"],
        "eval_return": summary["eval_return"],
        "eval_history": history,
        "train_s": train_s,
        "train_fps": round(summary["frames"] / max(train_s, 1e-9), 1),
        "wall_time_s": summary["wall_time_s"],
        "process_s": summary["process_s"],
        "threshold": threshold,
        **first_reaching(history, threshold),
        "versions": {k: summary[k] for k in ("torch", "torchrl", "tensordict")},
        "flush_denormal": summary.get("flush_denormal"),
    }


# -- BenchMARL -----------------------------------------------------------------------------
def benchmarl_python(install: bool) -> tuple[Path, dict]:
    """BenchMARL's venv (made here on first use) and what the record says of it; or, where
    BENCHMARL_PYTHON names an interpreter (a machine with no network: its packages on
    BENCHMARL_PYTHONPATH, as scripts/gpu_check.sh installs them), that one."""
    if os.environ.get("BENCHMARL_PYTHON"):
        python = Path(os.environ["BENCHMARL_PYTHON"])
        site = os.environ.get("BENCHMARL_PYTHONPATH", "")
        return python, {"interpreter": f"{python}, BenchMARL's packages on PYTHONPATH {site!r}"}
    python = BENCHMARL_VENV / "bin" / "python"
    if not python.exists():
        if not install:
            raise Skip(f"no BenchMARL venv at {BENCHMARL_VENV} (run without --no-install)")
        import torch

        # the local torch first, then BenchMARL under a constraint that keeps that torch
        pin = BENCHMARL_VENV / "torch-constraint.txt"
        steps = [
            [sys.executable, "-m", "venv", str(BENCHMARL_VENV)],
            [str(python), "-m", "pip", "install", "-q", f"torch=={torch.__version__}"],
            [str(python), "-m", "pip", "install", "-q", *BENCHMARL_REQUIREMENTS, "-c", str(pin)],
        ]
        for step in steps:
            if step[-1] == str(pin):
                pin.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
            if subprocess.run(step).returncode != 0:
                shutil.rmtree(BENCHMARL_VENV, ignore_errors=True)
                raise Skip(f"BenchMARL venv: `{' '.join(step[-3:])}` failed")
    probe = subprocess.run(
        [str(python), "-c", "import torchvision"], capture_output=True, text=True
    )
    if probe.returncode == 0:
        return python, {"torchvision": "loads"}
    reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
    stub = BENCHMARL_VENV / "stub" / "torchvision"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(
        '"""Stands in for a torchvision that cannot load against this torch: BenchMARL\n'
        'requires torchvision, and its MLP models never import it."""\n'
    )
    note = (
        f"torchvision does not load against this venv's torch ({reason}); a stub "
        f"module stood first on the BenchMARL run's path (its MLP models do not use it)"
    )
    return python, {"torchvision": note}


def benchmarl_spec(
    algo: str, cfg, seed: int, frames: int, save_folder: Path, device: str = "cpu"
) -> tuple[dict, int]:
    """BenchMARL's experiment from gpurl's config: the same scenario, frames, envs, nets,
    and the algorithm's settings where BenchMARL has them. Returns (spec, frames)."""
    env, agent, trainer = cfg.env, cfg.agent, cfg.trainer
    scenario = {
        k: v
        for k, v in env.items()
        if k
        not in (
            "_target_",
            "name",
            "num_envs",
            "eval_envs",
            "validate_actions",
            "scenario",
            "max_episode_steps",
            "continuous_actions",
            "collector",
        )
    }
    scenario["max_steps"] = int(env.max_episode_steps)
    on_policy = algo in ON_POLICY
    if on_policy:
        batch = int(trainer.rollout_steps) * int(env.num_envs)
    else:  # a batch of 100 steps of every env, with utd x batch updates after it
        batch = 100 * int(env.num_envs)
    interval = batch * max(1, round(int(trainer.eval_interval) / batch))
    frames = interval * max(1, -(-frames // interval))  # a whole number of evaluations
    experiment = {
        "sampling_device": device,
        "train_device": device,
        "buffer_device": device,
        "share_policy_params": True,
        "prefer_continuous_actions": bool(env.continuous_actions),
        "gamma": float(agent.gamma),
        "max_n_frames": frames,
        "evaluation_interval": interval,
        "evaluation_episodes": int(env.eval_envs),
        "evaluation_deterministic_actions": True,
    }
    algorithm = {}
    grad_clip = agent.get("max_grad_norm")
    experiment["clip_grad_norm"] = True
    experiment["clip_grad_val"] = None if grad_clip is None else float(grad_clip)
    if on_policy:
        experiment.update(
            {
                "lr": float(agent.lr),
                "adam_eps": 1e-5,  # gpurl's PPO Adam (BenchMARL's default is 1e-6)
                "on_policy_collected_frames_per_batch": batch,
                "on_policy_n_envs_per_worker": int(env.num_envs),
                # BenchMARL's "minibatch iters" are passes over the batch, each of
                # batch / minibatch_size minibatches: gpurl's epochs
                "on_policy_n_minibatch_iters": int(agent.epochs),
                "on_policy_minibatch_size": batch // int(agent.minibatches),
            }
        )
        algorithm = {
            "clip_epsilon": float(agent.clip_epsilon),
            "entropy_coef": float(agent.entropy_coef),
            # TorchRL's l2 value loss is (V - R)^2; gpurl's is 0.5 (V - R)^2
            "critic_coef": float(agent.value_coef) / 2,
            "lmbda": float(agent.gae_lambda),
        }
        activation = str(agent.activation)
    else:
        experiment.update(
            {
                "lr": float(agent.lr if algo == "iql" else agent.actor_lr),
                "polyak_tau": float(agent.tau),
                "soft_target_update": True,
                "off_policy_collected_frames_per_batch": batch,
                "off_policy_n_envs_per_worker": int(env.num_envs),
                # gpurl updates utd per frame once init_random_frames are in; BenchMARL trains
                # after every batch, the first included: the same total, spread evenly
                "off_policy_n_optimizer_steps": max(
                    1,
                    round(
                        float(trainer.utd)
                        * max(frames - int(trainer.init_random_frames), 0)
                        / (frames // batch)
                    ),
                ),
                "off_policy_train_batch_size": int(trainer.batch_size),
                "off_policy_memory_size": int(trainer.buffer_size),
                "off_policy_init_random_frames": int(trainer.init_random_frames),
            }
        )
        if algo == "iql":
            experiment.update(
                {
                    "exploration_eps_init": float(agent.epsilon_start),
                    "exploration_eps_end": float(agent.epsilon_end),
                    "exploration_anneal_frames": int(agent.epsilon_frames),
                }
            )
            algorithm = {"loss_function": "smooth_l1" if agent.loss == "huber" else "l2"}
        else:
            algorithm = {"alpha_init": float(agent.init_alpha)}
        activation = "relu"
    spec = {
        "algorithm": algo,
        "algorithm_config": algorithm,
        "scenario": str(env.scenario),
        "scenario_config": scenario,
        "experiment_config": experiment,
        "hidden": list(agent.hidden),
        "activation": activation,
        "seed": seed,
        "save_folder": str(save_folder),
        "threads": 1,
    }
    return spec, frames


BENCHMARL_NOTES = {
    "iql": "BenchMARL's IQL: DQN loss without Double-Q (gpurl's preset: double=true)",
    "isac": "BenchMARL has one learning rate for actor, critics and alpha: gpurl's "
    "actor_lr is used",
    "ippo": "",
    "mappo": "MAPPO's critic sees every agent's observation in both (BenchMARL's gives "
    "both agents one value, gpurl's reads the agent's index too)",
}


def vmas_notes(algo: str, agent) -> str:
    """What the two sides do differently that the spec cannot set, from gpurl's config."""
    if agent.get("bootstrap_truncated", True):
        limit = "gpurl's marks it truncated and bootstraps through it"
    else:
        limit = "so does gpurl's preset (agent.bootstrap_truncated=false)"
    notes = [
        f"BenchMARL's VMAS env ends an episode at max_steps as terminal (VMAS's own "
        f"limit); {limit}",
        "Evaluation: both sides greedy, one episode on each of env.eval_envs envs, return "
        "= the agents' rewards summed (BenchMARL logs their mean); training time excludes "
        "evaluations on both sides",
    ]
    if algo in ON_POLICY:
        normalised = "gpurl's preset does" if agent.normalize_advantage else "nor does gpurl's"
        notes.append(f"BenchMARL's PPO never normalises advantages; {normalised}")
        notes.append("BenchMARL has no learning-rate schedule: gpurl runs with anneal_lr=false")
    else:
        notes.append(
            "Off-policy: BenchMARL trains after every batch of 100 steps x envs, the first "
            "included, gpurl once init_random_frames are in: BenchMARL's updates per batch "
            "are set so that both make about utd x (frames - init_random_frames) updates"
        )
    return ". ".join(notes)


def run_benchmarl(python: Path, spec: dict, extra_path: Path | None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # gpurl's packages (torchrl 0.14) must not shadow its own
    paths = [str(extra_path)] if extra_path is not None else []
    paths += [os.environ["BENCHMARL_PYTHONPATH"]] if os.environ.get("BENCHMARL_PYTHONPATH") else []
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    cmd = [str(python), str(ROOT / "tools" / "peers" / "benchmarl_run.py"), json.dumps(spec)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:]
        raise RuntimeError(f"BenchMARL {spec['algorithm']} failed: {tail}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def case_vmas(args) -> list[dict]:
    from gpurl.api import config

    try:
        python, venv_note = benchmarl_python(install=not args.no_install)
    except Skip as err:
        print(f"skip BenchMARL: {err}", flush=True)
        python = None
    stub = BENCHMARL_VENV / "stub"
    records = []
    for seed in args.seeds:
        for algo in args.algos:
            preset = PAIRS[algo]
            if not (PRESETS / f"{preset}.yaml").exists():
                print(
                    f"skip {algo}: gpurl preset {preset} does not exist in this checkout",
                    flush=True,
                )
                continue
            cfg = config(*args.set, experiment=preset, seed=seed)
            frames = args.frames or int(cfg.trainer.total_frames)
            run_root = ROOT / "runs" / "peers" / f"vmas_{algo}_s{seed}"
            spec, frames = benchmarl_spec(
                algo, cfg, seed, frames, run_root / "benchmarl", args.device
            )
            task = f"vmas_{cfg.env.scenario}"
            common = {
                "case": "vmas",
                "task": task,
                "seed": seed,
                "pair": f"{algo}~{preset}",
                "notes": vmas_notes(algo, cfg.agent),
            }
            overrides = [
                *args.set,  # first: the settings below are what both sides were given
                f"device={args.device}",
                f"trainer.total_frames={frames}",
                f"trainer.eval_interval={spec['experiment_config']['evaluation_interval']}",
                f"trainer.checkpoint_interval={frames}",
            ]
            if algo in ON_POLICY:  # BenchMARL keeps its learning rate constant
                overrides.append("agent.anneal_lr=false")
            summary = run_gpurl(preset, seed, overrides, run_root / "gpurl")
            records.append(
                {
                    **common,
                    "algo": f"{summary['agent']} ({preset})",
                    "overrides": overrides,
                    **gpurl_record(summary, None),
                }
            )
            emit(records[-1])
            if python is None:
                continue
            result = run_benchmarl(python, spec, stub if stub.exists() else None)
            history = result["eval_history"]
            records.append(
                {
                    **common,
                    "impl": "benchmarl",
                    "algo": algo,
                    "frames": result["frames"],
                    "eval_return": history[-1][1],
                    "eval_history": history,
                    "train_s": result["train_s"],
                    "train_fps": round(result["frames"] / max(result["train_s"], 1e-9), 1),
                    "wall_time_s": result["wall_s"],
                    "threshold": None,
                    **first_reaching(history, None),
                    "versions": result["versions"],
                    "device": args.device,
                    "benchmarl_venv": venv_note,
                    "spec": spec,
                    "notes": ". ".join(filter(None, [common["notes"], BENCHMARL_NOTES[algo]])),
                }
            )
            emit(records[-1])
    return records


# -- Stable-Baselines3 ---------------------------------------------------------------------
def hide_entries(env, entries: list[int]):
    """`env` with the observation entries `entries` zeroed on every observation (the
    zoo's NoVel envs: CartPole's velocities are entries 1 and 3)."""
    import gymnasium as gym
    import numpy as np

    class Hidden(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.keep = np.ones(env.observation_space.shape, dtype=np.float32)
            self.keep[entries] = 0.0

        def observation(self, observation):
            return observation * self.keep

    return Hidden(env)


def run_sb3(
    task: str, algo: str, seed: int, eval_interval: int, stop: bool, flush_denormal: bool = False
) -> dict:
    import torch

    try:
        import gymnasium as gym
        import stable_baselines3 as sb3
        from stable_baselines3.common.callbacks import BaseCallback
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.evaluation import evaluate_policy
        from stable_baselines3.common.monitor import Monitor
        from stable_baselines3.common.noise import NormalActionNoise
        from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
    except ImportError as err:
        hint = "pip install -e '.[peers]'"
        raise Skip(f"stable-baselines3 is not installed ({err}): {hint}") from None
    import numpy as np

    zoo = ZOO[(task, algo)]
    kwargs = dict(zoo["kwargs"])
    for key in ("learning_rate", "clip_range"):
        value = kwargs.get(key)
        if isinstance(value, str) and value.startswith("lin_"):
            start = float(value.removeprefix("lin_"))
            kwargs[key] = lambda remaining, start=start: remaining * start
    gym_id, threshold = TASKS[task]["gym_id"], TASKS[task]["threshold"]
    hidden = TASKS[task].get("hide")

    def make(**_) -> gym.Env:
        made = gym.make(gym_id)
        return made if hidden is None else hide_entries(made, hidden)

    env = make_vec_env(make, n_envs=zoo["n_envs"], seed=seed)
    eval_env = DummyVecEnv([lambda: Monitor(make())])
    eval_env.seed(seed + 10_000)  # gpurl's evaluation envs: seed + 10,000
    if zoo.get("normalize"):  # the zoo's VecNormalize; evaluation reads its running stats
        env = VecNormalize(env, gamma=kwargs.get("gamma", 0.99))
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    if "noise_std" in kwargs:
        n = env.action_space.shape[0]
        sigma = kwargs.pop("noise_std") * np.ones(n)
        kwargs["action_noise"] = NormalActionNoise(mean=np.zeros(n), sigma=sigma)
    if isinstance(kwargs.get("policy_kwargs", {}).get("activation_fn"), str):
        policy_kwargs = dict(kwargs["policy_kwargs"])
        policy_kwargs["activation_fn"] = {"relu": torch.nn.ReLU}[policy_kwargs["activation_fn"]]
        kwargs["policy_kwargs"] = policy_kwargs
    model_class = {"dqn": sb3.DQN, "ppo": sb3.PPO, "sac": sb3.SAC, "td3": sb3.TD3}.get(algo)
    if algo == "ppo_lstm":
        try:
            from sb3_contrib import RecurrentPPO as model_class
        except ImportError as err:
            hint = "pip install -e '.[peers]'"
            raise Skip(f"sb3-contrib is not installed ({err}): {hint}") from None
    torch.set_flush_denormal(flush_denormal)  # this process's: set for each run
    policy = zoo.get("policy", "MlpPolicy")
    model = model_class(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)

    class Evaluations(BaseCallback):
        """Greedy return on 10 episodes every eval_interval steps; its time kept apart."""

        def __init__(self):
            super().__init__()
            self.history, self.eval_s, self.next_eval = [], 0.0, eval_interval

        def _on_training_start(self):
            self.started = time.perf_counter()

        def _evaluate(self) -> float:
            began = time.perf_counter()
            train_s = began - self.started - self.eval_s
            if isinstance(eval_env, VecNormalize):
                eval_env.obs_rms = copy.deepcopy(self.model.get_vec_normalize_env().obs_rms)
            mean, _ = evaluate_policy(self.model, eval_env, n_eval_episodes=10, deterministic=True)
            self.eval_s += time.perf_counter() - began
            self.history.append([self.num_timesteps, float(mean), round(train_s, 2)])
            return float(mean)

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            self.next_eval += eval_interval
            mean = self._evaluate()  # also where there is no threshold (MuJoCo): the curve
            return not (stop and threshold is not None and mean >= threshold)

    callback = Evaluations()
    started = time.perf_counter()
    model.learn(total_timesteps=zoo["n_timesteps"], callback=callback)
    stopped = (
        stop
        and threshold is not None
        and bool(callback.history)
        and callback.history[-1][1] >= threshold
    )
    if not stopped and (not callback.history or callback.history[-1][0] < model.num_timesteps):
        callback._evaluate()  # the final evaluation, at the last step
    wall = time.perf_counter() - started
    history = callback.history
    train_s = wall - callback.eval_s
    return {
        "impl": "sb3",
        "algo": f"{algo.upper()} (RL Zoo {gym_id})",
        "frames": model.num_timesteps,
        "eval_return": history[-1][1],
        "eval_history": history,
        "train_s": round(train_s, 2),
        "train_fps": round(model.num_timesteps / max(train_s, 1e-9), 1),
        "wall_time_s": round(wall, 2),
        "threshold": threshold,
        "stopped_at_threshold": stopped,
        **first_reaching(history, threshold),
        "versions": {"stable-baselines3": sb3.__version__, "gymnasium": gym.__version__},
        "zoo": {
            "n_timesteps": zoo["n_timesteps"],
            "n_envs": zoo["n_envs"],
            **{k: zoo[k] for k in ("normalize", "policy") if k in zoo},
            **zoo["kwargs"],
        },
        "flush_denormal": flush_denormal,
    }


def case_solve(args) -> list[dict]:
    task = TASKS[args.task]
    impls = args.impls or SOLVE_IMPLS[args.task]
    records, skipped = [], set()
    for seed in args.seeds:
        for impl in impls:
            side, name = impl.split(":", 1)
            if impl in skipped:
                continue
            common = {
                "case": "solve",
                "task": args.task,
                "seed": seed,
                "eval_interval": args.eval_interval or task["eval_interval"],
                "eval_episodes": 10,
            }
            try:
                if side == "gpurl":
                    overrides = [f"trainer.eval_interval={common['eval_interval']}"]
                    if args.stop_at_threshold and task["threshold"] is not None:
                        overrides.append(f"trainer.stop_at_return={task['threshold']}")
                    run_dir = ROOT / "runs" / "peers" / f"solve_{name}_s{seed}"
                    summary = run_gpurl(name, seed, overrides, run_dir)
                    record = {
                        "algo": f"{summary['agent']} ({name})",
                        "overrides": overrides,
                        **gpurl_record(summary, task["threshold"]),
                        "stopped_at_threshold": bool(summary.get("stopped_at_return")),
                    }
                else:
                    record = run_sb3(
                        args.task,
                        name,
                        seed,
                        common["eval_interval"],
                        args.stop_at_threshold,
                        args.sb3_flush_denormal,
                    )
            except Skip as err:
                print(f"skip {impl}: {err}", flush=True)
                skipped.add(impl)
                continue
            records.append({**common, **record})
            emit(records[-1])
    return records


# -- Atari ---------------------------------------------------------------------------------
def case_atari(args) -> list[dict]:
    import yaml

    published = yaml.safe_load(PUBLISHED.read_text())
    records = [
        {"case": "atari", "impl": p["impl"], "task": p["task"], "seed": None, "published": p}
        for p in published["breakout"]
    ]
    for r in records:
        emit(r)
    for seed in args.seeds:
        for preset in ("atari_breakout_ppo", "atari_breakout_pqn"):
            overrides = []
            if args.frames:
                overrides = [
                    f"trainer.total_frames={args.frames}",
                    f"trainer.eval_interval={args.frames}",
                    f"trainer.checkpoint_interval={args.frames}",
                ]
            try:
                summary = run_gpurl(
                    preset, seed, overrides, ROOT / "runs" / "peers" / f"{preset}_s{seed}"
                )
            except Skip as err:
                print(f"skip {preset}: {err}", flush=True)
                continue
            records.append(
                {
                    "case": "atari",
                    "task": "Breakout-v5 (envpool)",
                    "seed": seed,
                    "algo": f"{summary['agent']} ({preset})",
                    "overrides": overrides,
                    "frames_unit": "agent steps (frameskip 4: x4 emulator frames)",
                    **gpurl_record(summary, None),
                }
            )
            emit(records[-1])
    return records


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("case", choices=["vmas", "solve", "atari"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--frames", type=int, default=0, help="vmas, atari: frames (0: the preset's)")
    p.add_argument("--algos", nargs="+", choices=sorted(PAIRS), default=sorted(PAIRS))
    p.add_argument("--no-install", action="store_true", help="vmas: never make the venv")
    p.add_argument(
        "--device", default="cpu", help="vmas: where both sides sample and train (cpu, cuda)"
    )
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="vmas: overrides of the gpurl preset that BenchMARL's side follows too "
        "(env.num_envs=1024: both sides step 1,024 envs)",
    )
    p.add_argument("--task", choices=sorted(TASKS), default="cartpole")
    p.add_argument("--impls", nargs="+", help="solve: gpurl:PRESET or sb3:ALGO")
    p.add_argument("--eval-interval", type=int, default=0, help="solve: 0 = the task's")
    p.add_argument(
        "--sb3-flush-denormal",
        action="store_true",
        help="solve: SB3 flushes denormals to zero too (torch.set_flush_denormal), as gpurl does",
    )
    p.add_argument(
        "--stop-at-threshold",
        action="store_true",
        help="solve: end each run (both sides) at its first evaluation >= the threshold",
    )
    p.add_argument("--out", default="docs/bench/peers", help="where the records go")
    p.add_argument("--name", default="", help="the records file's name (default: by case)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    records = {"vmas": case_vmas, "solve": case_solve, "atari": case_atari}[args.case](args)
    device = args.device if args.case == "vmas" else "cpu"  # solve and atari run on the CPU
    context = {"tool": "bench_peers", "commit": gpurl_commit(), **environment_record(device)}
    date = datetime.date.today().isoformat()
    task = args.task if args.case == "solve" else ""
    kind = device.split(":")[0]
    name = args.name or "_".join(x for x in (args.case, task, kind, date) if x) + ".jsonl"
    out = ROOT / args.out / name
    if records:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            for record in records:
                f.write(json.dumps({**context, **record}) + "\n")
    print(f"{len(records)} records -> {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
