"""PPO (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus.

The actor (categorical logits, or a clipped Gaussian with a state-independent log-std
for continuous actions) and the critic V(s) have separate trunks, as in CleanRL's
ppo.py; one Adam optimiser steps both. With `agent.shared_encoder` they share one
encoder (CleanRL's ppo_atari.py shares its CNN): it runs once per acting step and once
per minibatch, and both losses train it.

The on-policy trainer (trainers/on_policy.py) collects a rollout with the policy, which
stores "sample_log_prob" and "state_value" beside each action; `compute_targets` turns
it into GAE advantages (normalised over the rollout with agent.normalize_advantage)
and value targets (advantage + value); the trainer then hands `update` shuffled
minibatches of the observation entries, "action" (env-scaled), the stored log-prob and
value, "advantage" and "value_target".

The losses are pure functions below (ppo_policy_loss, ppo_value_loss), each checked on
hand-computed numbers in tests/test_on_policy.py, as are the targets. A2C (a2c.py) is
this agent without clipping, one pass per rollout.

Multi-robot envs (MarineNav, VMAS: robots in a group dim under "agents"): one actor and
one critic shared by every robot, each robot's reward and done flags its own, and a
sample of the minibatches is one (time, env) step carrying all of its robots, [R, ...].

- IPPO (agent.critic=local, the default): the critic values robot i from robot i's own
  observation, as the actor acts on it.
- MAPPO (agent.critic=central): the critic values robot i from the whole group's
  observations and robot i's index (policies/central.py); the actor is unchanged.

Recurrent PPO and A2C (agent.recurrent=lstm | gru): one encoder and one recurrent core
(policies/recurrent.py, agent.recurrent_hidden units) shared by the actor and the critic,
whose trunks read the core's output (CleanRL's ppo_atari_lstm.py; agent.shared_encoder
is then implied), or with agent.critic_recurrent a layer each (the core in two parts,
each trunk reading its own). The acting policy carries the hidden state per env and
writes the state each step began with into the rollout (RECURRENT_STATE); the trainer
deals whole sequences to the minibatches, each env's rollout or pieces of
agent.sequence_length steps of it (trainers/on_policy.py), and `learn` replays the core
over each from the state stored at its first step, zeroing it after every step where
the episode ended. The
bootstrap values of the next observations are read off the stored states in one batched
step (`next_values`).

GAE runs per robot over the rollout [T, N, R] (core/returns.gae) with the env's
validity mask (EnvInfo.valid_key, MarineNav's ("agents", "running")): a step where the
robot was not running (it stopped earlier in its episode, or its slot is empty) has no
advantage and passes no trace, so nothing is bootstrapped across it; those steps are
left out of the advantage normalisation and weigh 0 in every loss and metric (means
over the running robots' steps). VMAS declares no mask: every robot counts at every
step. Single-agent envs take the same code without a mask, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from tensordict import TensorDict
from torch import Tensor, nn

from gpurl.agents.base import OnPolicyAgent, clip_and_step, make_optimizer, scalars
from gpurl.agents.config import (
    OnPolicyConfig,
    encoder_key,
    hidden_key,
    max_grad_norm_key,
    recurrent_hidden_key,
    recurrent_key,
    rollout_sequence_key,
)
from gpurl.core.compile import EAGER
from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.core.returns import gae
from gpurl.core.runs import balance_runs
from gpurl.errors import ConfigError
from gpurl.policies import (
    LOG_PROB,
    VALUE,
    CategoricalActor,
    CentralEncoder,
    ClippedGaussianActor,
    PolicyWrapper,
    SharedFeatures,
    ValueNetwork,
    make_encoder,
    with_features,
)
from gpurl.policies.networks import EncoderConfig, RewardScale
from gpurl.policies.recurrent import (
    RecurrentCore,
    features_from,
    next_features,
    replay,
)

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
CRITICS = ("local", "central")


def masked_mean(x: Tensor, weight: Tensor | None = None) -> Tensor:
    """mean(x), or the weight-weighted mean where weight > 0 (a 0/1 mask: a stopped
    robot's step is no sample; N runs rescale it: core/runs.balance_runs). An all-zero
    weight gives 0."""
    if weight is None:
        return x.mean()
    return torch.where(weight > 0, x * weight, 0.0).sum() / weight.sum().clamp(min=1.0)


def ppo_policy_loss(
    ratio: Tensor,
    advantage: Tensor,
    clip: float | Tensor | None,
    weight: Tensor | None = None,
    clipped: Tensor | None = None,
) -> Tensor:
    """mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))); no clipping when clip is None
    (then the gradient at r = 1 is A grad log pi, the plain policy gradient of A2C).
    The mean is over the entries where `weight` is 1 when given (masked_mean).
    `clipped` is clip(r, 1 - eps, 1 + eps) when the caller has it already."""
    gain = advantage * ratio
    if clip is not None:
        if clipped is None:
            clipped = ratio.clamp(1.0 - clip, 1.0 + clip)
        gain = torch.minimum(gain, advantage * clipped)
    return -masked_mean(gain, weight)  # negated once, after the mean


def ppo_value_loss(
    value: Tensor,
    old_value: Tensor,
    target: Tensor,
    clip: float | None,
    weight: Tensor | None = None,
) -> Tensor:
    """0.5 mean((V - R)^2), or with clipping 0.5 mean(max((V - R)^2, (V_clip - R)^2)),
    V_clip = V_old + clip(V - V_old, -eps, eps); over `weight`'s entries when given."""
    loss = (value - target).square()
    if clip is not None:
        clipped = old_value + (value - old_value).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - target).square())
    return 0.5 * masked_mean(loss, weight)


def normalize_advantage(
    advantage: Tensor, eps: float = 1e-8, valid: Tensor | None = None, runs: int = 1
) -> Tensor:
    """(A - mean) / (std + eps), in place, on the device; mean and (unbiased) std over
    the entries where `valid` (bool) is True when given; over a rollout [T, N x E, ...]
    of N runs (core/runs.py), each run's statistics its own."""
    if runs == 1:
        if valid is None:
            mean, std = advantage.mean(), advantage.std()
        else:
            mean, std = (v[0] for v in _mean_std(advantage.reshape(1, -1), valid.reshape(1, -1)))
        return advantage.sub_(mean).div_(std + eps)

    def per_run(x):  # [T, N x E, ...] -> [N, T x E x ...]
        return x.unflatten(1, (runs, -1)).transpose(0, 1).reshape(runs, -1)

    mean, std = _mean_std(per_run(advantage), None if valid is None else per_run(valid))
    shape = (1, runs, 1, *([1] * (advantage.dim() - 2)))
    view = advantage.unflatten(1, (runs, -1))
    view.sub_(mean.reshape(shape)).div_(std.reshape(shape) + eps)
    return advantage


def _mean_std(x: Tensor, valid: Tensor | None) -> tuple[Tensor, Tensor]:
    """Mean and unbiased std of each row of x [R, n], over the valid entries if given."""
    if valid is None:
        return x.mean(1), x.std(1)
    count = valid.sum(1)
    mean = torch.where(valid, x, 0.0).sum(1) / count.clamp(min=1)
    square = torch.where(valid, (x - mean.unsqueeze(1)).square(), 0.0).sum(1)
    return mean, (square / (count - 1).clamp(min=1)).sqrt()


def _init_layers(net: nn.Sequential, out_gain: float) -> None:
    """Orthogonal weights (gain sqrt 2 inside, out_gain on the output), zero biases."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, out_gain if i == len(linears) - 1 else math.sqrt(2))
        nn.init.zeros_(layer.bias)


def _optional(value) -> float | None:
    return None if value is None or float(value) <= 0 else float(value)


@dataclass
class ActorCriticConfig(OnPolicyConfig):
    """The keys of gpurl's on-policy actor-critics (PPO, A2C)."""

    hidden: list[int] = hidden_key(
        [64, 64], "actor and critic each get their own trunk of these widths"
    )
    shared_encoder: bool = key(
        False,
        "true: one observation encoder (e.g. the CNN) for actor and critic, trained by both losses",
    )
    activation: str = key("tanh", "tanh | relu", choices=tuple(ACTIVATIONS))
    gae_lambda: float = key(0.95, "GAE lambda (1: the n-step return)", ge=0, le=1)
    normalize_advantage: bool = key(True, "per rollout: (A - mean) / std")
    normalize_reward: bool = key(
        False,
        "learn from rewards divided by a running std of the discounted return, clipped to "
        "+-10 (SB3's VecNormalize norm_reward); evaluation reports the env's own rewards",
    )
    entropy_coef: float = key(0.01, "weight of the entropy bonus", ge=0)
    value_coef: float = key(0.5, "weight of the value loss", ge=0)
    max_grad_norm: float | None = max_grad_norm_key(0.5)
    init_log_std: float = key(0.0, "continuous actions: the state-independent log-std it starts at")
    critic: str = key(
        "local",
        "multi-robot envs: local (IPPO: V of each robot's own observation) | central (MAPPO: "
        "V of the group's observations and the robot's index)",
        choices=CRITICS,
    )
    recurrent: str | None = recurrent_key(
        "shared by actor and critic, between the (then shared) encoder and the trunks; "
        "trained by backpropagation through the rollout"
    )
    recurrent_hidden: int = recurrent_hidden_key()
    sequence_length: int | None = rollout_sequence_key()
    critic_recurrent: bool = key(
        False,
        "with agent.recurrent: the critic gets a recurrent layer of its own beside the "
        "actor's, each agent.recurrent_hidden units (sb3-contrib's enable_critic_lstm); "
        "false: one layer shared by both",
    )
    encoder: EncoderConfig = encoder_key()


@declare(name="ppo", epochs=4, minibatches=4)
class PPOConfig(ActorCriticConfig):
    """PPO (gpurl/agents/ppo.py), an on-policy agent. Defaults: CleanRL's ppo.py."""

    clip_epsilon: float | None = key(0.2, "surrogate clip; null = none", gt=0)
    anneal_clip: bool = key(
        False,
        "anneal the surrogate clip linearly to 0 over trainer.total_frames, as anneal_lr "
        "does the learning rate (SB3's clip_range lin_X)",
    )
    value_clip: float | None = key(
        0.2, "value-loss clip around the collection-time value; null = none", gt=0
    )


@register("agent", "ppo", PPOConfig)
class PPOAgent(OnPolicyAgent):
    name = "ppo"
    many_seeds = True

    def __init__(self, cfg, info, progress, compile=EAGER):
        super().__init__(cfg, info, progress, compile)
        if cfg.activation not in ACTIVATIONS:
            raise ConfigError(
                f"agent.activation={cfg.activation} is unknown: use {' or '.join(ACTIVATIONS)}"
            )
        critic = cfg.get("critic") or "local"
        if critic not in CRITICS:
            raise ConfigError(f"agent.critic={critic} is unknown: use local or central")
        if critic == "central" and not info.multi_agent:
            raise ConfigError(
                "agent.critic=central values each robot from the group's observations: it "
                "needs a multi-robot env (marinenav, vmas); use agent.critic=local"
            )
        if critic == "central" and cfg.get("shared_encoder"):
            raise ConfigError(
                "agent.critic=central reads the group's observations, not the actor's "
                "encoder: set agent.shared_encoder=false"
            )
        act, enc, device = ACTIVATIONS[cfg.activation], cfg.get("encoder"), info.device
        hidden = list(cfg.hidden)
        recurrent = cfg.get("recurrent")
        if recurrent:  # one state per robot on a multi-robot env; N runs' cores stacked
            self.refuse_recurrent(recurrent, robots=True)
        if critic == "central" and cfg.get("critic_recurrent"):
            raise ConfigError(
                "agent.critic=central reads the group's observations, not a recurrent "
                "layer: drop agent.critic_recurrent (the actor keeps its core)"
            )
        # one trunk for both heads, or a trunk each
        runs = self.runs
        self.encoder = self.core = None
        if cfg.get("shared_encoder") or recurrent:
            self.encoder = runs.build(lambda: make_encoder(info, enc)).to(device)
        if cfg.get("critic_recurrent") and not recurrent:
            raise ConfigError(
                "agent.critic_recurrent gives the critic a recurrent layer of its own: set "
                "agent.recurrent=lstm or gru too, or drop agent.critic_recurrent"
            )
        if recurrent:
            parts = 2 if cfg.get("critic_recurrent") else 1  # the actor's, the critic's
            encoder = self.encoder
            self.core = runs.build(lambda: RecurrentCore.for_agent(cfg, encoder, info, parts))
        features = self.encoder if self.core is None else self.core

        def trunk(part: int):
            """Head `part`'s input (0: the actor, 1: the critic)."""
            if self.encoder is None:
                return make_encoder(info, enc)
            if self.core is not None and self.core.parts > 1:
                width = self.core.part_features
                return SharedFeatures(width, offset=part * width)
            return SharedFeatures(features.out_features)

        def actor():
            if info.discrete:
                net = CategoricalActor(trunk(0), info.n_actions, hidden, act)
            else:
                net = ClippedGaussianActor(trunk(0), info.action_dim, hidden, act, cfg.init_log_std)
            _init_layers(net.net, 0.01)
            return net

        def value_network():
            # MAPPO's critic reads the group's observations; IPPO's a trunk like the actor's
            net = ValueNetwork(
                CentralEncoder(info) if critic == "central" else trunk(1), hidden, act
            )
            _init_layers(net.net, 1.0)
            return net

        self.actor = runs.build(actor).to(device)
        self.critic = runs.build(value_network).to(device)
        shared = [] if self.encoder is None else list(self.encoder.parameters())
        shared += [] if self.core is None else list(self.core.parameters())
        self.params = [*shared, *self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = make_optimizer(self.params, self.lr, runs, eps=1e-5)
        self.policy = PolicyWrapper(
            self.actor,
            info,
            progress,
            value=self.critic,
            write_log_prob=True,
            encoder=self.encoder,
            core=self.core,
        ).to(device)
        self.gae_lambda = float(cfg.gae_lambda)
        self.reward_scale = None
        if cfg.get("normalize_reward"):
            if runs.many:
                raise ConfigError(
                    "agent.normalize_reward keeps one set of return statistics, not one per "
                    "run: drop trainer.num_seeds, or agent.normalize_reward"
                )
            shape = (*info.batch_shape, *info.group_shape)
            self.reward_scale = RewardScale(shape, self.gamma, device=device)
        self.clip, self.value_clip = self.clips(cfg)
        self.base_clip = self.clip
        if cfg.get("anneal_clip"):
            if self.clip is None:
                raise ConfigError(
                    "agent.anneal_clip anneals the surrogate clip: set agent.clip_epsilon, "
                    "or agent.anneal_clip=false"
                )
            self.clip = torch.tensor(self.clip, device=device)  # annealed in place
        self.normalize_advantage = bool(cfg.normalize_advantage)
        # a float, or one per run (trainer.per_seed), spread over each run's rows in learn
        self.entropy_coef = self.runs.value("entropy_coef", cfg.entropy_coef, device)
        # a multi-robot env's mask of the robots that act (none: every slot is a sample)
        self.valid_key = info.valid_key
        self.value_coef, self.max_grad_norm = float(cfg.value_coef), _optional(cfg.max_grad_norm)
        self.learn_step = self.compiled(self.learn)

    def clips(self, cfg) -> tuple[float | None, float | None]:
        """(surrogate clip, value clip); None where off (a null or non-positive value)."""
        return _optional(cfg.clip_epsilon), _optional(cfg.value_clip)

    def anneals(self) -> bool:
        return super().anneals() or isinstance(self.clip, Tensor)

    def anneal(self, remaining: Tensor) -> None:
        super().anneal(remaining)
        if isinstance(self.clip, Tensor):  # agent.anneal_clip
            self.clip.copy_(remaining * self.base_clip)

    def modules(self):
        shared = {} if self.encoder is None else {"encoder": self.encoder}
        shared |= {} if self.core is None else {"core": self.core}
        scale = {} if self.reward_scale is None else {"reward_scale": self.reward_scale}
        return {**shared, "actor": self.actor, "critic": self.critic, **scale}

    @property
    def recurrent(self) -> bool:
        return self.core is not None

    def acting_state(self):
        state = {} if self.core is None else {"recurrent_state": self.core.state}
        if self.reward_scale is not None:  # each env's return so far
            state["reward_return"] = self.reward_scale.ret
        return state

    def optimizers(self):
        return {"optimizer": self.optimizer}

    # -- targets -------------------------------------------------------------------------------
    def value(self, obs) -> Tensor:
        if self.core is None:
            return self.critic(with_features(self.encoder, obs))
        # the observation the policy acts on next, from the state it acts with
        return self.critic(features_from(self.encoder, self.core, obs, self.core.state))

    def next_values(self, rollout: TensorDict) -> Tensor:
        if self.core is None:
            return super().next_values(rollout)
        return self.time_major(
            lambda r: self.critic(next_features(self.encoder, self.core, r)), rollout
        )

    @torch.no_grad()
    def compute_targets(self, rollout: TensorDict, last_obs) -> TensorDict:
        """GAE advantages and value targets [T, N] (core/returns.gae), the advantages
        normalised over the rollout when agent.normalize_advantage."""
        reward, next_value, terminated, done = self.bootstrap(rollout, last_obs)
        if self.reward_scale is not None:
            reward = self.reward_scale(reward, done)
        value = rollout.get(VALUE)
        # the minibatches carry the sequences' resets (a recurrent core) and the running
        # mask as a 0/1 weight (a multi-robot env's) beside the targets
        names = ("done",) if self.core is not None else ()
        names += ("valid",) if self.valid_key is not None else ()
        out = self.target_buffers(value, "advantage", "value_target", *names)
        if self.core is not None:
            out.get("done").copy_(self.core_resets(rollout, done))
        valid = None
        if self.valid_key is not None:
            valid = rollout.get(self.valid_key).reshape(value.shape)
            out.get("valid").copy_(valid)
        advantage, value_target = out.get("advantage"), out.get("value_target")
        gae(
            reward,
            value,
            next_value,
            terminated,
            done,
            self.runs.per_row(self.gamma, reward[0]),  # a float, or per env with N runs
            self.gae_lambda,
            out=(advantage, value_target),
            valid=valid,
        )
        if self.normalize_advantage:
            normalize_advantage(advantage, valid=valid, runs=self.runs.n)
        return out

    def core_resets(self, rollout: TensorDict, done: Tensor) -> Tensor:
        """Where the core's state restarts after each step [T, N(, R)]: where the episode
        ended; on a multi-robot env, also every robot's state where its env's episode
        ended, and a robot's where it does not run at the next step (the acting policy
        zeroes a stopped robot's state: RecurrentCore.act), so the replay meets each step
        from the state the rollout acted from."""
        if not self.info.multi_agent:
            return done
        ended = rollout.get(("next", "done")).reshape(*done.shape[:2], -1)  # [T, N, 1]
        resets = done.bool() | ended.reshape(*ended.shape, *(1,) * (done.dim() - 3))
        if self.valid_key is not None:
            resets[:-1] |= ~rollout.get(self.valid_key)[1:].reshape(resets[1:].shape)
        return resets

    def learn(self, batch: TensorDict) -> TensorDict:
        """One minibatch gradient step: tensors in, tensors out (compile.update takes it)."""
        if self.core is None:
            obs = with_features(self.encoder, batch)
        else:  # whole sequences [L, n]: the core replayed from the stored first state
            batch, obs = replay(self.encoder, self.core, batch, self.runs.many)
        action = batch.get(self.info.action_key)
        if not self.info.discrete:
            action = self.policy.unscale(action)
        advantage = batch["advantage"]
        weight = None if self.valid_key is None else batch["valid"]
        if weight is not None and self.runs.many:  # each run's loss its own rows' mean
            weight = balance_runs(weight, self.runs.n)
        log_prob, entropy = self.actor.evaluate(obs, action)
        log_ratio = log_prob - batch[LOG_PROB]
        ratio = log_ratio.exp()
        clip = self.clip
        clipped = None if clip is None else ratio.clamp(1.0 - clip, 1.0 + clip)
        policy_loss = ppo_policy_loss(ratio, advantage, clip, weight, clipped)
        value = self.critic(obs)
        value_loss = ppo_value_loss(
            value, batch[VALUE], batch["value_target"], self.value_clip, weight
        )
        coef = self.entropy_coef
        mean_entropy = masked_mean(entropy, weight)
        if isinstance(coef, float):
            bonus = coef * mean_entropy
        else:
            bonus = masked_mean(self.runs.per_row(coef, entropy) * entropy, weight)
        loss = policy_loss + self.value_coef * value_loss - bonus
        clip_and_step(self.optimizer, loss, self.max_grad_norm)
        # the approximate KL, mean(r - 1 - log r) (Schulman's k3 estimator), off the
        # detached ratio (no graph to record, so no no_grad block), and the fraction of
        # rows the clip moved, |r - 1| > eps, read as clip(r) != r
        approx_kl = masked_mean(ratio.detach() - 1 - log_ratio.detach(), weight)
        if clipped is None:
            clip_fraction = torch.zeros((), device=ratio.device)
        else:
            clip_fraction = masked_mean((clipped != ratio).float(), weight)
        return scalars(
            policy_loss=policy_loss.detach(),
            value_loss=value_loss.detach(),
            entropy=mean_entropy.detach(),
            approx_kl=approx_kl,
            clip_fraction=clip_fraction,
            lr=self.lr.mean(),
        )
