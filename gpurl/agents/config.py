"""The keys agents share, declared once. An agent's config (beside its class) subclasses
its kind's base, OffPolicyConfig or OnPolicyConfig, and the key sets it has
(TargetNetworkKeys, EpsilonGreedyKeys), changing their defaults with `declare(...)`.

The kind bases double as the check of an agent registered without keys of its own, or
one of one's own by `_target_`: the keys its kind's trainer reads are typed and ranged,
the others pass to the class."""

from __future__ import annotations

from dataclasses import dataclass

from gpurl.core.config import Schema, declare, group, key
from gpurl.policies.networks import EncoderConfig
from gpurl.policies.recurrent import RECURRENT_KINDS


def hidden_key(default: list[int], doc: str = "hidden layer widths after the encoder"):
    return key(default, doc, ge=1)


def lr_key(default: float, doc: str = "Adam learning rate"):
    return key(default, doc, gt=0)


def gamma_key(default: float = 0.99):
    return key(default, "discount per step", ge=0, le=1)


def max_grad_norm_key(default: float | None):
    return key(default, "gradient-norm clip; null = no clipping", gt=0)


def recurrent_key(trained: str, **meta):
    """agent.recurrent: null, or the kind of one recurrent layer (`trained`: how it
    learns, for the key's doc)."""
    return key(
        None, f"null | lstm | gru: one recurrent layer {trained}", choices=RECURRENT_KINDS, **meta
    )


def recurrent_hidden_key():
    return key(128, "the recurrent layer's hidden units", ge=1)


def rollout_sequence_key():
    """agent.sequence_length of the on-policy agents: how long the sequences their
    recurrent core is replayed over are (trainers/on_policy.py)."""
    return key(
        None,
        "with agent.recurrent: steps per trained sequence, each replayed from the state the "
        "rollout stored at its first step; must divide trainer.rollout_steps; null = the "
        "whole rollout. Shorter sequences replay faster; no gradient crosses their starts",
        ge=1,
    )


def tau_key(default: float = 0.005):
    return key(default, "Polyak rate per update: target += tau (online - target)", gt=0, le=1)


def encoder_key():
    return group(EncoderConfig, "spec encoders (gpurl/policies/networks.py)")


@dataclass
class AgentConfig(Schema):
    """The key every agent config has."""

    own_keys_first = True  # the algorithm's keys, then those of its kind

    name: str = key("agent", "the option this config is (the registry name)")


@dataclass
class OffPolicyConfig(AgentConfig):
    """The keys every off-policy agent's replay reads (agents/base.OffPolicyAgent), unless
    the agent declares its replay itself."""

    gamma: float = gamma_key()
    n_step: int = key(
        1,
        "n-step returns, cut at episode ends, per (env, robot) stream",
        ge=1,
        note=("replay the agent declares (gpurl/trainers/replay.py)",),
    )
    prioritized: bool = key(False, "proportional prioritized replay (p = |TD error|)")
    priority_alpha: float = key(0.6, "priority exponent: p^alpha (0 = uniform)", ge=0, le=1)
    priority_beta_start: float = key(
        0.4, "importance-weight exponent, annealed to priority_beta_end", ge=0, le=1
    )
    priority_beta_end: float = key(
        1.0, "importance-weight exponent at the end of the annealing", ge=0, le=1
    )
    priority_beta_frames: int = key(0, "frames of the annealing; 0 = the whole run", ge=0)
    priority_sampler: str = key(
        "auto",
        "auto (cumsum on CUDA and below 700k entries on CPU) | sumtree | cumsum",
        choices=("auto", "sumtree", "cumsum"),
    )


@dataclass
class OnPolicyConfig(AgentConfig):
    """The keys every on-policy agent reads (agents/base.OnPolicyAgent)."""

    lr: float = lr_key(2.5e-4)
    anneal_lr: bool = key(True, "anneal the learning rate linearly to 0 over trainer.total_frames")
    gamma: float = gamma_key()
    epochs: int = key(1, "passes over each rollout", ge=1)
    minibatches: int = key(
        1, "minibatches per pass; must divide trainer.rollout_steps x env.num_envs", ge=1
    )
    bootstrap_truncated: bool = key(
        True,
        "a truncated episode bootstraps from the next state's value (keeps next "
        "observations); false treats truncation as an end",
    )


@dataclass
class TargetNetworkKeys(Schema):
    """A target network, updated by Polyak averaging or hard copies."""

    target_update: str = key(
        "polyak",
        "target network: polyak (every update, tau) | hard (copies)",
        choices=("polyak", "hard"),
    )
    tau: float = tau_key()
    target_update_interval: int = key(500, "updates between hard target copies", ge=1)


@dataclass
class EpsilonGreedyKeys(Schema):
    """Epsilon-greedy exploration, linear in frames."""

    epsilon_start: float = key(
        1.0, "epsilon-greedy: probability of a uniform random action at frame 0", ge=0, le=1
    )
    epsilon_end: float = key(0.05, "epsilon after epsilon_frames (linear in frames)", ge=0, le=1)
    epsilon_frames: int = key(10000, "frames over which epsilon goes from start to end", ge=0)


@declare(epsilon_start=0.0, epsilon_end=0.0, epsilon_frames=0)
class ContinuousOffPolicyConfig(EpsilonGreedyKeys, OffPolicyConfig):
    """The keys of the off-policy actor-critics for continuous actions (DDPG, TD3, SAC):
    epsilon-greedy stays off unless asked for."""

    hidden: list[int] = hidden_key([256, 256], "actor and critic hidden widths")
    actor_lr: float = lr_key(3.0e-4, "the actor's Adam learning rate")
    critic_lr: float = lr_key(1.0e-3, "the critic's Adam learning rate")
    tau: float = tau_key()
    max_grad_norm: float | None = max_grad_norm_key(None)
    encoder: EncoderConfig = encoder_key()


@dataclass
class QLearningConfig(TargetNetworkKeys, EpsilonGreedyKeys, OffPolicyConfig):
    """The keys of gpurl's Q-learning agents (DQN, Rainbow, IQN): the network's widths,
    its Adam and clip, a target network and epsilon-greedy exploration."""

    hidden: list[int] = hidden_key([256, 256])
    lr: float = lr_key(5.0e-4, "learning rate (Adam's; DQN: agent.optimizer's)")
    max_grad_norm: float | None = max_grad_norm_key(10.0)
    encoder: EncoderConfig = encoder_key()


@dataclass
class SequenceReplayKeys(Schema):
    """The keys of a recurrent Q-learner's sequence replay (R2D2: DQN and IQN): how long
    its replayed sequences are, their burn-in and overlap, and their priorities.
    `agent.recurrent` itself is each agent's own key (its doc says where the core sits)."""

    recurrent_hidden: int = recurrent_hidden_key()
    sequence_length: int = key(
        40, "trained steps per replayed sequence (R2D2: 80; halved for small tasks)", ge=1
    )
    burn_in: int = key(
        20,
        "steps before the trained ones that only warm the stored state up, no gradient (R2D2: 40)",
        ge=0,
    )
    sequence_overlap: int = key(
        40,
        "rows shared by adjacent sequences: starts are burn_in + sequence_length - overlap "
        "apart (R2D2: trained parts overlap by half)",
        ge=0,
    )
    priority_eta: float = key(
        0.9, "a sequence's priority: eta max |TD| + (1 - eta) mean |TD|", ge=0, le=1
    )
