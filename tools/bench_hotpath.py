"""gpurl's update and training iteration against a bare PyTorch update of the same shapes.

    python tools/bench_hotpath.py                         # every case below, one thread
    python tools/bench_hotpath.py --cases dqn_acrobot sac_pendulum --num-envs 1
    python tools/bench_hotpath.py --max-ratio 1.15        # exit 1 if learn/bare exceeds it
    python tools/bench_hotpath.py --env-steps             # a Gymnasium env's step alone
    python tools/bench_hotpath.py --denormals --cases dqn_acrobot sac_gympendulum --num-envs 1

For each case (an agent on an env, at each --num-envs) it builds the trainer as
`python -m gpurl.train` does, fills its replay (off-policy) or runs a rollout
(on-policy), and times, in rounds that interleave the three sides (a shared machine
disturbs them alike):

    bare       the agent's update written in plain PyTorch on the same network shapes,
               batch and hyperparameters: forward, the target, the loss, backward, the
               gradient clip, fused Adam and the target update; no replay, no env, no
               config, random tensors as the batch (the floor an update can reach):
               the clip and the step are one foreach norm and torch's fused Adam
               kernel, with none of torch.optim's Python around them
    bare_optim the same update stepped as torch.optim writes it (zero_grad,
               clip_grad_norm_, Adam(fused=True).step()): what that Python costs
    learn      gpurl's agent.update on one sampled batch (off-policy) or minibatch
               (on-policy), as the trainer calls it, with the progress record advanced
    iteration  gpurl's trainer.iteration(): collect, store, sample and learn; its time
               per update it made, and per frame it collected

and prints one JSON record per case: ms per update for each side (the median over
rounds), `learn_over_bare` and `iteration_over_bare`, the iteration's ms per frame, and
the machine, versions, commit and thread count.

The cases: DQN, IQN, PQN and PPO on native CartPole and on Gymnasium's Acrobot-v1; SAC,
TD3, DDPG and PPO on native Pendulum and on Gymnasium's Pendulum-v1.

`--denormals` times a training iteration with denormal floats kept (torch's IEEE
default) and flushed to zero (gpurl's `flush_denormal`, on by default), on two trainers
trained alike for --warmup-updates first: Adam's first moment of a unit whose gradient
stays zero decays by 0.9 a step into the denormal range, where x86 arithmetic is many
times slower. The record gives both times and the share of denormal optimizer moments.

`--env-steps` times a Gymnasium env's step instead, for Acrobot-v1 and Pendulum-v1 at
each --num-envs, interleaved: gpurl's lean step (envs/gym.LeanGymEnv: the vector env
stepped directly, ended envs reset), the same env through TorchRL's
step_and_maybe_reset, and Gymnasium's own SyncVectorEnv stepping with its own autoreset
(the env's own cost); `lean_overhead_ms` is gpurl's lean step less Gymnasium's own.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.agents import OnPolicyAgent  # noqa: E402
from gpurl.train import build, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

DISCRETE_ENVS = {"cartpole": ["env=cartpole"], "acrobot": ["env=gym", "env.id=Acrobot-v1"]}
CONTINUOUS_ENVS = {"pendulum": ["env=pendulum"], "gympendulum": ["env=gym", "env.id=Pendulum-v1"]}
CASES = {
    **{
        f"{a}_{e}": [*o, f"agent={a}"]
        for a in ("dqn", "iqn", "pqn", "ppo")
        for e, o in DISCRETE_ENVS.items()
    },
    **{
        f"{a}_{e}": [*o, f"agent={a}"]
        for a in ("sac", "td3", "ddpg", "ppo")
        for e, o in CONTINUOUS_ENVS.items()
    },
}


# -- the bare updates ---------------------------------------------------------------------------


def mlp(sizes: list[int], activation=nn.ReLU, layer_norm: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers += [nn.LayerNorm(b)] if layer_norm else []
            layers.append(activation())
    return nn.Sequential(*layers)


def adam(params, lr):
    return torch.optim.Adam(params, lr=lr, fused=True)


def optim_step(optimizer, loss, max_norm):
    """A step as torch.optim writes it: zero_grad, backward, clip_grad_norm_, step."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    optimizer.zero_grad(set_to_none=True)
    loss.backward(inputs=params)  # no gradients for what this step leaves (an actor's critics)
    if max_norm:
        nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    optimizer.step()


def kernel_step(optimizer, loss, max_norm):
    """The same arithmetic with nothing around the kernels: one foreach norm, the clip
    as the fused Adam kernel's grad_scale (it divides each gradient by it), the kernel
    torch.optim.Adam(fused=True) runs. The floor."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    for p in params:
        p.grad = None
    loss.backward(inputs=params)
    with torch.no_grad():
        params = [p for p in params if p.grad is not None]
        grads = [p.grad for p in params]
        scale = None
        if max_norm:
            total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            scale = ((total + 1e-6) / max_norm).clamp(min=1.0)
        states = [optimizer.state[p] for p in params]
        for p, state in zip(params, states, strict=True):
            if not state:
                state["step"] = torch.zeros((), device=p.device)
                state["exp_avg"], state["exp_avg_sq"] = torch.zeros_like(p), torch.zeros_like(p)
        steps = [state["step"] for state in states]
        torch._foreach_add_(steps, 1)
        (group,) = optimizer.param_groups
        torch._fused_adam_(
            params,
            grads,
            [state["exp_avg"] for state in states],
            [state["exp_avg_sq"] for state in states],
            [],
            steps,
            amsgrad=False,
            lr=group["lr"],
            beta1=group["betas"][0],
            beta2=group["betas"][1],
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
            grad_scale=scale,
            found_inf=None,
        )


def bare_update(kind: str, cfg, dims: dict, n: int, device, step=kernel_step):
    """(update, networks): a closure making one update of agent `kind` in plain PyTorch
    on random tensors, with the network shapes and hyperparameters of `cfg` (the agent
    config), and the networks it trains; each optimizer stepped by `step` (kernel_step:
    the floor; optim_step: torch.optim's own calls)."""
    d, a = dims["obs"], dims["act"]
    hidden = list(cfg.hidden)
    obs, next_obs = torch.randn(n, d, device=device), torch.randn(n, d, device=device)
    reward = torch.randn(n, device=device)
    discount = torch.full((n,), float(cfg.gamma), device=device)

    if kind in ("dqn", "iqn", "pqn"):
        action = torch.randint(a, (n,), device=device)
    else:
        action = torch.rand(n, a, device=device) * 2 - 1

    if kind == "dqn":
        q = mlp([d, *hidden, a]).to(device)
        q_target = copy.deepcopy(q).requires_grad_(False)
        opt, online, target = (
            adam(q.parameters(), cfg.lr),
            list(q.parameters()),
            list(q_target.parameters()),
        )

        def update():
            with torch.no_grad():
                best = q(next_obs).argmax(-1, keepdim=True)  # double Q
                y = reward + discount * q_target(next_obs).gather(-1, best).squeeze(-1)
            taken = q(obs).gather(-1, action[:, None]).squeeze(-1)
            step(opt, F.smooth_l1_loss(taken, y), cfg.max_grad_norm)
            with torch.no_grad():
                torch._foreach_lerp_(target, online, float(cfg.tau))

        return update, [q]

    if kind == "iqn":
        freqs = math.pi * torch.arange(cfg.cos_embed, device=device, dtype=torch.float32)
        nets = nn.ModuleDict(
            {
                "embed": nn.Sequential(nn.Linear(cfg.cos_embed, d), nn.ReLU()),
                "head": mlp([d, *hidden, a]),
            }
        ).to(device)
        target_nets = copy.deepcopy(nets).requires_grad_(False)
        opt = adam(nets.parameters(), cfg.lr)

        def z(net, x, taus):
            return net["head"](
                x.unsqueeze(-2) * net["embed"](torch.cos(taus.unsqueeze(-1) * freqs))
            )

        def update():
            k, k_next = cfg.quantiles, cfg.target_quantiles
            with torch.no_grad():
                z_next = z(target_nets, next_obs, torch.rand(n, k_next, device=device))
                best = z_next.mean(-2).argmax(-1)[:, None, None].expand(n, k_next, 1)
                y = reward[:, None] + discount[:, None] * z_next.gather(-1, best).squeeze(-1)
            taus = torch.rand(n, k, device=device)
            pred = z(nets, obs, taus).gather(-1, action[:, None, None].expand(n, k, 1)).squeeze(-1)
            u = y.unsqueeze(-2) - pred.unsqueeze(-1)
            huber = torch.where(u.abs() <= 1.0, 0.5 * u.square(), u.abs() - 0.5)
            loss = ((taus.unsqueeze(-1) - (u.detach() < 0).float()).abs() * huber).mean(-1).sum(-1)
            step(opt, loss.mean(), cfg.max_grad_norm)  # hard targets: copied every N updates

        return update, [nets]

    if kind == "pqn":
        q = mlp([d, *hidden, a], layer_norm=bool(cfg.layer_norm)).to(device)
        opt, returns = adam(q.parameters(), cfg.lr), torch.randn(n, device=device)

        def update():
            taken = q(obs).gather(-1, action[:, None]).squeeze(-1)
            step(opt, 0.5 * (taken - returns).square().mean(), cfg.max_grad_norm)

        return update, [q]

    if kind == "ppo":
        act = nn.Tanh if cfg.activation == "tanh" else nn.ReLU
        discrete = dims["discrete"]
        actor = mlp([d, *hidden, a], act).to(device)
        critic = mlp([d, *hidden, 1], act).to(device)
        log_std = nn.Parameter(torch.zeros(a, device=device))
        params = [*actor.parameters(), *critic.parameters(), *([] if discrete else [log_std])]
        opt = adam(params, cfg.lr)
        old_logp, old_value = torch.randn(n, device=device), torch.randn(n, device=device)
        advantage, value_target = torch.randn(n, device=device), torch.randn(n, device=device)
        taken = torch.randint(a, (n,), device=device) if discrete else action
        eps, vclip = cfg.clip_epsilon, cfg.value_clip

        def update():
            if discrete:
                dist = torch.distributions.Categorical(logits=actor(obs))
                logp, entropy = dist.log_prob(taken), dist.entropy()
            else:  # gpurl's clipped Gaussian: a density inside [-1, 1], point masses at its bounds
                mean, std = actor(obs), log_std.exp()
                z = (taken - mean) / std
                inside = -0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)
                upper = torch.special.log_ndtr((mean - 1.0) / std)
                lower = torch.special.log_ndtr((-1.0 - mean) / std)
                at = torch.where(
                    taken >= 1 - 1e-6, upper, torch.where(taken <= -1 + 1e-6, lower, inside)
                )
                logp = at.sum(-1)
                entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1).expand(n)
            ratio = (logp - old_logp).exp()  # advantages arrive normalised per rollout
            policy = -torch.min(ratio * advantage, ratio.clamp(1 - eps, 1 + eps) * advantage).mean()
            value = critic(obs).squeeze(-1)
            clipped = old_value + (value - old_value).clamp(-vclip, vclip)
            v_loss = (
                0.5 * torch.max((value - value_target) ** 2, (clipped - value_target) ** 2).mean()
            )
            loss = policy + cfg.value_coef * v_loss - cfg.entropy_coef * entropy.mean()
            step(opt, loss, cfg.max_grad_norm)

        return update, [actor, critic]

    # the off-policy actor-critics: SAC, TD3, DDPG
    critics = nn.ModuleList(mlp([d + a, *hidden, 1]) for _ in range(1 if kind == "ddpg" else 2)).to(
        device
    )
    critic_target = copy.deepcopy(critics).requires_grad_(False)
    actor = mlp([d, *hidden, 2 * a if kind == "sac" else a]).to(device)
    actor_target = copy.deepcopy(actor).requires_grad_(False)
    critic_opt, actor_opt = (
        adam(critics.parameters(), cfg.critic_lr),
        adam(actor.parameters(), cfg.actor_lr),
    )
    tau, max_norm = float(cfg.tau), cfg.max_grad_norm

    def q_values(nets, x, act):
        xa = torch.cat((x, act), -1)
        return torch.stack([c(xa).squeeze(-1) for c in nets])

    if kind == "sac":
        log_alpha = nn.Parameter(torch.zeros((), device=device))
        alpha_opt = adam([log_alpha], cfg.alpha_lr)
        online, target = list(critics.parameters()), list(critic_target.parameters())

        def sample(x):
            mean, log_std = actor(x).chunk(2, -1)
            log_std = log_std.clamp(-5, 2)
            noise = torch.randn_like(mean)
            u = mean + log_std.exp() * noise
            logp = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
            logp = logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
            return torch.tanh(u), logp

        def update():
            alpha = log_alpha.detach().exp()
            with torch.no_grad():
                next_action, next_logp = sample(next_obs)
                soft = (
                    q_values(critic_target, next_obs, next_action).min(0).values - alpha * next_logp
                )
                y = reward + discount * soft
            q = q_values(critics, obs, action)
            step(
                critic_opt, F.mse_loss(q, y.expand_as(q), reduction="none").sum(0).mean(), max_norm
            )
            new_action, logp = sample(obs)
            q_new = q_values(critics, obs, new_action).min(0).values
            step(actor_opt, (alpha * logp - q_new).mean(), max_norm)
            step(alpha_opt, -(log_alpha * (logp.detach() - a)).mean(), None)
            with torch.no_grad():
                torch._foreach_lerp_(target, online, tau)

        return update, [actor, critics]

    online = [*actor.parameters(), *critics.parameters()]
    target = [*actor_target.parameters(), *critic_target.parameters()]
    updates = [0]

    def update():  # TD3 and DDPG: the actor and the targets every policy_delay updates
        with torch.no_grad():
            next_action = torch.tanh(actor_target(next_obs))
            if kind == "td3":
                noise = (torch.randn_like(next_action) * cfg.target_noise).clamp(
                    -cfg.target_noise_clip, cfg.target_noise_clip
                )
                next_action = (next_action + noise).clamp(-1, 1)
            y = reward + discount * q_values(critic_target, next_obs, next_action).min(0).values
        q = q_values(critics, obs, action)
        step(critic_opt, F.mse_loss(q, y.expand_as(q), reduction="none").sum(0).mean(), max_norm)
        updates[0] += 1
        if updates[0] % int(cfg.policy_delay) == 0:
            step(
                actor_opt,
                -critics[0](torch.cat((obs, torch.tanh(actor(obs))), -1)).mean(),
                max_norm,
            )
            with torch.no_grad():
                torch._foreach_lerp_(target, online, tau)

    return update, [actor, critics]


# -- timing ---------------------------------------------------------------------------------------


def timed(fn, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - start


def case_config(overrides: list[str], num_envs: int, device, *extra: str):
    """A case's composed config: its overrides at num_envs, no logger, no progress bar."""
    return load_config(
        [
            *overrides,
            f"env.num_envs={num_envs}",
            f"device={device}",
            "logger=none",
            "trainer.progress=false",
            "env.eval_envs=1",
            *extra,
        ]
    )


def run_case(name: str, overrides: list[str], num_envs: int, args, device) -> dict:
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = case_config(overrides, num_envs, device)
        trainer = build(cfg, Path(run_dir))
        agent, progress = trainer.agent, trainer.progress
        on_policy = isinstance(agent, OnPolicyAgent)
        while trainer.frames <= int(cfg.trainer.init_random_frames) or progress.update_count < 20:
            trainer.iteration()  # a full replay, or one rollout learned from
        if on_policy:
            batch = trainer._minibatch.clone()  # what the trainer hands update
            n = trainer.minibatch_size
        else:
            batch = trainer.buffer.sample(progress)
            n = int(cfg.trainer.batch_size)
        info = trainer.info
        (entry,) = info.obs_keys
        dims = {
            "obs": info.obs_shapes[entry][-1],
            "act": info.n_actions if info.discrete else info.action_dim,
            "discrete": info.discrete,
        }
        # plain values (a namespace, so the tool also runs on commits before core.config)
        keys = SimpleNamespace(**OmegaConf.to_container(cfg.agent, resolve=True))
        bare, _ = bare_update(cfg.agent.name, keys, dims, n, device)
        bare_optim, _ = bare_update(cfg.agent.name, keys, dims, n, device, step=optim_step)

        def learn():
            agent.update(batch, progress)
            progress.add_update()

        bare_ms, optim_ms, learn_ms, iter_update_ms, iter_frame_ms = [], [], [], [], []
        for _ in range(args.rounds):
            bare_ms.append(timed(bare, args.updates) / args.updates * 1e3)
            optim_ms.append(timed(bare_optim, args.updates) / args.updates * 1e3)
            learn_ms.append(timed(learn, args.updates) / args.updates * 1e3)
            updates, frames = progress.update_count, trainer.frames
            iterations = (
                max(1, args.updates // max(1, agent.epochs * agent.minibatches))
                if on_policy
                else args.updates
            )
            seconds = timed(trainer.iteration, iterations)
            iter_update_ms.append(seconds / max(1, progress.update_count - updates) * 1e3)
            iter_frame_ms.append(seconds / (trainer.frames - frames) * 1e3)
    bare_m, learn_m, iter_m = (statistics.median(x) for x in (bare_ms, learn_ms, iter_update_ms))
    return {
        "tool": "bench_hotpath",
        "case": name,
        "agent": cfg.agent.name,
        "env": cfg.env.name if cfg.env.name != "gym" else f"gym:{cfg.env.id}",
        "num_envs": num_envs,
        "overrides": list(args.overrides),
        "batch": n,
        "updates_per_round": args.updates,
        "rounds": args.rounds,
        "bare_ms_per_update": round(bare_m, 4),
        "bare_optim_ms_per_update": round(statistics.median(optim_ms), 4),
        "learn_ms_per_update": round(learn_m, 4),
        "iteration_ms_per_update": round(iter_m, 4),
        "iteration_ms_per_frame": round(statistics.median(iter_frame_ms), 4),
        "learn_over_bare": round(learn_m / bare_m, 3),
        "learn_over_bare_optim": round(learn_m / statistics.median(optim_ms), 3),
        "iteration_over_bare": round(iter_m / bare_m, 3),
        "rounds_ms": {
            "bare": [round(x, 4) for x in bare_ms],
            "bare_optim": [round(x, 4) for x in optim_ms],
            "learn": [round(x, 4) for x in learn_ms],
            "iteration": [round(x, 4) for x in iter_update_ms],
        },
        "commit": gpurl_commit(),
        **environment_record(torch.device(device)),
    }


def env_step_record(env_id: str, num_envs: int, args) -> dict:
    """ms per step of a Gymnasium env: gpurl's lean step, TorchRL's, Gymnasium's own."""
    import gymnasium as gym

    from gpurl.envs.gym import make_gym_env

    lean, through = make_gym_env(env_id, num_envs, seed=0), make_gym_env(env_id, num_envs, seed=0)
    through.direct = False  # ForeignEnv's lean path: TorchRL's step_and_maybe_reset
    own = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id)] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    own.reset(seed=0)
    lean.lean_reset(), through.lean_reset()
    spec = lean.full_action_spec[lean.action_key]
    actions = [spec.rand() for _ in range(100)]
    arrays = [a.numpy() for a in actions]
    steps = args.updates * 10
    sides = {
        "lean": lambda i: lean.lean_step(actions[i % 100]),
        "torchrl": lambda i: through.lean_step(actions[i % 100]),
        "gymnasium": lambda i: own.step(arrays[i % 100]),
    }
    ms = {k: [] for k in sides}
    for _ in range(args.rounds):
        for name, fn in sides.items():
            start = time.perf_counter()
            for i in range(steps):
                fn(i)
            ms[name].append((time.perf_counter() - start) / steps * 1e3)
    med = {k: statistics.median(v) for k, v in ms.items()}
    return {
        "tool": "bench_hotpath",
        "case": "env_step",
        "env": f"gym:{env_id}",
        "num_envs": num_envs,
        "steps_per_round": steps,
        "rounds": args.rounds,
        "lean_ms_per_step": round(med["lean"], 4),
        "torchrl_ms_per_step": round(med["torchrl"], 4),
        "gymnasium_ms_per_step": round(med["gymnasium"], 4),
        "lean_overhead_ms": round(med["lean"] - med["gymnasium"], 4),
        "rounds_ms": {k: [round(x, 4) for x in v] for k, v in ms.items()},
        "commit": gpurl_commit(),
        **environment_record(torch.device("cpu")),
    }


def denormal_fraction(trainer) -> float:
    """The share of the agent's optimizer moments (Adam's exp_avg and exp_avg_sq) that
    are nonzero and below float32's smallest normal number."""
    tiny, count, total = torch.finfo(torch.float32).tiny, 0, 0
    for optimizer in trainer.agent.optimizers().values():
        for state in optimizer.state.values():
            for key in ("exp_avg", "exp_avg_sq"):
                x = state.get(key)
                if x is not None:
                    count += int(((x != 0) & (x.abs() < tiny)).sum())
                    total += x.numel()
    return count / max(total, 1)


def denormal_record(name: str, overrides: list[str], num_envs: int, args, device) -> dict:
    """A training iteration's ms per update with denormal floats kept (IEEE gradual
    underflow, torch's default) and flushed to zero (gpurl's flush_denormal), on two
    trainers built and trained alike for --warmup-updates first, so that their optimizer
    moments hold what a run's hold by then. Rounds interleave the two."""
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = case_config(overrides, num_envs, device, "flush_denormal=false")
        pair = [build(cfg, Path(run_dir) / side) for side in ("kept", "flushed")]
        torch.set_flush_denormal(False)
        for trainer in pair:
            while trainer.progress.update_count < args.warmup_updates:
                trainer.iteration()
        fraction = denormal_fraction(pair[0])
        ms: dict[str, list[float]] = {"kept": [], "flushed": []}
        for _ in range(args.rounds):
            for side, trainer, flush in zip(ms, pair, (False, True), strict=True):
                torch.set_flush_denormal(flush)
                updates = trainer.progress.update_count
                seconds = timed(trainer.iteration, args.updates)
                ms[side].append(seconds / max(1, trainer.progress.update_count - updates) * 1e3)
        torch.set_flush_denormal(False)
    kept, flushed = (statistics.median(ms[k]) for k in ("kept", "flushed"))
    return {
        "tool": "bench_hotpath",
        "case": f"denormals_{name}",
        "agent": cfg.agent.name,
        "env": cfg.env.name if cfg.env.name != "gym" else f"gym:{cfg.env.id}",
        "num_envs": num_envs,
        "warmup_updates": args.warmup_updates,
        "overrides": list(args.overrides),
        "denormal_fraction_after_warmup": round(fraction, 4),
        "iteration_ms_per_update_kept": round(kept, 4),
        "iteration_ms_per_update_flushed": round(flushed, 4),
        "kept_over_flushed": round(kept / flushed, 3),
        "rounds_ms": {k: [round(x, 4) for x in v] for k, v in ms.items()},
        "commit": gpurl_commit(),
        **environment_record(torch.device(device)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--num-envs", nargs="+", type=int, default=[1, 8])
    p.add_argument("--updates", type=int, default=200, help="updates per side per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--max-ratio", type=float, default=None, help="exit 1 if learn/bare exceeds it")
    p.add_argument(
        "--env-steps", action="store_true", help="time Gymnasium env steps (see above) instead"
    )
    p.add_argument(
        "--denormals",
        action="store_true",
        help="time training iterations with denormals kept and flushed (see above) instead",
    )
    p.add_argument(
        "--warmup-updates", type=int, default=3000, help="--denormals: updates before timing"
    )
    p.add_argument(
        "--overrides", nargs="*", default=[], help="config overrides added to every case"
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.denormals:
        for name in args.cases:
            for num_envs in args.num_envs:
                overrides = [*CASES[name], *args.overrides]
                emit(denormal_record(name, overrides, num_envs, args, args.device))
        return 0
    if args.env_steps:
        for env_id in ("Acrobot-v1", "Pendulum-v1"):
            for num_envs in args.num_envs:
                emit(env_step_record(env_id, num_envs, args))
        return 0
    failed = False
    for name in args.cases:
        for num_envs in args.num_envs:
            record = run_case(name, [*CASES[name], *args.overrides], num_envs, args, args.device)
            emit(record)
            if args.max_ratio is not None and record["learn_over_bare"] > args.max_ratio:
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
