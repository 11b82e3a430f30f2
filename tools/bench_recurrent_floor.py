"""Recurrent PPO against feedforward PPO, gpurl's and a bare PyTorch loop's, in one run:
the floor under the target "recurrent frames/s at least 0.6x feedforward's".

    python tools/bench_recurrent_floor.py                  # ppo_cartpole_masked_lstm's shapes
    python tools/bench_recurrent_floor.py --rounds 5 --out docs/bench/train/FILE.jsonl
    python tools/bench_recurrent_floor.py --device cuda --num-envs 8 1024

Five sides, their rounds interleaved (a shared machine disturbs them alike), each timing
whole training iterations (a rollout of T x N frames, then epochs x minibatches updates):

    gpurl_lstm          trainer.iteration() of the preset (an LSTM for the actor and one
                        for the critic)
    gpurl_ff            the same with agent.recurrent=null agent.critic_recurrent=false
    bare_ff             plain PyTorch on the same shapes and the same env: an MLP actor and
                        critic, Categorical sampling, GAE, advantages normalised per
                        rollout, the clipped surrogate and value loss, one fused
                        torch.optim.Adam with the gradient-norm clip; no observation or
                        reward normalisation, no annealing
    bare_lstm           bare_ff with a torch.nn.LSTM of recurrent_hidden units before each
                        MLP, the update running each LSTM over the whole T-step sequence
                        from the state the rollout began with: torch's fused LSTM (oneDNN on
                        the CPU, cuDNN on CUDA), which cannot zero the state inside a
                        sequence. So it ignores episode ends: a lower bound of what an
                        exact replay can cost, not a correct one
    bare_lstm_stepped   bare_lstm's update stepping each LSTM one step at a time with the
                        state multiplied by the episode-end mask (CleanRL's ppo_atari_lstm):
                        exact

Each record holds every side's frames/s (the median over rounds) and the ratios
recurrent / feedforward of gpurl and of the bare loop. What bounds the 0.6x target on a
device is bare_lstm / bare_ff: the recurrent work at the fastest kernels torch has for it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpurl.envs import make_env  # noqa: E402
from gpurl.envs.info import env_info  # noqa: E402
from gpurl.train import build, load_config  # noqa: E402
from tools.common import emit, environment_record, gpurl_commit  # noqa: E402

PRESET = "ppo_cartpole_masked_lstm"
FEEDFORWARD = ["agent.recurrent=null", "agent.critic_recurrent=false"]
SIDES = ("gpurl_lstm", "gpurl_ff", "bare_lstm", "bare_lstm_stepped", "bare_ff")


class BareNet(nn.Module):
    """An actor or a critic: [LSTM ->] Linear + ReLU per hidden width -> Linear(out)."""

    def __init__(self, obs: int, out: int, hidden: list[int], recurrent: int):
        super().__init__()
        self.lstm = nn.LSTM(obs, recurrent) if recurrent else None
        layers, width = [], recurrent or obs
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.head = nn.Sequential(*layers, nn.Linear(width, out))

    def step(self, obs, state):
        """One acting step on obs [N, D] from state (h, c), each [1, N, H]."""
        if self.lstm is None:
            return self.head(obs), state
        y, state = self.lstm(obs.unsqueeze(0), state)
        return self.head(y[0]), state

    def sequence(self, obs, state, keep, stepped: bool):
        """The outputs over obs [T, N, D] from `state`; keep [T, N] is 0 after a step whose
        episode ended. Fused (stepped=False): keep is ignored, the sequence runs in one
        call. Stepped: a step at a time, the state multiplied by keep after each."""
        if self.lstm is None:
            return self.head(obs)
        if not stepped:
            return self.head(self.lstm(obs, state)[0])
        outs = []
        for t in range(obs.shape[0]):
            y, (h, c) = self.lstm(obs[t : t + 1], state)
            k = keep[t].view(1, -1, 1)
            state = (h * k, c * k)
            outs.append(y[0])
        return self.head(torch.stack(outs))


class BareIteration:
    """A plain PyTorch PPO iteration on the preset's shapes, stepping gpurl's env (the
    same work as the trainer's env; everything else is torch.nn and torch.optim)."""

    def __init__(self, cfg, recurrent: int, stepped: bool, device: torch.device):
        agent, trainer = cfg.agent, cfg.trainer
        self.env = make_env(cfg.env, device=device, seed=int(cfg.seed) + 2)
        info = env_info(self.env)
        obs_dim, self.n_actions = int(info.obs_shapes["observation"][-1]), int(info.n_actions)
        hidden = list(agent.hidden)
        self.actor = BareNet(obs_dim, self.n_actions, hidden, recurrent).to(device)
        self.critic = BareNet(obs_dim, 1, hidden, recurrent).to(device)
        self.params = [*self.actor.parameters(), *self.critic.parameters()]
        self.opt = torch.optim.Adam(self.params, lr=float(agent.lr), fused=True)
        self.T, self.N = int(trainer.rollout_steps), int(cfg.env.num_envs)
        self.epochs, self.minibatches = int(agent.epochs), int(agent.minibatches)
        self.gamma, self.lam = float(agent.gamma), float(agent.gae_lambda)
        self.clip, self.max_norm = float(agent.clip_epsilon), agent.max_grad_norm
        self.value_coef = float(agent.value_coef)
        self.recurrent, self.stepped, self.device = recurrent, stepped, device
        zeros = torch.zeros(1, self.N, recurrent or 1, device=device)
        self.state_a = self.state_c = (zeros, zeros)
        self.obs = self.env.lean_reset()["observation"]

    def __call__(self) -> None:
        T, N = self.T, self.N
        start_a, start_c = self.state_a, self.state_c
        obs, actions, logps, values, rewards, keeps = [], [], [], [], [], []
        with torch.no_grad():
            for _ in range(T):
                logits, self.state_a = self.actor.step(self.obs, self.state_a)
                value, self.state_c = self.critic.step(self.obs, self.state_c)
                dist = torch.distributions.Categorical(logits=logits)
                action = dist.sample()
                nxt, after = self.env.lean_step(action)
                keep = (~nxt["done"]).float().view(N)
                if self.recurrent:  # the acting state restarts where an episode ended
                    k = keep.view(1, N, 1)
                    self.state_a = (self.state_a[0] * k, self.state_a[1] * k)
                    self.state_c = (self.state_c[0] * k, self.state_c[1] * k)
                obs.append(self.obs)
                actions.append(action)
                logps.append(dist.log_prob(action))
                values.append(value[:, 0])
                rewards.append(nxt["reward"].view(N))
                keeps.append(keep)
                self.obs = after["observation"]
            last = self.critic.step(self.obs, self.state_c)[0][:, 0]
            obs, actions, logps, values, rewards, keeps = map(
                torch.stack, (obs, actions, logps, values, rewards, keeps)
            )
            advantages = torch.empty_like(rewards)
            gae, next_value = torch.zeros(N, device=self.device), last
            for t in range(T - 1, -1, -1):  # GAE; keep cuts the bootstrap at episode ends
                delta = rewards[t] + self.gamma * next_value * keeps[t] - values[t]
                gae = delta + self.gamma * self.lam * keeps[t] * gae
                advantages[t] = gae
                next_value = values[t]
            returns = advantages + values
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        envs = torch.arange(N, device=self.device)
        for _ in range(self.epochs):
            for cols in envs.chunk(self.minibatches):  # minibatches of whole env sequences
                state_a = (start_a[0][:, cols], start_a[1][:, cols])
                state_c = (start_c[0][:, cols], start_c[1][:, cols])
                o, k = obs[:, cols], keeps[:, cols]
                logits = self.actor.sequence(o, state_a, k, self.stepped)
                value = self.critic.sequence(o, state_c, k, self.stepped)[..., 0]
                adv = advantages[:, cols]
                logp = torch.distributions.Categorical(logits=logits).log_prob(actions[:, cols])
                ratio = (logp - logps[:, cols]).exp()
                surrogate = torch.min(ratio * adv, ratio.clamp(1 - self.clip, 1 + self.clip) * adv)
                value_loss = (value - returns[:, cols]).pow(2).mean()
                loss = -surrogate.mean() + self.value_coef * value_loss
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                if self.max_norm:
                    nn.utils.clip_grad_norm_(self.params, float(self.max_norm), foreach=True)
                self.opt.step()


def sides_for(preset: str, num_envs: int, args, run_dir: str) -> tuple:
    common = [
        f"experiment={preset}",
        f"device={args.device}",
        f"env.num_envs={num_envs}",
        "env.eval_envs=2",
        f"trainer.total_frames={num_envs * 4096 * 64}",
        "logger=none",
        "trainer.progress=false",
        f"threads={args.threads}",
        *args.set,
    ]
    torch.manual_seed(0)
    cfg = load_config(common)
    if cfg.agent.get("recurrent") != "lstm":
        raise SystemExit(f"{preset} has no LSTM core (agent.recurrent=lstm): nothing to compare")
    device = torch.device(args.device)
    hidden = int(cfg.agent.recurrent_hidden)
    feedforward = load_config(common + FEEDFORWARD)
    makers = {
        "gpurl_lstm": lambda: build(cfg, Path(run_dir) / "lstm").iteration,
        "gpurl_ff": lambda: build(feedforward, Path(run_dir) / "ff").iteration,
        "bare_lstm": lambda: BareIteration(cfg, hidden, False, device),
        "bare_lstm_stepped": lambda: BareIteration(cfg, hidden, True, device),
        "bare_ff": lambda: BareIteration(cfg, 0, False, device),
    }
    return cfg, {side: makers[side]() for side in args.sides}


def timed(fn, device: torch.device, calls: int) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def bench_case(preset: str, num_envs: int, args) -> dict:
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as run_dir:
        cfg, sides = sides_for(preset, num_envs, args, run_dir)
        frames = int(cfg.trainer.rollout_steps) * num_envs
        for fn in sides.values():
            for _ in range(args.warmup):
                fn()
        seconds = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side, fn in sides.items():
                seconds[side].append(timed(fn, device, args.iterations))
    fps = {
        side: round(frames * args.iterations / statistics.median(s), 1)
        for side, s in seconds.items()
    }
    ratios = {}
    for name, (rec, ff) in {
        "gpurl_lstm_over_ff": ("gpurl_lstm", "gpurl_ff"),
        "bare_lstm_over_ff": ("bare_lstm", "bare_ff"),
        "bare_lstm_stepped_over_ff": ("bare_lstm_stepped", "bare_ff"),
        "gpurl_lstm_over_bare_lstm": ("gpurl_lstm", "bare_lstm"),
    }.items():
        if rec in fps and ff in fps:
            ratios[name] = round(fps[rec] / fps[ff], 3)
    return {
        "bench": "bench_recurrent_floor",
        "preset": preset,
        "num_envs": num_envs,
        "rollout_steps": int(cfg.trainer.rollout_steps),
        "epochs": int(cfg.agent.epochs),
        "minibatches": int(cfg.agent.minibatches),
        "recurrent_hidden": int(cfg.agent.recurrent_hidden),
        "overrides": args.set,
        "frames_per_iteration": frames,
        "iterations_per_round": args.iterations,
        "rounds": args.rounds,
        "frames_per_sec": fps,
        "ratios": ratios,
        "seconds": {side: [round(x, 4) for x in s] for side, s in seconds.items()},
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--preset", default=PRESET, help="an on-policy preset with agent.recurrent")
    p.add_argument("--num-envs", nargs="+", type=int, default=[8])
    p.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    p.add_argument("--device", default="cpu")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="Hydra overrides")
    p.add_argument("--warmup", type=int, default=2, help="iterations per side before timing")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds, the sides interleaved")
    p.add_argument("--iterations", type=int, default=2, help="iterations per side and round")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--out", type=Path, default=None, help="also append the records here")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for num_envs in args.num_envs:
        emit(bench_case(args.preset, num_envs, args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
