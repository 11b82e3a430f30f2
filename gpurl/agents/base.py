"""What every agent shares, and the two kinds of agent the trainers run.

An agent is built from (cfg, EnvInfo, Progress) and the run's compile settings: it owns
its networks, target networks, optimisers and the policy it acts with, and declares:

    Agent (both kinds)
      policy                    the ActingPolicy the collector acts with (exploring) and
                                evaluation runs greedily
      modules() / optimizers()  its state, listed explicitly: checkpoints (state /
      / buffers()               load_state), the trainer's NaN check and torchrun's
                                start-up broadcast read them
      update(batch, progress)   one gradient update -> TensorDict of device scalars
                                (losses and the like); the trainer sums them on the
                                device and reads them once per log interval
      compiled(fn)              fn as the compile settings ask: each agent builds its
                                gradient steps with it once, in __init__, and calls them

    OffPolicyAgent              trained by trainers/off_policy.py from a replay
      replay_spec()             what its replay needs (core/replay.ReplaySpec: transitions,
                                or sequences for a recurrent agent)
      update(...)               may return a "priority" entry [batch] that the trainer
                                hands back to a prioritized replay

    OnPolicyAgent               trained by trainers/on_policy.py from rollouts
      epochs, minibatches       passes over each rollout and minibatches per pass
      bootstrap_truncated       a truncated episode bootstraps from V(s_final): the
                                collector then keeps next observations
      value(obs)                the bootstrap value
      compute_targets(rollout, last_obs)  the rollout's learning targets (GAE
                                advantages, Q(lambda) returns), beside the loss
      learn(minibatch)          one gradient step
      set_horizon(total_frames) the run's length, for learning-rate annealing

Counting is the progress record's (core/progress.py): the trainer counts an update
after `update` returns, so inside it the update being made is number
`progress.update_count + 1`; hard target copies and delayed steps are decided from
that host count, without reading the device.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping

import torch
from tensordict import TensorDict
from torch import Tensor, nn
from torchrl.data import Bounded

from gpurl.core.adam import Adam, torch_step
from gpurl.core.compile import EAGER, CompileSpec, capturable, compile_step
from gpurl.core.config import plain_keys
from gpurl.core.private import foreach_copy_, foreach_lerp_, unchecked_tensordict
from gpurl.core.progress import Progress
from gpurl.core.replay import ReplaySpec
from gpurl.core.rmsprop import RMSprop
from gpurl.core.runs import ONE_RUN, RunAdam, Runs
from gpurl.envs.info import EnvInfo, describe_action
from gpurl.errors import ConfigError
from gpurl.policies.networks import SpecEncoder
from gpurl.policies.wrapper import VALUE, ActingPolicy


def require_discrete(info: EnvInfo, agent: str, fits: str) -> int:
    if not info.discrete:
        raise ConfigError(
            f"agent={agent} needs a discrete action space but this env's actions are "
            f"{describe_action(info)}: use agent={fits}"
        )
    return info.n_actions


def require_continuous(info: EnvInfo, agent: str, fits: str) -> int:
    spec = info.action_spec
    if not isinstance(spec, Bounded) or not spec.dtype.is_floating_point:
        raise ConfigError(
            f"agent={agent} needs a continuous (bounded) action space but this env's actions "
            f"are {describe_action(info)}: use agent={fits}"
        )
    return info.action_dim


def require_single_agent(info: EnvInfo, agent: str, fits: str) -> None:
    if info.multi_agent:
        raise ConfigError(
            f"agent={agent} runs on single-agent envs for now (this env has a robot group "
            f"{tuple(info.group_shape)}): use {fits}"
        )


def make_optimizer(
    params: Iterable[nn.Parameter],
    lr,
    runs: Runs = ONE_RUN,
    eps: float = 1e-8,
    kind: str = "adam",
    max_grad_norm: float | None = None,
) -> torch.optim.Optimizer:
    """Adam over `params`; over N runs' stacked parameters, RunAdam (a learning rate
    and a gradient clip per run: core/runs.py). `lr` is a float, a device scalar the
    agent anneals in place, or [N] per-run values. kind="rmsprop": the DQN papers'
    centred RMSprop (core/rmsprop.py), over many runs with one rate and no clip
    (`max_grad_norm`: the clip the agent will ask for, checked here)."""
    if kind == "rmsprop":
        if runs.many and (isinstance(lr, Tensor) and lr.dim() > 0 or max_grad_norm):
            raise ConfigError(
                "agent.optimizer=rmsprop steps many runs in one process with one learning "
                "rate and no gradient clip: set agent.max_grad_norm=null and leave agent.lr "
                "the same for every run (or use agent.optimizer=adam)"
            )
        return RMSprop(params, lr, runs.n if runs.many else 1)
    if runs.many:
        return RunAdam(params, runs.n, lr, eps=eps)
    return Adam(params, lr, eps=eps)  # torch's fused Adam, stepped in one call (core/adam.py)


def scalars(**values: Tensor) -> TensorDict:
    """An update's metrics, device scalars, as a TensorDict with no batch dims; built
    without the public constructor's per-entry checks, which cost an update of a small
    network a few percent (core.private.unchecked_tensordict)."""
    return unchecked_tensordict(values, torch.Size([]), None)


def target_copy(net: nn.Module) -> nn.Module:
    return copy.deepcopy(net).requires_grad_(False)


class TargetPairs:
    """Target networks and the online networks they follow, as (target, online) pairs.
    Their parameters are listed once, here: a module's parameters() walks its submodules
    at every call, which an update of a small network pays for twice per target."""

    def __init__(self, *pairs: tuple[nn.Module, nn.Module]):
        self.targets = [p for target, _ in pairs for p in target.parameters()]
        self.online = [p for _, online in pairs for p in online.parameters()]

    @torch.no_grad()
    def polyak(self, tau) -> None:
        """target <- target + tau (online - target), one fused lerp over every pair's
        parameters (tau may be a device scalar: 1 where a hard copy is due, 0 elsewhere)."""
        foreach_lerp_(self.targets, self.online, tau)

    @torch.no_grad()
    def copy(self) -> None:
        """target <- online, one fused copy."""
        foreach_copy_(self.targets, self.online)


def clip_and_step(optimizer: torch.optim.Optimizer, loss, max_norm: float | None):
    """Backward, average over torchrun's ranks, clip the parameters the optimizer steps,
    step; outside autocast (compile.amp autocasts the forward passes only: gradients and
    optimizer state stay fp32).

    Every agent steps its optimizers here, so this is where data-parallel training
    averages gradients (core/distributed.py; nothing happens with one process).
    make_optimizer's optimizers do all of it in one call (core/adam.Adam, RunAdam for
    N runs, core/rmsprop.RMSprop); any other torch optimizer (a plug-in's) takes
    torch's own path."""
    if torch.is_autocast_enabled(loss.device.type):  # entering the context costs ~5 us
        with torch.autocast(loss.device.type, enabled=False):
            clip_and_step(optimizer, loss, max_norm)
    elif isinstance(optimizer, (Adam, RunAdam, RMSprop)):
        optimizer.backward_and_step(loss, max_norm)
    else:
        torch_step(optimizer, loss, max_norm)


def is_every(progress: Progress, n: int) -> bool:
    """Whether the update being made is the n-th, 2n-th, ... of the run (host counts)."""
    return (progress.update_count + 1) % max(int(n), 1) == 0


class Agent:
    """The state and hooks both kinds of agent share.

    Built from `cfg` (the agent config), `info` (the EnvInfo its networks are sized
    from), `progress` (the run's progress record, which its schedules read) and the
    compile settings. Subclass OffPolicyAgent or OnPolicyAgent, not this class.
    """

    name: str = "agent"  # its registered name; the run's label comes from agent.name
    policy: ActingPolicy
    #: acts in a multi-part discrete action (packing's item, orientation and corner)
    multi_part_actions: bool = False
    #: trains N runs at once (trainer.num_seeds, core/runs.py): builds its networks with
    #: runs.build, its optimizers with make_optimizer(..., runs) and keeps every
    #: per-run quantity shaped [N] (per_row broadcasts it over a batch's rows)
    many_seeds: bool = False

    def __init__(self, cfg, info: EnvInfo, progress: Progress, compile: CompileSpec = EAGER):
        # plain values: the update path reads keys every step (core/config.Keys)
        self.cfg, self.info, self.progress = plain_keys(cfg), info, progress
        self.compile = compile
        self.runs = progress.runs
        if self.runs.many and not self.many_seeds:
            raise ConfigError(
                f"agent={self.name} trains one seed per process: drop trainer.num_seeds (or "
                f"use dqn, iqn, sac, td3, ddpg, acqin, ppo, a2c or pqn, which train many seeds "
                f"at once)"
            )
        if self.runs.many and compile.cudagraphs:
            raise ConfigError(
                "trainer.num_seeds > 1 is not captured in CUDA graphs yet: drop compile.cudagraphs"
            )
        if self.runs.many and (self.cfg.get("encoder") or {}).get("normalize"):
            raise ConfigError(
                "agent.encoder.normalize keeps one set of observation statistics, not one "
                "per run: drop trainer.num_seeds, or agent.encoder.normalize"
            )

    def time_major(self, fn, *xs):
        """fn over time-major inputs [T, B, ...] (tensors or TensorDicts) -> [T, B, ...].
        With N runs fn sees them transposed, [B, T, ...], and its output turns back:
        stacked networks find each run's rows in the leading dims (core/runs.py)."""
        if not self.runs.many:
            return fn(*xs)
        return fn(*(x.transpose(0, 1) for x in xs)).transpose(0, 1)

    #: acts through a recurrent core and learns from sequences: pieces of the rollout
    #: [L, n] on-policy (trainers/on_policy.py), replayed ones off-policy
    #: (trainers/sequence_replay.py)
    recurrent: bool = False

    def refuse_recurrent(self, recurrent: str, robots: bool = False) -> None:
        """What agent.recurrent does not run with, refused in one line: multi-robot envs
        unless the agent keeps a state per robot (`robots`). compile.policy traces the
        acting with its hidden state, compile.update and compile.cudagraphs take the
        update (the acting is not captured: trainers/compile.py), and many seeds in one
        process stack the runs' cores (policies/recurrent.RunRecurrentCore)."""
        fix = f"drop agent.recurrent={recurrent}"
        if self.info.multi_agent and not robots:
            raise ConfigError(
                f"agent.recurrent={recurrent} runs on single-agent envs with this agent "
                f"(this env has a robot group {tuple(self.info.group_shape)}; recurrent "
                f"PPO and A2C keep a state per robot): {fix}"
            )

    #: the encoders with running observation statistics (agent.encoder.normalize),
    #: found once at the first `observe`
    _normalizing: list | None = None

    def observe(self, batch: TensorDict) -> None:
        """Move the running observation statistics (agent.encoder.normalize) on by a
        collected batch: the trainer calls it once per batch, after the updates the
        batch paid for, so a rollout is learnt from with the statistics it was acted
        on with. Device ops only; nothing without a normalising encoder."""
        if self._normalizing is None:  # one module walk per run, not per iteration
            found = {
                id(m): m
                for module in self.modules().values()
                for m in module.modules()
                if isinstance(m, SpecEncoder) and m.norms
            }
            self._normalizing = list(found.values())
        for encoder in self._normalizing:
            encoder.observe(batch)

    def acting_state(self) -> dict[str, Tensor]:
        """The acting policy's state that carries over from one collected batch to the
        next (a recurrent hidden state [num_envs, ...]): checkpointed by the trainer
        beside the collector's observation, restored in place."""
        return {}

    # -- state ---------------------------------------------------------------------------
    def modules(self) -> Mapping[str, nn.Module]:
        """Every module whose parameters or buffers a resumed run needs, by name."""
        raise NotImplementedError

    def optimizers(self) -> Mapping[str, torch.optim.Optimizer]:
        """Every optimizer a resumed run needs, by name (checkpoints save their state)."""
        raise NotImplementedError

    def buffers(self) -> Mapping[str, Tensor]:
        """Device tensors of the agent's own beside its modules (a learning-rate
        scalar, a schedule's last step), restored in place."""
        return {}

    def run_tensors(self) -> list[Tensor]:
        """With N runs: the agent's tensors with one slice per run beside its stacked
        networks' (SAC's temperature [N]), which population-based training copies from
        run to run (trainers/pbt.run_tensors adds the networks and optimizer state)."""
        return []

    def state(self) -> dict:
        """Everything a checkpoint keeps of the agent."""
        return {
            "modules": {k: m.state_dict() for k, m in self.modules().items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
            "buffers": {k: t.clone() for k, t in self.buffers().items()},
        }

    def load_state(self, state: Mapping) -> None:
        """Restore what `state()` returned, in place (device learning rates stay the
        tensors the optimizers read)."""
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items():
            lrs = [group["lr"] for group in o.param_groups]
            o.load_state_dict(state["optimizers"][k])
            for group, lr in zip(o.param_groups, lrs, strict=True):
                # A device lr the agent schedules in place (annealing, stage gates) must
                # stay the tensor the optimizer reads: load_state_dict puts a copy there.
                if isinstance(lr, Tensor):
                    lr.copy_(group["lr"])
                    group["lr"] = lr
        for k, t in self.buffers().items():
            t.copy_(state["buffers"][k])

    def parameters(self) -> list[tuple[str, Tensor]]:
        """(name, parameter) of every module, each parameter once."""
        seen, out = set(), []
        for name, module in self.modules().items():
            for pname, p in module.named_parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append((f"{name}.{pname}", p))
        return out

    # -- learning ------------------------------------------------------------------------
    def compiled(self, fn: Callable) -> Callable:
        """`fn`, a gradient step (tensors in, tensors out, no Python state touched), as
        the compile settings ask (core/compile.compile_step). Called once per step at
        the end of __init__, after the optimizers exist (a captured step needs them
        capturable)."""
        if self.compile.cudagraphs:
            capturable(self.optimizers().values())
        return compile_step(fn, self.compile, self.info.device)

    def update(self, batch: TensorDict, progress: Progress) -> TensorDict:
        """One gradient update on `batch` (a replay sample or a rollout minibatch of N
        rows, batch size [N]; or, after OffPolicyAgent.fuse_draw, the replay's bounds,
        the sample then drawn inside the step); returns a TensorDict of device scalars
        (losses and the like), which the trainer sums on the device and reads once per
        log interval."""
        raise NotImplementedError


class OffPolicyAgent(Agent):
    """An agent learning from a replay (trainers/off_policy.py). `random_frames` is the
    trainer's init_random_frames: epsilon-greedy acts uniformly before it."""

    def __init__(
        self,
        cfg,
        info: EnvInfo,
        progress: Progress,
        random_frames: int = 0,
        compile: CompileSpec = EAGER,
    ):
        super().__init__(cfg, info, progress, compile)
        self.random_frames = int(random_frames)
        #: every sample's weight and valid entries are 1 (a uniform replay of an env
        #: whose every slot is a sample): losses take plain means (core/replay.weighted_mean)
        self.uniform_sample = not self.cfg.get("prioritized") and info.valid_key is None

    #: update() is one `learn` step on one sample (plus host-side target bookkeeping),
    #: so the replay's draw can go inside that step (fuse_draw)
    fuses_draw = False

    def fuse_draw(self, draw: Callable, bounds: TensorDict) -> None:
        """Add a gradient step learn(draw(bounds)), taken when update() is handed the
        replay's `bounds` in place of a sample: compile.update traces, and
        compile.cudagraphs captures, the sampling with the step (one graph launch an
        update, no eager sampling kernels, no copy of a sample into the graph's
        inputs; trainers/off_policy.py decides when). Where the step returns new
        priorities it also returns the sampled "index" they belong to. update() still
        takes a sample."""
        if not self.fuses_draw:
            raise ConfigError(f"{self.name}'s update runs several steps: its draw stays eager")
        learn, on_sample = self.learn, self.learn_step

        def drawn(b: TensorDict) -> TensorDict:
            sample = draw(b)
            out = learn(sample)
            if "priority" in out.keys():
                out.set("index", sample["index"])
            return out

        on_bounds = self.compiled(drawn)
        self.learn_step = lambda batch: on_bounds(batch) if batch is bounds else on_sample(batch)

    def replay_spec(self) -> ReplaySpec:
        """The replay the agent config asks for (agent.n_step, agent.prioritized...)."""
        cfg = self.cfg
        return ReplaySpec(
            n_step=int(cfg.n_step),
            gamma=float(cfg.gamma),
            prioritized=bool(cfg.prioritized),
            alpha=float(cfg.priority_alpha),
            beta_start=float(cfg.priority_beta_start),
            beta_end=float(cfg.priority_beta_end),
            beta_frames=int(cfg.priority_beta_frames),
            sampler=str(cfg.priority_sampler),
        )


class OnPolicyAgent(Agent):
    """An agent learning from rollouts (trainers/on_policy.py), with one optimiser whose
    learning rate may anneal linearly to 0 over the run (agent.anneal_lr). The lr is a
    device tensor: the schedule is a closed-form function of the frame counter with no
    host read. The subclass builds its optimizer with `self.lr`, writes `value`,
    `compute_targets` and `learn`, and ends its __init__ with
    `self.learn_step = self.compiled(self.learn)`."""

    def __init__(self, cfg, info: EnvInfo, progress: Progress, compile: CompileSpec = EAGER):
        super().__init__(cfg, info, progress, compile)
        self.epochs, self.minibatches = int(cfg.epochs), int(cfg.minibatches)
        for key, value in (("epochs", self.epochs), ("minibatches", self.minibatches)):
            if value < 1:
                raise ConfigError(f"agent.{key} must be >= 1, got {value}")
        self.bootstrap_truncated = bool(cfg.bootstrap_truncated)
        # with a recurrent core: steps per replayed sequence (None: the whole rollout)
        self.sequence_length = cfg.get("sequence_length")
        self.gamma = self.runs.value("gamma", cfg.gamma, info.device)  # or [N] per run
        # the learning rate the optimizer reads, annealed in place: [] (or [N], one per
        # run, with trainer.per_seed.lr)
        self.base_lr = self.runs.value("lr", cfg.lr, info.device)
        self.lr = torch.as_tensor(self.base_lr, device=info.device).clone().float()
        if isinstance(self.base_lr, Tensor) and not cfg.anneal_lr:
            self.lr = self.base_lr  # per-run values PBT may change in place: read them live
        self.anneal_frames = 0
        self._annealed_at: int | None = None  # the frame count lr was last annealed at
        self._next_value: Tensor | None = None
        self._targets: TensorDict | None = None

    def set_horizon(self, total_frames: int) -> None:
        """The run's length in frames (the trainer's total_frames), for annealing."""
        self.anneal_frames = int(total_frames) if self.anneals() else 0

    def anneals(self) -> bool:
        """Whether anything anneals over the run: the learning rate (agent.anneal_lr);
        an agent with schedules of its own adds them (PPO's agent.anneal_clip)."""
        return bool(self.cfg.anneal_lr)

    def anneal(self, remaining: Tensor) -> None:
        """Set what anneals for the fraction of the run still to come, `remaining` (a
        device scalar in [0, 1]): lr = remaining x its base value."""
        if self.cfg.anneal_lr:
            self.lr.copy_(remaining * self.base_lr)

    # -- targets ---------------------------------------------------------------------------
    def value(self, obs: TensorDict) -> Tensor:
        """The value an episode bootstraps from at `obs` [*batch]."""
        raise NotImplementedError

    def compute_targets(self, rollout: TensorDict, last_obs: TensorDict | None) -> TensorDict:
        """The learning targets of a rollout [T, N] (its policy wrote VALUE at each step),
        as a TensorDict [T, N] whose entries minibatches carry beside the rollout's.
        `last_obs` is the observation to act on after the rollout (None when the
        collector keeps no such thing: TorchRL's). Allocated once, refilled in place."""
        raise NotImplementedError

    @torch.no_grad()
    def bootstrap(self, rollout: TensorDict, last_obs: TensorDict | None):
        """(reward, next_value, terminated, done), each shaped like the rollout's VALUE.

        next_value[t] is the value of the observation that followed step t. With
        bootstrap_truncated (the collector kept next observations), it is V of each
        step's next observation, so a truncated step bootstraps from its final state.
        Without, it is the next row's stored value, and the last row's V(last_obs); a
        truncated step then reads the reset observation, so truncation ends the
        bootstrap as termination does."""
        value = rollout.get(VALUE)
        if self._next_value is None or self._next_value.shape != value.shape:
            self._next_value = torch.empty_like(value)
        nxt, info, next_value = rollout.get("next"), self.info, self._next_value
        reward = nxt.get(info.reward_key).reshape(value.shape)
        terminated = nxt.get(info.terminated_key).reshape(value.shape)
        done = nxt.get(info.done_key).reshape(value.shape)
        if self.bootstrap_truncated or last_obs is None:
            next_value.copy_(self.next_values(rollout))
        else:
            next_value[:-1].copy_(value[1:])
            next_value[-1].copy_(self.value(last_obs))
            terminated = done
        return reward, next_value, terminated, done

    def next_values(self, rollout: TensorDict) -> Tensor:
        """V of each step's next observation [T, N] (the rollout's "next" entries); a
        recurrent agent reads its stored hidden states too."""
        return self.time_major_value(rollout.get("next"))

    def time_major_value(self, obs: TensorDict) -> Tensor:
        """value(obs) of a time-major obs [T, N x E]."""
        return self.time_major(self.value, obs)

    def target_buffers(self, like: Tensor, *names: str) -> TensorDict:
        """The TensorDict [T, N] compute_targets fills: `names`, each shaped like `like`,
        allocated at the first rollout and reused."""
        if self._targets is None or self._targets.batch_size != like.shape[:2]:
            self._targets = TensorDict(
                {n: torch.empty_like(like) for n in names}, batch_size=like.shape[:2]
            )
        return self._targets

    # -- learning ----------------------------------------------------------------------------
    def update(self, batch: TensorDict, progress: Progress) -> TensorDict:
        """Anneal the learning rate to the run's frames (a device op), then one
        `learn` step on the minibatch `batch` [N]."""
        # once per rollout: the frames, and so the rate, stay put over its minibatches
        if self.anneal_frames and progress.frame_count != self._annealed_at:
            self.anneal((1.0 - progress.frames.double() / self.anneal_frames).clamp(min=0.0))
            self._annealed_at = progress.frame_count
        return self.learn_step(batch)

    def learn(self, batch: TensorDict) -> TensorDict:
        """One minibatch gradient step: tensors in, tensors out."""
        raise NotImplementedError
