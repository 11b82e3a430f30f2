"""The config schema: every key of every group, declared once with its type, range,
default and one-line doc, and the check a composed config must pass before a run starts.

    top level   seed, device, threads                       (Root)
    env         one dataclass per env family: ENVS           (env.name picks it)
    agent       one dataclass per agent: AGENTS_SCHEMA       (agent.name picks it)
    trainer     Trainer
    logger      one per logger: LOGGERS_SCHEMA               (logger.name picks it)
    compile     Compile

A key is a dataclass field: its annotation is the type, `key(default, doc, ge=..., ...)`
the rest. The YAML files of the group options are generated from these classes (`python
-m gpurl.schema --write`; tests/test_bad_input.py fails when one is stale), so the YAML,
`python -m gpurl.train --help` and `reference()` (the docs' configuration reference) all
read the same declaration.

`check_config(cfg)` (called first in gpurl.train.build) raises ConfigError, one line
naming the key, what was given and what fits, at the first key that does not fit: a
wrong type, a value out of range, an unknown or missing key, an unavailable device, or
keys that contradict each other (the budget against one rollout, a minibatch larger than
the replay...). Configs with a `_target_` (env=custom, a factory of one's own) are open:
the keys gpurl reads are checked, the others go to the factory as they are. So are
agents and envs registered in AGENTS / NATIVE_ENVS without a schema here (the checklist
of docs/extending.md): the keys of their kind are checked.

This module sits just below gpurl.train: it reads the agent registry (an agent's kind
decides which budget applies) and the choices the lower layers define (CNN kinds,
squashes, loggers), so that each choice is listed once.
"""

import copy
import dataclasses
import difflib
import inspect
import operator
import sys
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpurl.agents import AGENTS, OffPolicyAgent, OnPolicyAgent, agent_class
from gpurl.agents.ppo import ACTIVATIONS
from gpurl.envs import NATIVE_ENVS
from gpurl.envs.foreign import COLLECTORS
from gpurl.envs.packing.catalog import PROCEDURAL_KINDS
from gpurl.errors import ConfigError
from gpurl.policies.heads import SQUASHES
from gpurl.policies.networks import CNN_KINDS, INITS
from gpurl.trainers.reporting import LOGGERS
from gpurl.utils.device import resolve_device

CONFIGS = Path(__file__).resolve().parent / "configs"
MISSING = "???"  # OmegaConf's mark of a value still to be given


def key(
    default,
    doc: str,
    *,
    ge=None,
    gt=None,
    le=None,
    lt=None,
    choices=None,
    nonempty=False,
    note: tuple[str, ...] = (),
):
    """A config key: its default, its one-line doc and its range (bounds apply to a
    number or to each item of a list; `choices` likewise). `note`: comment lines written
    above the key in its YAML file."""
    meta = dict(
        doc=doc, ge=ge, gt=gt, le=le, lt=lt, choices=choices, nonempty=nonempty, note=tuple(note)
    )
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def group(cls, doc: str, note: tuple[str, ...] = ()):
    """A nested block of keys (agent.encoder, env.reward_weights)."""
    return field(default_factory=cls, metadata=dict(doc=doc, note=tuple(note)))


# Keys many options share: one declaration each, a default per option.
def name_key(value: str, doc: str = "the option this config is (the registry name)"):
    return key(value, doc)


def num_envs_key(default: int):
    return key(default, "envs stepped together, one batch on the device", ge=1)


def eval_envs_key(default: int):
    return key(default, "evaluation envs, one greedy episode each per evaluation", ge=1)


def validate_actions_key():
    return key(False, "true: each step checks actions against the action spec (host reads)")


def max_episode_steps_key():
    return key(None, "evaluation's cap on an episode; null: the env's own, else 1000", ge=1)


def collector_key():
    return key(
        "auto",
        "auto | lean | torchrl: gpurl's lean collector through the foreign-env adapter, or "
        "TorchRL's Collector; auto: lean on the CPU",
        choices=COLLECTORS,
    )


def hidden_key(default: list[int], doc: str = "hidden layer widths after the encoder"):
    return key(default, doc, ge=1)


def lr_key(default: float, doc: str = "Adam learning rate"):
    return key(default, doc, gt=0)


def gamma_key(default: float = 0.99):
    return key(default, "discount per step", ge=0, le=1)


def tau_key(default: float = 0.005):
    return key(default, "Polyak rate per update: target += tau (online - target)", gt=0, le=1)


def max_grad_norm_key(default: float | None):
    return key(default, "gradient-norm clip; null = no clipping", gt=0)


def target_update_key(default: str):
    return key(
        default,
        "target network: polyak (every update, tau) | hard (copies)",
        choices=("polyak", "hard"),
    )


def target_update_interval_key(default: int):
    return key(default, "updates between hard target copies", ge=1)


def epsilon_start_key(default: float, note: tuple[str, ...] = ()):
    return key(
        default,
        "epsilon-greedy: probability of a uniform random action at frame 0",
        ge=0,
        le=1,
        note=note,
    )


def epsilon_end_key(default: float):
    return key(default, "epsilon after epsilon_frames (linear in frames)", ge=0, le=1)


def epsilon_frames_key(default: int):
    return key(default, "frames over which epsilon goes from start to end", ge=0)


REPLAY_NOTE = ("replay the agent declares (gpurl/trainers/replay.py)",)


def n_step_key(default: int = 1, note: tuple[str, ...] = REPLAY_NOTE):
    return key(
        default, "n-step returns, cut at episode ends, per (env, robot) stream", ge=1, note=note
    )


def prioritized_key(default: bool = False):
    return key(default, "proportional prioritized replay (p = |TD error|)")


def priority_alpha_key(default: float = 0.6):
    return key(default, "priority exponent: p^alpha (0 = uniform)", ge=0, le=1)


def priority_beta_start_key():
    return key(0.4, "importance-weight exponent, annealed to priority_beta_end", ge=0, le=1)


def priority_beta_end_key():
    return key(1.0, "importance-weight exponent at the end of the annealing", ge=0, le=1)


def priority_beta_frames_key():
    return key(0, "frames of the annealing; 0 = the whole run", ge=0)


def priority_sampler_key():
    return key(
        "auto",
        "auto (cumsum on CUDA and below 700k entries on CPU) | sumtree | cumsum",
        choices=("auto", "sumtree", "cumsum"),
    )


def anneal_lr_key(default: bool = True):
    return key(default, "anneal the learning rate linearly to 0 over trainer.total_frames")


def epochs_key(default: int):
    return key(default, "passes over each rollout", ge=1)


def critic_key():
    return key(
        "local",
        "multi-robot envs: local (IPPO: V of each robot's own observation) | central (MAPPO: "
        "V of the group's observations and the robot's index)",
        choices=("local", "central"),
    )


def minibatches_key(default: int):
    return key(
        default, "minibatches per pass; must divide trainer.rollout_steps x env.num_envs", ge=1
    )


def bootstrap_truncated_key():
    return key(
        True,
        "a truncated episode bootstraps from the next state's value (keeps next "
        "observations); false treats truncation as an end",
    )


class Schema:
    """What every schema class declares beside its keys (class attributes, not keys)."""

    open: ClassVar[bool] = False  # True: keys beyond the declared ones pass through
    complete: ClassVar[bool] = True  # True: every declared key must be present
    obs: ClassVar[str] = "any"  # envs: what they observe (vector, images, objects, maps)
    # envs: env.num_envs is the env's batch (the budget checks need it; a factory of
    # one's own may build a batch of another size)
    batch_is_num_envs: ClassVar[bool] = True


# -- top level ------------------------------------------------------------------------------


@dataclass
class Root(Schema):
    """The keys outside the groups."""

    seed: int = key(
        0, "seed of envs, networks and exploration (evaluation envs: seed + 10000)", ge=0
    )
    device: str = key("auto", "auto | cpu | cuda | cuda:N (auto: CUDA when present)")
    threads: int = key(
        1,
        "torch intra-op threads; 0 keeps torch's default (all cores)",
        ge=0,
        note=(
            "One thread is fastest for small networks on a CPU, and far faster when other",
            "processes share the cores (with two threads on a loaded 2-core machine, small ops",
            "wait on the second thread).",
        ),
    )


# -- env ------------------------------------------------------------------------------------


@dataclass
class Env(Schema):
    """The keys gpurl reads of any env config; the rest go to the env's constructor or
    factory."""

    open: ClassVar[bool] = True
    complete: ClassVar[bool] = False
    batch_is_num_envs: ClassVar[bool] = False

    name: str = name_key("env", "the env family (run directory label)")
    num_envs: int = num_envs_key(8)
    eval_envs: int = eval_envs_key(4)
    validate_actions: bool = validate_actions_key()
    max_episode_steps: int | None = max_episode_steps_key()
    collector: str = collector_key()


@dataclass
class Custom(Schema):
    """Any env by its factory, without registering it: a callable that returns a TorchRL
    EnvBase (a NativeEnv subclass of your own, or any TorchRL env), e.g.
      python -m gpurl.train env=custom env._target_=my_package.make_env +env.size=5
    gpurl hands the factory num_envs, device, seed and max_episode_steps where its
    signature takes them, and every other key here as a keyword argument; an unbatched
    env is copied num_envs times (TorchRL's SerialEnv). See envs/foreign.py."""

    open: ClassVar[bool] = True
    batch_is_num_envs: ClassVar[bool] = False

    _target_: str = key(MISSING, "dotted path to the factory")
    name: str = name_key("custom", "the run directory's label")
    num_envs: int = num_envs_key(8)
    eval_envs: int = eval_envs_key(4)
    max_episode_steps: int | None = max_episode_steps_key()
    collector: str = collector_key()
    validate_actions: bool = validate_actions_key()


@dataclass
class CartPole(Schema):
    """gpurl's native CartPole (Gymnasium CartPole-v1 dynamics), batched on the device."""

    obs: ClassVar[str] = "vector"

    name: str = name_key("cartpole", "the env family (gpurl/envs/__init__.py NATIVE_ENVS)")
    num_envs: int = num_envs_key(8)
    eval_envs: int = eval_envs_key(10)
    validate_actions: bool = validate_actions_key()


@dataclass
class Pendulum(Schema):
    """gpurl's native Pendulum (Gymnasium Pendulum-v1 dynamics), batched on the device."""

    obs: ClassVar[str] = "vector"

    name: str = name_key("pendulum", "the env family (gpurl/envs/__init__.py NATIVE_ENVS)")
    num_envs: int = num_envs_key(1)
    eval_envs: int = eval_envs_key(10)
    validate_actions: bool = validate_actions_key()


@dataclass
class Gym(Schema):
    """Any Gymnasium task through TorchRL's GymWrapper: env=gym env.id=Acrobot-v1"""

    name: str = name_key("gym", "the env family: Gymnasium through TorchRL's GymWrapper")
    id: str = key("CartPole-v1", "the Gymnasium env id")
    num_envs: int = num_envs_key(1)
    eval_envs: int = eval_envs_key(10)
    collector: str = collector_key()
    validate_actions: bool = validate_actions_key()


@dataclass
class Pixels(Schema):
    """A ROM-free Game-Boy-like tile world rendered on the device (docs/envs/pixels.md)."""

    obs: ClassVar[str] = "images"

    name: str = name_key("pixels", "the env family (gpurl/envs/__init__.py NATIVE_ENVS)")
    num_envs: int = num_envs_key(1024)
    eval_envs: int = eval_envs_key(16)
    validate_actions: bool = validate_actions_key()
    map_height: int = key(16, "world height in tiles", ge=4, note=("world",))
    map_width: int = key(16, "world width in tiles", ge=4)
    wall_prob: float = key(0.25, "probability of a wall in each interior cell", ge=0, lt=1)
    num_worlds: int = key(
        0, "0: a fixed world per env; N: every reset draws from a pool of N", ge=0
    )
    frames_per_step: int = key(24, "frames per env step", ge=1, note=("frames and input",))
    release_after_frames: int = key(8, "frames the button is held", ge=0)
    stack_k: int = key(1, "frames in the observation stack", ge=1)
    reward: str = key(
        "goal",
        "goal (goal-template distance) | reach (on the goal tile)",
        choices=("goal", "reach"),
        note=("reward",),
    )
    step_cost: float = key(-0.01, "reward added every step")
    alpha: float = key(1.0, "goal: weight of the distance progress")
    goal_bonus: float = key(10.0, "reward on reaching the goal")
    tau: float = key(0.05, "goal: distance below which the goal counter runs", ge=0)
    k_consecutive: int = key(4, "goal: steps under tau that end the episode", ge=1)
    goal_stack: bool = key(False, "goal: compare the whole stack with a stacked goal")
    shaping: float = key(0.0, "reach: weight of the tile-distance progress")
    max_steps: int = key(512, "steps before an episode is truncated", ge=1)
    info_mode: str = key(
        "stats",
        "full | stats | none: what the env reports beside the frames",
        choices=("full", "stats", "none"),
    )
    restore: str = key(
        "lazy",
        "lazy | masked | host_skip (measurement only): how resets restore the frame stack",
        choices=("lazy", "masked", "host_skip"),
    )


@dataclass
class RewardWeights(Schema):
    """Packing's shaped reward (gpurl/envs/packing/reward.py)."""

    placed: float = key(1.0, "x 1 per item placed")
    compactness_gain: float = key(0.4, "x the rise of compactness C")
    pyramidality_gain: float = key(0.4, "x the rise of pyramidality P")
    quality: float = key(0.2, "x the placement quality J")
    height_gain: float = key(0.1, "x the rise of the pile's top / H (a cost)")
    quality_compactness: float = key(0.5, "J = quality_compactness C + quality_pyramidality P")
    quality_pyramidality: float = key(0.3, "J's weight of P")
    utilisation_gain: float = key(0.0, "x placed volume / box volume (not in the spec; off)")


@dataclass
class Packing(Schema):
    """Irregular-part packing on heightmaps (docs/envs/packing.md), batched on the device."""

    obs: ClassVar[str] = "maps"

    name: str = name_key("packing", "the env family (gpurl/envs/__init__.py NATIVE_ENVS)")
    num_envs: int = num_envs_key(1)
    eval_envs: int = eval_envs_key(10)
    validate_actions: bool = validate_actions_key()
    num_objects: int = key(20, "items per episode, drawn with replacement from the pool", ge=1)
    resolution: int = key(200, "R cells per side of the box's heightmap", ge=8)
    grid_step: int = key(4, "corners on a stride grid: every grid_step-th cell", ge=1)
    box_size: list[float] = key([0.256, 0.256, 0.256], "L, W, H in metres (L == W)", gt=0)
    max_steps: int = key(30, "placements per episode before truncation", ge=1)
    num_candidates: int = key(20, "K, the manager's candidate slots (clamped to num_objects)", ge=1)
    pool_size: int = key(128, "catalog items instantiated at construction", ge=1)
    catalog_seed: int = key(0, "seed of the item pool; the run's seed draws the episodes", ge=0)
    shapes: list[str] = key(
        list(PROCEDURAL_KINDS),
        "procedural kinds the pool draws from",
        choices=PROCEDURAL_KINDS,
        nonempty=True,
    )
    mesh_paths: list[str] | None = key(
        None, "OBJ/STL files (metres) instead of procedural shapes; needs gpurl[meshes]"
    )
    reward_weights: RewardWeights = group(RewardWeights, "the shaped reward's weights")
    compile_placement: bool = key(
        False, "run the z-map through torch.compile (seconds to compile, ~10x faster on a CPU)"
    )
    illegal_action: str = key(
        "terminate",
        "terminate: an illegal corner ends the episode | noop: it places nothing",
        choices=("terminate", "noop"),
    )


@dataclass
class MarineNav(Schema):
    """Multi-robot surface-vessel navigation, 25 discrete actions (see
    docs/envs/marinenav.md); env=marinenav_continuous is the same with 2 continuous
    actions in [-1, 1]."""

    obs: ClassVar[str] = "objects"

    name: str = name_key("marinenav", "the env family (gpurl/envs/__init__.py NATIVE_ENVS)")
    num_envs: int = num_envs_key(64)
    eval_envs: int = key(60, "the fixed evaluation set: 10 episodes per curriculum stage", ge=1)
    validate_actions: bool = validate_actions_key()
    stage: int = key(0, "initial curriculum stage; the trainer advances it by frames", ge=0)
    max_robots: int = key(5, "robot slots; at least the largest `robots` of the curriculum", ge=1)
    max_obstacles: int = key(
        4, "obstacle slots; at least the largest `obstacles` of the curriculum", ge=0
    )
    num_cores: int = key(0, "Rankine vortex cores (0 in the published runs)", ge=0)
    max_episode_steps: int = key(1000, "steps before an episode is truncated", ge=1)
    perception_noise: bool = key(True, "noisy perception of positions, velocities and angles")
    pool_size: int | None = key(
        None, "autoreset scenario pool; null: max(1024, 2 x num_envs)", ge=1
    )
    pool_refresh: int | None = key(
        None, "pool entries redrawn at a time; null: max(64, num_envs / 8)", ge=1
    )
    pool_refresh_every: int = key(16, "resets between pool refreshes", ge=1)
    candidates: int = key(128, "proposals per slot in the scenarios' rejection sampling", ge=1)
    curriculum: list[dict] = key(
        [
            {"from_step": 0, "robots": 3, "obstacles": 0, "min_start_goal_dis": 30.0},
            {"from_step": 1000000, "robots": 4, "obstacles": 0, "min_start_goal_dis": 35.0},
            {"from_step": 2000000, "robots": 5, "obstacles": 0, "min_start_goal_dis": 40.0},
            {"from_step": 3000000, "robots": 5, "obstacles": 2, "min_start_goal_dis": 40.0},
            {"from_step": 4000000, "robots": 5, "obstacles": 3, "min_start_goal_dis": 40.0},
            {"from_step": 5000000, "robots": 5, "obstacles": 4, "min_start_goal_dis": 40.0},
        ],
        "stages by global step: rows {from_step, robots, obstacles, min_start_goal_dis}",
        nonempty=True,
        note=(
            "Stages by global step (the trainer's frames: one frame = one step of one env). The",
            "paper's schedule over 6M steps; override the whole list to change it, e.g.",
            "'env.curriculum=[{from_step:0,robots:3,obstacles:0,min_start_goal_dis:30}]'.",
        ),
    )


@dataclass
class DMC(Schema):
    """DeepMind Control Suite tasks from their state (gpurl/envs/dmc.py, docs/envs/dmc.md), e.g.
      python -m gpurl.train env=dmc env.domain=walker env.task=stand agent=sac
    Needs the dmc extra: pip install -e '.[dmc]' (dm_control, with mujoco<4)."""

    obs: ClassVar[str] = "vector"

    _target_: str = key("gpurl.envs.dmc.make_dmc_env", "the factory (gpurl/envs/dmc.py)")
    name: str = name_key("dmc", "the run directory's label")
    domain: str = key(
        "cartpole", "a suite domain (dm_control.suite.ALL_TASKS lists domain, task pairs)"
    )
    task: str = key("swingup", "a task of the domain")
    num_envs: int = key(1, "copies stepped one after another (TorchRL's SerialEnv)", ge=1)
    eval_envs: int = key(5, "evaluation copies: each plays one greedy episode", ge=1)
    frame_skip: int = key(
        1,
        "control steps per action (rewards summed); episodes last 1000 / frame_skip actions",
        ge=1,
    )
    max_episode_steps: int | None = key(
        None, "evaluation's cap on an episode; null: the task's own (1000 / frame_skip)", ge=1
    )
    collector: str = collector_key()
    validate_actions: bool = validate_actions_key()


@dataclass
class Envpool(Schema):
    """Atari games through envpool (gpurl/envs/envpool.py, docs/envs/envpool.md), e.g.
      python -m gpurl.train env=envpool env.game=Pong-v5 agent=ppo
    Needs the envpool extra: pip install -e '.[envpool]'. The preprocessing is envpool's
    (the standard Nature-DQN settings); observations are uint8 frames [4, 84, 84]."""

    obs: ClassVar[str] = "images"

    _target_: str = key(
        "gpurl.envs.envpool.make_envpool_env", "the factory (gpurl/envs/envpool.py)"
    )
    name: str = name_key("envpool", "the run directory's label")
    game: str = key("Breakout-v5", "an envpool Atari id (<Game>-v5)")
    num_envs: int = key(8, "games stepped together (one envpool pool)", ge=1)
    eval_envs: int = key(8, "evaluation games: each plays one full game per evaluation", ge=1)
    max_episode_steps: int | None = key(
        27000,
        "agent steps a game may last (27,000 = 108,000 frames, the standard cap); null: 27000",
        ge=1,
    )
    episodic_life: bool = key(
        True, "a lost life ends an episode (the game goes on); evaluation scores full games"
    )
    reward_clip: bool = key(
        True, "train on the sign of the reward; info/score keeps the game's own"
    )
    noop_max: int = key(30, "up to this many no-op actions at the start of a game", ge=0)
    frame_skip: int = key(
        4, "each action repeated frame_skip frames; the frame is the max of the last two", ge=1
    )
    stack_num: int = key(4, "frames stacked in an observation", ge=1)
    img_size: int = key(84, "frames resized to img_size x img_size, grayscale", ge=1)
    repeat_action_probability: float = key(
        0.0,
        "sticky actions (0.25 is Machado et al.'s; 0 is CleanRL's envpool runs)",
        ge=0,
        le=1,
    )
    use_fire_reset: bool = key(True, "press FIRE at the start of each life in games that need it")
    full_action_space: bool = key(False, "false: the game's minimal action set")
    num_threads: int = key(0, "envpool's threads; 0: one per core", ge=0)
    collector: str = collector_key()
    validate_actions: bool = validate_actions_key()


@dataclass
class VMAS(Schema):
    """A VMAS scenario (vectorized multi-agent simulator, pure torch, on the run's device):
    every agent is one robot of gpurl's multi-robot agents (docs/envs/vmas.md). Needs the
    vmas extra: pip install -e '.[vmas]'. Scenario options go in as env.<option>, e.g.
      python -m gpurl.train env=vmas env.scenario=navigation +env.n_agents=3 agent=sac"""

    open: ClassVar[bool] = True  # the scenario's own options (n_agents, shared_rew, ...)
    obs: ClassVar[str] = "vector"

    _target_: str = key("gpurl.envs.vmas.make_vmas_env", "the factory (gpurl/envs/vmas.py)")
    name: str = name_key("vmas", "the run directory's label")
    num_envs: int = key(32, "VMAS envs stepped as one batch", ge=1)
    eval_envs: int = key(32, "evaluation copies (seed + 10,000), one greedy episode each", ge=1)
    validate_actions: bool = validate_actions_key()
    scenario: str = key(
        "navigation", "any VMAS scenario whose agents share one observation and action shape"
    )
    max_episode_steps: int = key(
        100, "episodes end truncated here (the replay bootstraps through it)", ge=1
    )
    continuous_actions: bool = key(
        True, "false: VMAS's discrete actions (navigation: 9 moves) for DQN-like agents"
    )
    collector: str = collector_key()


# Schemas by env.name (the key make_env dispatches on); YAML files by option name.
ENVS: dict[str, type] = {
    "cartpole": CartPole,
    "pendulum": Pendulum,
    "gym": Gym,
    "pixels": Pixels,
    "packing": Packing,
    "marinenav": MarineNav,
    "marinenav_continuous": MarineNav,
    "custom": Custom,
    "dmc": DMC,
    "envpool": Envpool,
    "vmas": VMAS,
}


# -- agent ----------------------------------------------------------------------------------


@dataclass
class Encoder(Schema):
    """Spec encoders (gpurl/policies/networks.py): how observations become features."""

    embed: int = key(0, "vector entries through Linear(d, embed)+ReLU; 0 = as they are", ge=0)
    object_embed: int = key(
        40, "each object slot of an object list through Linear(D, object_embed)+ReLU", ge=1
    )
    cnn: str = key(
        "nature",
        "images: nature (the Nature-DQN convolutions) | tile (8 x 8 tiles, then 3 x 3)",
        choices=CNN_KINDS,
    )
    cnn_features: int = key(512, "images: features out of the CNN", ge=1)
    init: str = key(
        "default",
        "images: the CNN's init: default (PyTorch's) | orthogonal (gain sqrt 2, CleanRL's PPO)",
        choices=INITS,
    )


def encoder_key():
    return group(Encoder, "spec encoders (gpurl/policies/networks.py)")


@dataclass
class OnPolicy(Schema):
    """The keys every on-policy agent reads (agents/base.OnPolicyAgent)."""

    open: ClassVar[bool] = True

    name: str = name_key("on_policy")
    lr: float = lr_key(2.5e-4)
    anneal_lr: bool = anneal_lr_key()
    gamma: float = gamma_key()
    epochs: int = epochs_key(1)
    minibatches: int = minibatches_key(1)
    bootstrap_truncated: bool = bootstrap_truncated_key()


@dataclass
class OffPolicy(Schema):
    """The keys every off-policy agent's replay reads (agents/base.OffPolicyAgent), unless
    the agent declares its replay itself."""

    open: ClassVar[bool] = True
    complete: ClassVar[bool] = False

    name: str = name_key("off_policy")
    gamma: float = gamma_key()
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()


@dataclass
class DQN(Schema):
    """DQN (gpurl/agents/dqn.py): Double-Q, dueling and noisy options, Polyak or hard
    targets, epsilon-greedy."""

    name: str = name_key("dqn")
    hidden: list[int] = hidden_key([256, 256])
    dueling: bool = key(False, "dueling heads: a state value plus action advantages")
    noisy_sigma0: float = key(
        0.0, "> 0: noisy layers (factorised, this sigma0; Rainbow 0.5), resampled per update", ge=0
    )
    double: bool = key(
        True, "Double-Q: the online net picks the next action, the target net values it"
    )
    lr: float = lr_key(5.0e-4)
    gamma: float = gamma_key()
    loss: str = key("huber", "huber | mse", choices=("huber", "mse"))
    max_grad_norm: float | None = max_grad_norm_key(10.0)
    target_update: str = target_update_key("polyak")
    tau: float = tau_key()
    target_update_interval: int = target_update_interval_key(500)
    epsilon_start: float = epsilon_start_key(1.0)
    epsilon_end: float = epsilon_end_key(0.05)
    epsilon_frames: int = epsilon_frames_key(10000)
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class Rainbow(Schema):
    """Rainbow (gpurl/agents/rainbow.py): noisy dueling C51, Double-Q, n-step, prioritized
    replay, with the MarineNav spec's settings as defaults."""

    name: str = name_key("rainbow")
    hidden: list[int] = hidden_key([128, 128])
    dueling: bool = key(True, "dueling heads: a state value plus action advantages")
    double: bool = key(
        True, "Double-Q: the online net picks a*, the target net's distribution at a*"
    )
    noisy_sigma0: float = key(
        0.05, "noisy layers' sigma0 (the spec's; Fortunato et al. use 0.5); 0 = none", ge=0
    )
    atoms: int = key(51, "points of the return distribution's support, v_min to v_max", ge=2)
    v_min: float = key(
        -30.0,
        "the support's lowest return",
        note=(
            "The support, sized to MarineNav's returns (the spec's FIX of the old [-1, 1]): a",
            "robot that arrives collects its start-goal progress (30-72 m, discounted: at most",
            "~60) plus +10; a robot that collides gets -5 and a timeout about -0.1 / (1 - gamma)",
            "= -10, and moving away from the goal costs what it loses in distance. Size it to",
            "your env's returns: targets beyond the support are clipped to its edge atoms.",
        ),
    )
    v_max: float = key(70.0, "the support's highest return (> v_min)")
    lr: float = lr_key(1.0e-4)
    gamma: float = gamma_key()
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    target_update: str = target_update_key("hard")
    tau: float = tau_key()
    target_update_interval: int = target_update_interval_key(10000)
    epsilon_start: float = epsilon_start_key(0.6)
    epsilon_end: float = epsilon_end_key(0.05)
    epsilon_frames: int = epsilon_frames_key(10000)
    n_step: int = n_step_key(3)
    prioritized: bool = prioritized_key(True)
    priority_alpha: float = priority_alpha_key(0.5)
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class IQN(Schema):
    """IQN (gpurl/agents/iqn.py), with the MarineNav spec's networks and settings as
    defaults."""

    name: str = name_key("iqn")
    hidden: list[int] = hidden_key(
        [128, 128], "widths after the quantile embedding x state feature product"
    )
    cos_embed: int = key(64, "cos(pi i tau), i = 0..cos_embed-1", ge=1)
    act_quantiles: int = key(32, "K: act on the mean of K quantiles", ge=1)
    eval_cvar: float = key(
        1.0,
        "greedy evaluation acts on CVaR_alpha (quantiles in (0, alpha)); 1: the mean",
        gt=0,
        le=1,
    )
    quantiles: int = key(8, "N online quantile samples per update", ge=1)
    target_quantiles: int = key(8, "N' target quantile samples", ge=1)
    kappa: float = key(1.0, "quantile Huber threshold", gt=0)
    lr: float = lr_key(1.0e-4)
    gamma: float = gamma_key()
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    target_update: str = target_update_key("hard")
    tau: float = tau_key()
    target_update_interval: int = target_update_interval_key(10000)
    epsilon_start: float = epsilon_start_key(0.6)
    epsilon_end: float = epsilon_end_key(0.05)
    epsilon_frames: int = epsilon_frames_key(10000)
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class ACIQN(Schema):
    """AC-IQN (gpurl/agents/acqin.py), with the MarineNav spec's networks and settings as
    defaults."""

    name: str = name_key("acqin")
    hidden: list[int] = hidden_key(
        [256, 128, 128], "actor: encoder -> these -> action_dim -> (2/pi) atan"
    )
    critic_width: int = key(
        128, "quantile-embedded state and action both projected to this width", ge=1
    )
    critic_hidden: list[int] = key(
        [128], "critic widths after their product, then -> 1 per quantile", ge=1
    )
    cos_embed: int = key(64, "cos(pi i tau), i = 0..cos_embed-1", ge=1)
    quantiles: int = key(8, "N online quantile samples per update", ge=1)
    target_quantiles: int = key(8, "N' target quantile samples", ge=1)
    kappa: float = key(1.0, "quantile Huber threshold", gt=0)
    actor_cvar: float = key(
        1.0, "the actor maximises CVaR_alpha of the critic's return (1: the mean)", gt=0, le=1
    )
    eval_search: int = key(
        0,
        "greedy evaluation: 0 acts with the actor; G >= 2 lets the critic "
        "pick among it and a G x G grid",
        ge=0,
    )
    eval_cvar: float = key(
        1.0, "... by CVaR_alpha of its return (quantiles in (0, alpha)); 1: the mean", gt=0, le=1
    )
    actor_lr: float = lr_key(1.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-4, "the critic's Adam learning rate")
    gamma: float = gamma_key()
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    target_update: str = target_update_key("hard")
    tau: float = tau_key()
    target_update_interval: int = target_update_interval_key(10000)
    epsilon_start: float = epsilon_start_key(0.6)
    epsilon_end: float = epsilon_end_key(0.05)
    epsilon_frames: int = epsilon_frames_key(10000)
    noise: str = key(
        "none", "action noise: gaussian | ou | none", choices=("gaussian", "ou", "none")
    )
    n_step: int = n_step_key(note=())
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


def noise_key():
    return key("gaussian", "action noise: gaussian | ou | none", choices=("gaussian", "ou", "none"))


def noise_start_key():
    return key(0.1, "noise std in the normalised action box [-1, 1]", ge=0)


def noise_end_key():
    return key(0.1, "noise std after noise_frames (linear in frames)", ge=0)


def noise_frames_key():
    return key(0, "frames over which the std goes from start to end", ge=0)


def ou_theta_key():
    return key(0.15, "ou: the pull back to 0 per step", ge=0)


@dataclass
class DDPG(Schema):
    """DDPG (gpurl/agents/ddpg.py): a deterministic actor and a Q critic, Polyak targets,
    action noise."""

    name: str = name_key("ddpg")
    hidden: list[int] = hidden_key([256, 256], "actor and critic hidden widths")
    squash: str = key(
        "tanh",
        "actor squash: tanh | atan ((2/pi) atan, the MarineNav spec's)",
        choices=tuple(SQUASHES),
    )
    critic_loss: str = key(
        "mse", "mse | huber (smooth-L1, the MarineNav spec's)", choices=("mse", "huber")
    )
    actor_lr: float = lr_key(3.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-3, "the critic's Adam learning rate")
    gamma: float = gamma_key()
    tau: float = tau_key()
    max_grad_norm: float | None = max_grad_norm_key(None)
    policy_delay: int = key(1, "critic updates per actor update", ge=1)
    noise: str = noise_key()
    noise_start: float = noise_start_key()
    noise_end: float = noise_end_key()
    noise_frames: int = noise_frames_key()
    ou_theta: float = ou_theta_key()
    epsilon_start: float = epsilon_start_key(0.0)
    epsilon_end: float = epsilon_end_key(0.0)
    epsilon_frames: int = epsilon_frames_key(0)
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class TD3(Schema):
    """TD3 (gpurl/agents/td3.py): DDPG with twin critics, delayed actor steps and target
    policy smoothing."""

    name: str = name_key("td3")
    hidden: list[int] = hidden_key([256, 256], "actor and critic hidden widths")
    squash: str = key(
        "tanh",
        "actor squash: tanh | atan ((2/pi) atan, the MarineNav spec's)",
        choices=tuple(SQUASHES),
    )
    critic_loss: str = key(
        "mse", "mse | huber (smooth-L1, the MarineNav spec's)", choices=("mse", "huber")
    )
    actor_lr: float = lr_key(3.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-3, "the critic's Adam learning rate")
    gamma: float = gamma_key()
    tau: float = tau_key()
    max_grad_norm: float | None = max_grad_norm_key(None)
    policy_delay: int = key(2, "critic updates per actor update", ge=1)
    target_noise: float = key(0.2, "std of the noise on the target action", ge=0)
    target_noise_clip: float = key(0.5, "the target noise is clipped to +- this", ge=0)
    noise: str = noise_key()
    noise_start: float = noise_start_key()
    noise_end: float = noise_end_key()
    noise_frames: int = noise_frames_key()
    ou_theta: float = ou_theta_key()
    epsilon_start: float = epsilon_start_key(0.0)
    epsilon_end: float = epsilon_end_key(0.0)
    epsilon_frames: int = epsilon_frames_key(0)
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class SAC(Schema):
    """SAC (gpurl/agents/sac.py): a tanh-Gaussian actor, twin critics and a learned
    temperature."""

    name: str = name_key("sac")
    hidden: list[int] = hidden_key([256, 256], "actor and critic hidden widths")
    actor_lr: float = lr_key(3.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-3, "the critics' Adam learning rate")
    alpha_lr: float = lr_key(1.0e-3, "the temperature's Adam learning rate")
    init_alpha: float = key(1.0, "the temperature it starts at", gt=0)
    gamma: float = gamma_key()
    tau: float = tau_key()
    max_grad_norm: float | None = max_grad_norm_key(None)
    epsilon_start: float = epsilon_start_key(0.0)
    epsilon_end: float = epsilon_end_key(0.0)
    epsilon_frames: int = epsilon_frames_key(0)
    n_step: int = n_step_key()
    prioritized: bool = prioritized_key()
    priority_alpha: float = priority_alpha_key()
    priority_beta_start: float = priority_beta_start_key()
    priority_beta_end: float = priority_beta_end_key()
    priority_beta_frames: int = priority_beta_frames_key()
    priority_sampler: str = priority_sampler_key()
    encoder: Encoder = encoder_key()


@dataclass
class PPO(Schema):
    """PPO (gpurl/agents/ppo.py), an on-policy agent. Defaults: CleanRL's ppo.py."""

    name: str = name_key("ppo")
    hidden: list[int] = hidden_key(
        [64, 64], "actor and critic each get their own trunk of these widths"
    )
    shared_encoder: bool = key(
        False,
        "true: one observation encoder (e.g. the CNN) for actor and critic, trained by both losses",
    )
    activation: str = key("tanh", "tanh | relu", choices=tuple(ACTIVATIONS))
    lr: float = lr_key(2.5e-4)
    anneal_lr: bool = anneal_lr_key()
    gamma: float = gamma_key()
    gae_lambda: float = key(0.95, "GAE lambda", ge=0, le=1)
    epochs: int = epochs_key(4)
    minibatches: int = minibatches_key(4)
    bootstrap_truncated: bool = bootstrap_truncated_key()
    clip_epsilon: float | None = key(0.2, "surrogate clip; null = none", gt=0)
    value_clip: float | None = key(
        0.2, "value-loss clip around the collection-time value; null = none", gt=0
    )
    normalize_advantage: bool = key(True, "per rollout: (A - mean) / std")
    entropy_coef: float = key(0.01, "weight of the entropy bonus", ge=0)
    value_coef: float = key(0.5, "weight of the value loss", ge=0)
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    init_log_std: float = key(0.0, "continuous actions: the state-independent log-std it starts at")
    critic: str = critic_key()
    encoder: Encoder = encoder_key()


@dataclass
class A2C(Schema):
    """A2C (gpurl/agents/a2c.py), an on-policy agent: PPO's actor-critic without clipping,
    one pass per rollout."""

    name: str = name_key("a2c")
    hidden: list[int] = hidden_key(
        [64, 64], "actor and critic each get their own trunk of these widths"
    )
    shared_encoder: bool = key(False, "true: one encoder for actor and critic (as in agent=ppo)")
    activation: str = key("tanh", "tanh | relu", choices=tuple(ACTIVATIONS))
    lr: float = lr_key(7.0e-4)
    anneal_lr: bool = anneal_lr_key(False)
    gamma: float = gamma_key()
    gae_lambda: float = key(1.0, "GAE lambda (1: the n-step return)", ge=0, le=1)
    epochs: int = epochs_key(1)
    minibatches: int = minibatches_key(1)
    bootstrap_truncated: bool = bootstrap_truncated_key()
    normalize_advantage: bool = key(False, "per rollout: (A - mean) / std")
    entropy_coef: float = key(0.01, "weight of the entropy bonus", ge=0)
    value_coef: float = key(0.5, "weight of the value loss", ge=0)
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    init_log_std: float = key(0.0, "continuous actions: the state-independent log-std it starts at")
    critic: str = critic_key()
    encoder: Encoder = encoder_key()


@dataclass
class PQN(Schema):
    """PQN (gpurl/agents/pqn.py), an on-policy agent. Defaults: the paper's CartPole
    settings (purejaxql), which the pqn_cartpole preset shortens."""

    name: str = name_key("pqn")
    hidden: list[int] = hidden_key([256, 256])
    layer_norm: bool = key(
        True, "LayerNorm after each hidden layer: what replaces the target network"
    )
    lr: float = lr_key(1.0e-4)
    anneal_lr: bool = anneal_lr_key()
    gamma: float = gamma_key()
    q_lambda: float = key(0.95, "Q(lambda) trace; 0 = one-step Q-learning targets", ge=0, le=1)
    reward_scale: float = key(0.1, "rewards are multiplied by this in the targets", gt=0)
    loss: str = key("mse", "mse (0.5 (Q - G)^2) | huber", choices=("mse", "huber"))
    max_grad_norm: float | None = max_grad_norm_key(10.0)
    epochs: int = epochs_key(4)
    minibatches: int = minibatches_key(16)
    bootstrap_truncated: bool = bootstrap_truncated_key()
    epsilon_start: float = epsilon_start_key(1.0)
    epsilon_end: float = epsilon_end_key(0.05)
    epsilon_frames: int = epsilon_frames_key(20000)
    encoder: Encoder = encoder_key()


@dataclass
class Manager(Schema):
    """The manager: a ResNet trunk over 7 maps, a scalar branch and an MLP head."""

    channels: list[int] = key([64, 128, 256, 512], "ResNet stage widths", ge=1, nonempty=True)
    blocks: list[int] = key(
        [2, 2, 2, 2], "residual blocks per stage (one per channels entry)", ge=1, nonempty=True
    )
    stem: int = key(64, "width of the stem convolution", ge=1)
    scalar_features: int = key(64, "the 8 candidate scalars through Linear(8, this)", ge=1)
    hidden: list[int] = key([128, 128], "head widths before the score", ge=1)


@dataclass
class Worker(Schema):
    """The worker: a U-Net over the maps, scoring each placement."""

    channels: list[int] = key([32, 64, 128, 256], "U-Net widths; [] = no U-Net", ge=1)
    corner_features: bool = key(
        True, "+ MLP over the placement's z and top relative to the pile's peak"
    )


@dataclass
class HRLDQN(Schema):
    """Hierarchical Double DQN for packing (gpurl/agents/hrl_dqn.py; Huang et al., RA-L
    2023; docs/envs/packing.md). Defaults are the task spec's: full-size networks, gamma
    0.95, Adam 1e-3 then 1e-4 at stage 2, grad-norm clip 1.0, hard target copies every 5
    episodes, epsilon(ep) = 0.1 + 0.8 exp(-ep / 60), stage 1 for 100 episodes, the manager
    learning every 4th episode. Episodes count rounds: progress.episodes / env.num_envs."""

    name: str = name_key("hrl_dqn")
    gamma: float = gamma_key(0.95)
    lr: float = lr_key(1.0e-3, "Adam learning rate of both networks in stage 1")
    lr_stage2: float = lr_key(1.0e-4, "both learning rates from stage 2 on")
    max_grad_norm: float | None = max_grad_norm_key(1.0)
    epsilon_floor: float = key(0.1, "epsilon(ep) = floor + scale exp(-ep / decay)", ge=0, le=1)
    epsilon_scale: float = key(0.8, "see epsilon_floor (floor + scale <= 1)", ge=0, le=1)
    epsilon_decay: float = key(60, "episode rounds", gt=0)
    stage1_episodes: int = key(
        100, "episode rounds of stage 1 (worker only, heuristic item order)", ge=0
    )
    manager_every: int = key(4, "stage 2: the manager learns during every n-th episode round", ge=1)
    target_every: int = key(5, "episode rounds between hard target copies", ge=1)
    manager_chunk: int = key(20, "candidates per manager pass (memory at R = 200)", ge=1)
    worker_chunk: int = key(
        6,
        "orientations per U-Net pass (memory at R = 200)",
        ge=1,
        note=(
            "On a CPU the seed benchmark's episode ran 21.2 s with worker_chunk 6 against 24.0 s",
            "with 24 (docs/benchmarks.md#packing-seed-benchmark).",
        ),
    )
    bf16: bool = key(
        False,
        "forward passes under bf16 autocast (CUDA, or a CPU with native bf16: AVX-512 BF16 / AMX)",
    )
    manager: Manager = group(
        Manager, "ResNet-18 trunk over 7 maps + 8 -> 64 scalar branch + 576 -> 128 -> 128 -> 1"
    )
    worker: Worker = group(
        Worker,
        "14-conv U-Net 32 -> 64 -> 128 -> 256 over the 3 maps + 3 "
        "placement maps, score at the exact cell",
    )


# Schemas by agent.name; every name of gpurl.agents.AGENTS has one (a test checks).
AGENTS_SCHEMA: dict[str, type] = {
    "dqn": DQN,
    "rainbow": Rainbow,
    "iqn": IQN,
    "acqin": ACIQN,
    "ddpg": DDPG,
    "td3": TD3,
    "sac": SAC,
    "ppo": PPO,
    "a2c": A2C,
    "pqn": PQN,
    "hrl_dqn": HRLDQN,
}


# -- trainer, logger, compile ---------------------------------------------------------------


@dataclass
class PerSeed(Schema):
    """Hyperparameters each run of trainer.num_seeds has of its own: a list of one value
    per seed replaces the agent's key for that run (null: every run takes the agent's)."""

    lr: list[float] | None = key(None, "agent.lr per run (dqn, ppo, a2c, pqn)", gt=0)
    actor_lr: list[float] | None = key(None, "agent.actor_lr per run (sac, td3, ddpg)", gt=0)
    critic_lr: list[float] | None = key(None, "agent.critic_lr per run (sac, td3, ddpg)", gt=0)
    alpha_lr: list[float] | None = key(None, "agent.alpha_lr per run (sac)", gt=0)
    gamma: list[float] | None = key(None, "agent.gamma per run", gt=0, le=1)
    entropy_coef: list[float] | None = key(None, "agent.entropy_coef per run (ppo, a2c)", ge=0)
    epsilon_start: list[float] | None = key(
        None, "agent.epsilon_start per run (epsilon-greedy)", ge=0, le=1
    )
    epsilon_end: list[float] | None = key(
        None, "agent.epsilon_end per run (epsilon-greedy)", ge=0, le=1
    )


@dataclass
class Trainer(Schema):
    """The training loop (gpurl/trainers/). The agent's kind picks the loop: off-policy
    agents learn from a replay (trainers/off_policy.py), on-policy ones from rollouts
    (trainers/on_policy.py). Frames count env steps over all envs (and torchrun's ranks)."""

    total_frames: int = key(40000, "frames to train for (the default run: DQN on CartPole)", ge=1)
    log_interval: int = key(
        2500, "frames between log lines (the only host reads of training metrics)", ge=1
    )
    eval_interval: int = key(
        2500, "frames between greedy evaluations on env.eval_envs copies", ge=1
    )
    stop_at_return: float | None = key(
        None,
        "end the run at the first evaluation whose greedy return reaches this (with "
        "trainer.num_seeds > 1, every run's); null: train to total_frames",
    )
    checkpoint_interval: int = key(10000, "frames between checkpoints (and one at the end)", ge=1)
    resume: str | None = key(None, "a checkpoint file or run directory to continue from")
    progress: bool = key(True, "tqdm progress bar")
    frames_per_batch: int | None = key(
        None,
        "frames between update rounds: null = one step of every env (env.num_envs); else "
        "a multiple of it",
        ge=1,
        note=("off-policy agents (dqn, iqn, rainbow, ddpg, td3, sac, acqin, hrl_dqn)",),
    )
    init_random_frames: int = key(1000, "uniform random actions and no updates before this", ge=0)
    utd: float = key(1.0, "gradient updates per collected frame", gt=0)
    batch_size: int = key(128, "the minibatch (over all ranks under torchrun)", ge=1)
    buffer_size: int = key(100000, "replay capacity in transitions (a robot's step is one)", ge=1)
    save_replay: bool = key(
        True, "keep the replay in checkpoints (exact resume); false for huge buffers"
    )
    rollout_steps: int = key(
        128,
        "T: steps per env per rollout (rollout_steps x env.num_envs frames)",
        ge=1,
        note=("on-policy agents (ppo, a2c, pqn; epochs and minibatches are the agent's)",),
    )
    num_seeds: int = key(
        1,
        "independent runs trained at once in this process, seeds seed..seed+N-1, each "
        "with its own env.num_envs envs, networks, optimizer, replay and evaluation",
        ge=1,
        note=("many seeds in one process (core/runs.py: dqn, ddpg, td3, sac, ppo, a2c, pqn)",),
    )
    per_seed: PerSeed = group(PerSeed, "per-run hyperparameters, a list of num_seeds values each")


def logger_key(value: str):
    return key(value, "csv | tensorboard | wandb | mlflow | none", choices=LOGGERS)


@dataclass
class Csv(Schema):
    """Scalars as CSV files under <run dir>/logs (TorchRL's CSVLogger)."""

    name: str = logger_key("csv")


@dataclass
class TensorBoard(Schema):
    """Scalars as TensorBoard event files under <run dir>/logs (pip install -e '.[loggers]')."""

    name: str = logger_key("tensorboard")


@dataclass
class NoLogger(Schema):
    """No scalars logged; the summary, curve and checkpoints are still written."""

    name: str = logger_key("none")


@dataclass
class MLflow(Schema):
    """MLflow through TorchRL's MLFlowLogger (pip install -e '.[mlflow]').
    Local by default: each run keeps its own SQLite store, <run dir>/logs/mlflow.db, and its
    artifacts in <run dir>/logs/mlartifacts/ (MLflow 3.10+ refuses the plain file store;
    SQLite needs no server). Browse it with
      mlflow ui --backend-store-uri sqlite:///<run dir>/logs/mlflow.db
    or point many runs at one store: logger.tracking_uri=sqlite:////abs/path/mlflow.db
    (one process at a time) or an MLflow server's http://host:port."""

    name: str = logger_key("mlflow")
    tracking_uri: str | None = key(None, "null: sqlite:///<run dir>/logs/mlflow.db")
    artifact_location: str | None = key(None, "null: <run dir>/logs/mlartifacts")
    experiment_name: str = key(
        "gpurl", "MLflow experiment; each run is named <agent>_<env>_s<seed>"
    )
    tags: dict = key({}, "experiment tags")
    telemetry: bool = key(False, "false sets MLFLOW_DISABLE_TELEMETRY (MLflow's usage reports)")


@dataclass
class Wandb(Schema):
    """Weights & Biases through TorchRL's WandbLogger (pip install -e '.[wandb]').
    Offline by default: no network and no login. The run is written to
    <run dir>/logs/wandb/offline-run-<time>-<id>/ and `wandb sync <that folder>` uploads it
    later; logger.mode=online streams it instead (after `wandb login`).
    Keys other than `name` and `dir` go to wandb.init (add more with +logger.notes=...)."""

    open: ClassVar[bool] = True  # further keys go to wandb.init

    name: str = logger_key("wandb")
    mode: str = key(
        "offline", "offline | online | disabled", choices=("offline", "online", "disabled")
    )
    project: str = key("gpurl", "the W&B project")
    entity: str | None = key(None, "your W&B user or team (online mode)")
    group: str | None = key(None, "e.g. a sweep's name, to group its runs")
    tags: list[str] = key([], "the run's tags")
    dir: str | None = key(None, "null: <run dir>/logs")


LOGGERS_SCHEMA: dict[str, type] = {
    "csv": Csv,
    "tensorboard": TensorBoard,
    "none": NoLogger,
    "mlflow": MLflow,
    "wandb": Wandb,
}


@dataclass
class Compile(Schema):
    """The default: nothing compiled (exactly reproducible runs, no compile time).
    Each switch can be set on its own: compile.update=true compile.amp=true ...
    See gpurl/trainers/compile.py and docs/scaling.md."""

    update: bool = key(False, "torch.compile each gradient step (forward, backward, optimizer)")
    policy: bool = key(False, "torch.compile the policy the collector acts with")
    env: bool = key(False, "the env's lean step through Inductor (native envs with a lean core)")
    cudagraphs: bool = key(
        False, "CUDA only: capture the steps and the acting policy as CUDA graphs"
    )
    amp: bool = key(False, "bf16 autocast of forward passes; fp32 weights and optimizer state")
    mode: str | None = key(
        None,
        "torch.compile mode (null: default; e.g. max-autotune-no-cudagraphs)",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    )
    warmup: int = key(3, "eager calls before a CUDA graph is captured", ge=1)


GROUPS = ("env", "agent", "trainer", "logger", "compile")

# The YAML file each schema writes: (group, option) -> class. Options not listed are
# presets (a defaults list over one of these: compile=full, env=marinenav_continuous) or
# open configs written by hand (a `_target_` env of a peer library).
YAML_FILES: dict[tuple[str, str], type] = {
    **{("env", k): v for k, v in ENVS.items() if k != "marinenav_continuous"},
    **{("agent", k): v for k, v in AGENTS_SCHEMA.items()},
    ("trainer", "default"): Trainer,
    **{("logger", k): v for k, v in LOGGERS_SCHEMA.items()},
    ("compile", "eager"): Compile,
}


# -- types and ranges -----------------------------------------------------------------------


def _optional(tp) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def type_name(tp) -> str:
    """How a type reads in a message or the help: "int", "list of int", "float or null"."""
    inner, nullable = _optional(tp)
    if is_dataclass(inner):
        text = "a block of keys"
    elif typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner) or (Any,)
        text = f"list of {type_name(item) if item is not dict else 'mappings'}"
    elif inner is dict or typing.get_origin(inner) is dict:
        text = "mapping"
    elif inner is Any:
        text = "any"
    else:
        text = inner.__name__
    return f"{text} or null" if nullable else text


def range_text(meta) -> str:
    """The range of a key as a short phrase: ">= 1", "in [0, 1]", "one of a, b"."""
    if meta.get("choices"):
        return "one of " + ", ".join(str(c) for c in meta["choices"])
    low = (meta.get("ge"), "[") if meta.get("ge") is not None else (meta.get("gt"), "(")
    high = (meta.get("le"), "]") if meta.get("le") is not None else (meta.get("lt"), ")")
    if low[0] is not None and high[0] is not None:
        return f"in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
    if low[0] is not None:
        return f"{'>=' if low[1] == '[' else '>'} {_num(low[0])}"
    if high[0] is not None:
        return f"{'<=' if high[1] == ']' else '<'} {_num(high[0])}"
    return ""


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def fits(meta, tp) -> str:
    """What fits a key, e.g. "an int >= 1", "a float in [0, 1] or null"."""
    inner, nullable = _optional(tp)
    rng = range_text(meta)
    if typing.get_origin(inner) is list:
        base = ("a non-empty " if meta.get("nonempty") else "a ") + type_name(inner)
        text = f"{base} (each {rng})" if rng and not meta.get("choices") else base
        if meta.get("choices"):
            text += f", each {rng}"
    elif inner is bool:
        text = "true or false"
    elif meta.get("choices"):
        text = rng
    else:
        article = "an" if type_name(inner)[0] in "aeiou" else "a"
        text = f"{article} {type_name(inner)}" + (f" {rng}" if rng else "")
    return text + (" or null" if nullable else "")


def _show(value) -> str:
    """A value as the command line writes it."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value).replace("'", "").replace(" ", "")


def _type_ok(value, tp) -> bool:
    if tp is Any:
        return True
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is dict or typing.get_origin(tp) is dict:
        return isinstance(value, dict)
    if typing.get_origin(tp) is list:
        (item,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if is_dataclass(tp):
        return isinstance(value, dict)
    raise TypeError(f"schema type {tp} is not supported")


def _in_range(x, meta) -> bool:
    if meta.get("choices") is not None:
        return x in meta["choices"]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return True
    checks = (("ge", operator.ge), ("gt", operator.gt), ("le", operator.le), ("lt", operator.lt))
    return all(meta.get(k) is None or op(x, meta[k]) for k, op in checks)


def check_value(path: str, value, tp, meta) -> None:
    """Raise a one-line ConfigError naming the key, what was given and what fits if `value`
    does not fit the key at `path`."""
    inner, nullable = _optional(tp)
    doc = f" ({meta['doc']})"
    if value == MISSING:
        raise ConfigError(f"{path} is not set: give {path}=<{fits(meta, tp)}>{doc}")
    if value is None:
        if nullable:
            return
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got null{doc}")
    if inner is int and isinstance(value, float) and value.is_integer():
        raise ConfigError(f"{path} must be an int, got {value}: write {path}={int(value)}")
    if meta.get("choices") and typing.get_origin(inner) is not list:
        if not _type_ok(value, inner) or value not in meta["choices"]:
            choices = ", ".join(str(c) for c in meta["choices"]) + (" or null" if nullable else "")
            if all(str(c) in meta["doc"] for c in meta["choices"]):
                doc = ""  # the doc lists the choices and nothing more
            raise ConfigError(
                f"{path}={_cli(value)} is unknown: {path} must be one of {choices}{doc}"
            )
        return
    if not _type_ok(value, inner):
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got {_show(value)}{doc}")
    if not isinstance(value, list):
        if not _in_range(value, meta):
            raise ConfigError(f"{path} must be {range_text(meta)}, got {value}{doc}")
        return
    if any(not _in_range(v, meta) for v in value) or (meta.get("nonempty") and not value):
        raise ConfigError(f"{path} must be {fits(meta, tp)}, got {_show(value)}{doc}")


def check_node(
    node: dict, schema, path: str, label: str, open_: bool = False, partial: bool = False
) -> None:
    """Check the keys of `node` (a plain dict) against a schema dataclass: each key's type
    and range, unknown keys (unless the schema, or `open_`, lets them through) and missing
    ones (if the schema is complete and not `partial`). `label` names the option in
    messages (agent=dqn)."""
    hints = typing.get_type_hints(schema)
    known = {f.name: f for f in fields(schema)}
    for k, value in node.items():
        full = f"{path}{k}"
        if k not in known:
            if schema.open or open_:
                continue
            close = difflib.get_close_matches(full, [f"{path}{n}" for n in known], n=1)
            hint = f"did you mean {close[0]}?" if close else "see python -m gpurl.train --help"
            raise ConfigError(f"unknown config key '{full}' for {label}: {hint}")
        tp = hints[k]
        if is_dataclass(tp) and isinstance(value, dict):
            # one's own module factory (agent.encoder._target_): its own keys pass to it,
            # gpurl's keys it may take are typed where given, none is required
            mine = "_target_" in value
            check_node(value, tp, f"{full}.", label, open_=mine, partial=mine)
        else:
            check_value(full, value, tp, known[k].metadata)
    if not schema.complete or partial:
        return
    for k, f in known.items():
        if k not in node:
            raise ConfigError(
                f"{path}{k} is missing from {label}: give {path}{k}=<{fits(f.metadata, hints[k])}>"
                f" ({f.metadata['doc']})"
            )


# -- which schema a config has --------------------------------------------------------------


def env_schema(env: dict):
    """The schema of an env config: its family's (a `_target_` config by its factory:
    env=dmc relabelled by env.name is still dmc); env=custom's for another `_target_`;
    the open Env for a factory of one's own under another name or a family registered
    without a schema here."""
    if "_target_" in env:
        for schema in ENVS.values():
            if _declared_default(schema, "_target_") == env["_target_"]:
                return schema
        return Custom if env.get("name") == "custom" else Env
    kind = env.get("name")
    if kind in ENVS:
        return ENVS[kind]
    if kind in NATIVE_ENVS:
        return Env
    known = ", ".join(sorted({*NATIVE_ENVS, *ENVS}))
    raise ConfigError(f"unknown env '{kind}' (env.name): choose one of {known}")


def _declared_default(schema, name: str):
    """The default a schema declares for a key, or None if it has no such key."""
    return next((f.default for f in fields(schema) if f.name == name), None)


def agent_kind(agent: dict):
    """The Agent class an agent config builds (gpurl.agents.agent_class: its `_target_`,
    else its registered name; an unknown name or a broken path is a one-line error)."""
    if agent.get("_target_") == MISSING:
        raise ConfigError(
            "agent._target_ is not set: give agent._target_=my_package.MyAgent (an "
            "OffPolicyAgent or OnPolicyAgent subclass)"
        )
    return agent_class(agent)


def agent_schema(agent: dict, cls):
    """The schema of an agent config: the nearest registered agent's among the class and
    its bases (a `_target_` subclass of a gpurl agent keeps its keys, whatever its
    name); otherwise the schema of its kind."""
    registered = {c: k for k, c in AGENTS.items() if k in AGENTS_SCHEMA}
    for base in cls.__mro__:
        if base in registered:
            return AGENTS_SCHEMA[registered[base]]
    if issubclass(cls, OnPolicyAgent):
        return OnPolicy
    if issubclass(cls, OffPolicyAgent):
        return OffPolicy
    return _AnyAgent


@dataclass
class _AnyAgent(Schema):
    """An agent of neither kind (its class says so when it is built)."""

    open: ClassVar[bool] = True
    complete: ClassVar[bool] = False

    name: str = name_key("agent")


def logger_schema(logger: dict):
    kind = logger.get("name")
    if kind not in LOGGERS_SCHEMA:
        raise ConfigError(
            f"unknown logger '{kind}' (logger.name): use logger={', logger='.join(LOGGERS)}"
        )
    return LOGGERS_SCHEMA[kind]


# -- the check ------------------------------------------------------------------------------


def as_plain(cfg) -> dict:
    """`cfg` as plain Python values, interpolations resolved, `???` kept."""
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        except OmegaConfBaseException as err:
            raise ConfigError(f"config value cannot be resolved: {_first_line(err)}") from err
    return copy.deepcopy(dict(cfg))


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def check_config(cfg) -> None:
    """Raise ConfigError (one line) at the first key of a composed config that does not
    fit the schema, or at keys that contradict each other; return None if all fit."""
    data = as_plain(cfg)
    roots = {f.name for f in fields(Root)}
    for k in data:
        if k not in roots and k not in GROUPS:
            close = difflib.get_close_matches(k, [*roots, *GROUPS], n=1)
            hint = f"did you mean {close[0]}?" if close else "see python -m gpurl.train --help"
            raise ConfigError(f"unknown config key '{k}': {hint}")
    for g in ("env", "agent", "trainer"):
        if not isinstance(data.get(g), dict):
            raise ConfigError(
                f"the config has no {g} group: compose it with gpurl.train.load_config"
            )
    check_node({k: v for k, v in data.items() if k in roots}, Root, "", "the top level")
    device = _check_device(data.get("device", "auto"))

    env = data["env"]
    if not isinstance(env.get("name"), str):
        raise ConfigError(f"env.name={_show(env.get('name'))}: env.name must be a string")
    env_cls = env_schema(env)
    check_node(env, env_cls, "env.", f"env={env['name']}")

    agent = data["agent"]
    if not isinstance(agent.get("name"), str):
        raise ConfigError(f"agent.name={_show(agent.get('name'))}: agent.name must be a string")
    cls = agent_kind(agent)
    # a `_target_` class's own keys pass through to it
    check_node(
        agent,
        agent_schema(agent, cls),
        "agent.",
        f"agent={agent['name']}",
        open_="_target_" in agent,
    )

    check_node(data["trainer"], Trainer, "trainer.", "the trainer")
    logger = data.get("logger", {"name": "csv"})
    if isinstance(logger, str):
        logger = {"name": logger}
    check_node(logger, logger_schema(logger), "logger.", f"logger={logger.get('name')}")
    comp = data.get("compile") or {}
    check_node({**_defaults(Compile), **comp}, Compile, "compile.", "compile")

    _check_together(data, env_cls, cls, device)


def _defaults(schema) -> dict:
    return dataclasses.asdict(schema())


def _check_device(name) -> torch.device:
    if not isinstance(name, str):
        raise ConfigError(f"device={_show(name)}: device must be auto, cpu, cuda or cuda:N")
    device = resolve_device(name)  # its ConfigError names the device and what fits
    if device.type == "cuda" and device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            raise ConfigError(
                f"device={name}: this machine has {count} CUDA device(s): use device=cuda or "
                f"cuda:0..cuda:{count - 1}"
            )
    return device


def _check_together(data: dict, env_cls, agent_cls, device: torch.device) -> None:
    """The cross-key checks: what each key may be given what the others are."""
    env, agent, t = data["env"], data["agent"], data["trainer"]
    comp = data.get("compile") or {}
    if comp.get("cudagraphs") and device.type != "cuda":
        raise ConfigError(
            f"compile.cudagraphs needs a CUDA device, this run is on {device}: "
            "set device=cuda or compile.cudagraphs=false"
        )
    _check_agent_keys(agent)
    _check_network(agent, env_cls)
    # The budget and batch checks need the env's batch: env.num_envs is it for gpurl's own
    # families; a `_target_` factory of one's own may build a batch of its own size.
    if not env_cls.batch_is_num_envs or not issubclass(agent_cls, OnPolicyAgent | OffPolicyAgent):
        return
    n = int(env["num_envs"])
    total = int(t["total_frames"])
    if issubclass(agent_cls, OnPolicyAgent):
        rollout = n * int(t["rollout_steps"])
        if total < rollout:
            raise ConfigError(
                f"trainer.total_frames={total} is less than one rollout: env.num_envs x "
                f"trainer.rollout_steps = {n} x {t['rollout_steps']} = {rollout} frames; "
                f"raise trainer.total_frames to >= {rollout} or lower env.num_envs or "
                f"trainer.rollout_steps"
            )
        mb = agent.get("minibatches")
        if isinstance(mb, int) and rollout % mb:
            raise ConfigError(
                f"agent.minibatches={mb} does not divide trainer.rollout_steps x env.num_envs "
                f"= {rollout}: pick a divisor"
            )
        return
    fpb = t.get("frames_per_batch")
    if fpb is not None and fpb % n:
        raise ConfigError(
            f"trainer.frames_per_batch={fpb} is not a multiple of env.num_envs={n}: each "
            f"batch is whole steps of every env; use {max(n, fpb - fpb % n)} or {fpb - fpb % n + n}"
        )
    batch = fpb or n
    if total < batch:
        raise ConfigError(
            f"trainer.total_frames={total} is less than one batch of {batch} frames "
            f"(trainer.frames_per_batch, or env.num_envs={n}): raise trainer.total_frames "
            f"to >= {batch}"
        )
    if int(t["batch_size"]) > int(t["buffer_size"]):
        raise ConfigError(
            f"trainer.batch_size={t['batch_size']} is larger than the replay, "
            f"trainer.buffer_size={t['buffer_size']}: lower the batch or raise the buffer"
        )


def _check_agent_keys(agent: dict) -> None:
    """Keys of one agent that must agree with each other."""
    if "v_min" in agent and "v_max" in agent and not agent["v_min"] < agent["v_max"]:
        raise ConfigError(
            f"agent.v_min={agent['v_min']} must be below agent.v_max={agent['v_max']}: the "
            f"return distribution's support runs from v_min to v_max"
        )
    if agent.get("eval_search") == 1:
        raise ConfigError(
            "agent.eval_search=1: use 0 (act with the actor) or a grid of G >= 2 points a side"
        )
    manager = agent.get("manager")
    if isinstance(manager, dict) and len(manager.get("channels", [])) != len(
        manager.get("blocks", [])
    ):
        raise ConfigError(
            f"agent.manager.channels={_show(manager['channels'])} and agent.manager.blocks="
            f"{_show(manager['blocks'])} must have one entry per ResNet stage each"
        )
    floor, scale = agent.get("epsilon_floor"), agent.get("epsilon_scale")
    if isinstance(floor, float) and isinstance(scale, float) and floor + scale > 1:
        raise ConfigError(
            f"agent.epsilon_floor + agent.epsilon_scale = {floor + scale} is above 1: "
            f"epsilon is a probability"
        )


def _check_network(agent: dict, env_cls) -> None:
    """An empty `hidden` leaves a vector observation one linear map from the output: no
    network to learn with. It fits where an encoder learns features (images, object
    slots, agent.encoder.embed > 0, an encoder of one's own)."""
    if agent.get("hidden") != [] or env_cls.obs != "vector":
        return
    enc = agent.get("encoder") or {}
    if "_target_" in enc or (enc.get("embed") or 0) > 0:
        return
    raise ConfigError(
        "agent.hidden=[]: this env's observation is a vector, so the network would be one "
        "linear map; give hidden widths, e.g. agent.hidden=[64,64] (or agent.encoder.embed > 0)"
    )


# -- introspection: the reference, the help, the YAML ---------------------------------------


@dataclass(frozen=True)
class KeyDoc:
    """One key of one option, as the docs' configuration reference lists it."""

    group: str  # "" for the top level
    option: str  # the option's name (dqn, cartpole, default)
    path: str  # the key as an override writes it: agent.encoder.embed
    type: str
    range: str
    default: Any
    doc: str


def keys_of(schema, prefix: str = "") -> list[tuple[str, Any, Any, dict]]:
    """(path, type, default, metadata) of every key of a schema, nested blocks flattened."""
    hints = typing.get_type_hints(schema)
    out = []
    defaults = dataclasses.asdict(schema())
    for f in fields(schema):
        tp = hints[f.name]
        if is_dataclass(tp):
            out += keys_of(tp, f"{prefix}{f.name}.")
        else:
            out.append((f"{prefix}{f.name}", tp, defaults[f.name], dict(f.metadata)))
    return out


def options() -> list[tuple[str, str, type]]:
    """(group, option, schema) of every option with a schema, the top level first."""
    out = [("", "", Root)]
    for (g, option), schema in YAML_FILES.items():
        out.append((g, option, schema))
    out.append(("env", "marinenav_continuous", MarineNav))
    return out


def reference() -> list[KeyDoc]:
    """Every key of every group option: type, range, default and doc (the docs site's
    configuration reference is generated from this)."""
    rows = []
    for g, option, schema in options():
        for path, tp, default, meta in keys_of(schema):
            rows.append(
                KeyDoc(
                    g,
                    option,
                    f"{g}.{path}" if g else path,
                    type_name(tp),
                    range_text(meta),
                    default,
                    meta["doc"],
                )
            )
    return rows


def group_options(g: str) -> list[str]:
    """The options of a config group: its YAML files (shared includes, _*.yaml, left out)."""
    return sorted(p.stem for p in (CONFIGS / g).glob("*.yaml") if not p.stem.startswith("_"))


def help_text(cfg, choices: dict[str, str]) -> str:
    """`python -m gpurl.train --help`: the groups and their options, then every key of
    the chosen options with its current value, type and range, and doc."""
    import textwrap

    data = as_plain(cfg)
    lines = [
        "usage: python -m gpurl.train [GROUP=OPTION ...] [KEY=VALUE ...] [-m] [--cfg job]",
        "",
        "Groups (GROUP=OPTION), the default first:",
    ]
    first = {
        "env": "cartpole",
        "agent": "dqn",
        "trainer": "default",
        "logger": "csv",
        "compile": "eager",
        "experiment": "none",
    }
    for g, default in first.items():
        names = [default] + [o for o in group_options(g) if o != default]
        text = textwrap.fill(
            ", ".join(names), 100, initial_indent=f"  {g:<12}", subsequent_indent=" " * 14
        )
        lines.append(text)
    chosen = " ".join(f"{g}={v}" for g, v in choices.items()) or "the defaults"
    lines += ["", f"Keys of {chosen}; put GROUP=OPTION before --help for another's:"]

    def block(title, node, schema, prefix):
        rows = [
            (f"{prefix}{path}={_cli(_lookup(node, path))}", _kind(tp, meta), meta["doc"])
            for path, tp, _, meta in keys_of(schema)
        ]
        declared = {f.name for f in fields(schema)}
        rows += [
            (f"{prefix}{k}={_cli(v)}", "", "passed on as it is")
            for k, v in node.items()
            if k not in declared
        ]
        left = min(max(len(r[0]) for r in rows), 36)
        middle = min(max(len(r[1]) for r in rows), 18)
        lines.append(title)
        lines.extend(f"  {a:<{left}}  {b:<{middle}}  {c}".rstrip() for a, b, c in rows)

    def schema_or(open_schema, find, node):
        try:
            return find(node)
        except ConfigError:  # agent=custom before its _target_ is given
            return open_schema

    roots = {f.name for f in fields(Root)}
    block("top level", {k: v for k, v in data.items() if k in roots}, Root, "")
    env = data["env"]
    block(f"env={env.get('name')}", env, schema_or(Env, env_schema, env), "env.")
    agent = data["agent"]
    find_agent = lambda a: agent_schema(a, agent_kind(a))  # noqa: E731
    block(f"agent={agent.get('name')}", agent, schema_or(_AnyAgent, find_agent, agent), "agent.")
    block("trainer", data["trainer"], Trainer, "trainer.")
    logger = data.get("logger", {"name": "csv"})
    block(f"logger={logger.get('name')}", logger, schema_or(Csv, logger_schema, logger), "logger.")
    block("compile", data.get("compile") or _defaults(Compile), Compile, "compile.")
    lines += ["", "Hydra's own: --cfg job (the composed config), --info, --hydra-help."]
    return "\n".join(lines)


def _kind(tp, meta) -> str:
    """A key's type and range for the help: "int >= 1", "huber|mse", "[int >= 1]"."""
    inner, nullable = _optional(tp)
    rng = range_text(meta)
    if meta.get("choices") and inner is str:
        text = "|".join(str(c) for c in meta["choices"])
    elif typing.get_origin(inner) is list:
        item = type_name(inner).removeprefix("list of ")
        text = f"[{item}{' ' + rng if rng and not meta.get('choices') else ''}]"
    else:
        text = type_name(inner) + (f" {rng}" if rng else "")
    return f"{text}|null" if nullable else text


def _cli(value) -> str:
    """A value as the command line writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        return str(value).replace("'", "").replace(" ", "")
    return str(value)


def _lookup(node: dict, path: str):
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _yaml_scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value and abs(value) < 0.002:  # learning rates read best as 2.5e-4
            mantissa, exp = f"{value:e}".split("e")
            mantissa = mantissa.rstrip("0")
            return f"{mantissa}{'0' if mantissa.endswith('.') else ''}e{int(exp)}"
        return repr(value)
    if isinstance(value, str):
        plain = value and value not in ("null", "true", "false", "yes", "no", "on", "off")
        if plain and not any(c in value for c in ":#{}[],&*!|>'\"%@`") and value.strip() == value:
            return value
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in value.items()) + "}"
    return str(value)


def yaml_text(schema) -> str:
    """The YAML file of a schema: its docstring as the header, then its keys."""
    header = [f"# {line}".rstrip() for line in (inspect.getdoc(schema) or "").splitlines()]
    header.append("# Keys, types and ranges: gpurl/schema.py (python -m gpurl.schema --write)")
    return "\n".join(header) + "\n" + yaml_keys(schema)


def yaml_keys(schema) -> str:
    """A schema's keys as YAML: each with its default and its doc as the comment, notes
    above keys, nested blocks indented (config.yaml holds Root's keys as this writes them)."""
    rows: list[tuple[str, str | None]] = []

    def walk(cls, indent):
        hints = typing.get_type_hints(cls)
        defaults = dataclasses.asdict(cls())
        pad = " " * indent
        for f in fields(cls):
            meta = f.metadata
            rows.extend((f"{pad}# {line}", None) for line in meta.get("note", ()))
            tp, value = hints[f.name], defaults[f.name]
            if is_dataclass(tp):
                rows.append((f"{pad}{f.name}:", meta["doc"]))
                walk(tp, indent + 2)
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                rows.append((f"{pad}{f.name}:", meta["doc"]))
                rows.extend((f"{pad}  - {_yaml_scalar(v)}", None) for v in value)
            else:
                rows.append((f"{pad}{f.name}: {_yaml_scalar(value)}", meta["doc"]))

    walk(schema, 0)
    column = min(max(len(t) for t, c in rows if c), 30)
    lines = [f"{text.ljust(column)}  # {comment}" if comment else text for text, comment in rows]
    return "\n".join(lines) + "\n"


def write_yaml(check: bool = False) -> list[Path]:
    """Write (or with check=True, only list) the group option files that differ from
    their schema. Returns the files that differed."""
    stale = []
    for (g, option), schema in YAML_FILES.items():
        path = CONFIGS / g / f"{option}.yaml"
        text = yaml_text(schema)
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    return stale


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for p in write_yaml():
            print(f"wrote {p}")
    elif sys.argv[1:] == ["--check"]:
        stale = write_yaml(check=True)
        for p in stale:
            print(f"stale: {p}")
        sys.exit(1 if stale else 0)
    else:
        print("python -m gpurl.schema --write | --check  (the group YAML files from the schema)")
