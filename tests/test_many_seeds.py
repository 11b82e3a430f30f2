"""Many seeds in one process (trainer.num_seeds, gpurl/core/runs.py): a stacked update is
N separate updates, runs are independent of each other, a resumed group equals the
uninterrupted one, and each run leaves the files a run of its own would."""

import json

import pytest
import torch
from tensordict import TensorDict

from gpurl.agents import make_agent
from gpurl.core.progress import Progress
from gpurl.core.runs import RunAdam, Runs, stack_modules, unstack_module
from gpurl.envs import make_env, make_eval_env
from gpurl.envs.info import env_info
from gpurl.errors import ConfigError
from gpurl.policies import LOG_PROB, VALUE
from gpurl.policies.recurrent import RecurrentCore, RunRecurrentCore
from gpurl.train import build, load_config, run
from gpurl.trainers.evaluation import greedy_mode
from tests.test_resume import tensors_equal, train_to

N, B = 3, 16


def build_agents(agent: str, env: str, extra=(), per_seed=None):
    """A stacked agent of N runs and N single agents holding the same weights (single
    agent k built with run k's per_seed values)."""
    per_seed = per_seed or {}
    base = [f"agent={agent}", f"env={env}", "agent.hidden=[16,16]", *extra]
    cfg = load_config(base)
    info = env_info(make_env(cfg.env, num_envs=2))
    stacked = make_agent(cfg.agent, info, Progress("cpu", 1, Runs(N, 0, per_seed)))
    singles = []
    for k in range(N):
        own = load_config([*base, *(f"agent.{key}={v[k]}" for key, v in per_seed.items())])
        singles.append(make_agent(own.agent, info, Progress("cpu")))
    for k, single in enumerate(singles):
        for name, module in single.modules().items():
            module.load_state_dict(run_state(stacked.modules()[name], k, module))
    return stacked, singles, info


def run_state(stacked_module, k, like):
    """Run k's state dict of a stacked module, shaped as `like`'s (a per-run [N]
    parameter, SAC's temperature, becomes run k's scalar)."""
    state = unstack_module(stacked_module, k).state_dict()
    ref = like.state_dict()
    return {key: v[k] if v.shape != ref[key].shape else v for key, v in state.items()}


def random_batch(info, kind: str, rows: int) -> TensorDict:
    """Replay-sample (off-policy) or rollout-minibatch (on-policy) entries of `rows` rows."""
    obs = {k: torch.randn(rows, *info.obs_shapes[k]) for k in info.obs_keys}
    if info.discrete:
        action = torch.randint(info.n_actions, (rows,))
    else:
        low, high = info.action_bounds
        action = low + (high - low) * torch.rand(rows, info.action_dim)
    batch = TensorDict({**obs, "action": action}, batch_size=[rows])
    if kind == "off":
        nxt = {k: torch.randn(rows, *info.obs_shapes[k]) for k in info.obs_keys}
        batch.set("next", TensorDict(nxt, batch_size=[rows]))
        batch.set("reward", torch.randn(rows))
        batch.set("discount", torch.full((rows,), 0.99))
        batch.set("weight", torch.ones(rows))
        batch.set("valid", torch.ones(rows))
    else:
        batch.set(LOG_PROB, -torch.rand(rows) - 0.5)
        for key in (VALUE, "advantage", "value_target"):
            batch.set(key, torch.randn(rows))
    return batch


LRS = [1e-3, 3e-3, 1e-2]
UPDATE_CASES = {
    "dqn": ("dqn", "cartpole", "off", ["agent.max_grad_norm=1.0"]),
    "dqn_per_seed_lr": ("dqn", "cartpole", "off", [], {"lr": LRS}),
    "sac_per_seed_lrs": ("sac", "pendulum", "off", [], {"actor_lr": LRS, "alpha_lr": LRS}),
    "ppo_per_seed_lr_entropy": (
        "ppo",
        "cartpole",
        "on",
        [],
        {"lr": LRS, "entropy_coef": [0.0, 0.01, 0.1]},
    ),
    "dqn_hard_target": ("dqn", "cartpole", "off", ["agent.target_update=hard"]),
    "sac": ("sac", "pendulum", "off", ["agent.max_grad_norm=0.5"]),
    "td3": ("td3", "pendulum", "off", ["agent.target_noise=0.0"]),
    "ppo": ("ppo", "cartpole", "on", []),
    "ppo_pendulum": ("ppo", "pendulum", "on", []),
    "pqn": ("pqn", "cartpole", "on", []),
    # convolutions (RunConv2d): MinAtar's one layer, and the pixel envs' CNN
    "pqn_minatar": ("pqn", "minatar", "on", ["agent.encoder.cnn=minatar"]),
    "dqn_pixels": ("dqn", "pixels", "off", ["agent.encoder.cnn=nature"]),
    # the quantile embedding (RunQuantileEmbedding); the fractions are fixed (below)
    "iqn_per_seed_lr": ("iqn", "cartpole", "off", ["agent.target_update=polyak"], {"lr": LRS}),
    "acqin_per_seed_lrs": (
        "acqin",
        "pendulum",
        "off",
        ["agent.target_update=polyak"],
        {"actor_lr": LRS, "critic_lr": LRS},
    ),
}


def row_fractions(*shape, device=None, **_):
    """torch.rand's stand-in for the quantile agents' fractions: every row the same
    evenly spaced values, so a stacked draw of N x B rows and N draws of B agree."""
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
    n = shape[-1]
    return ((torch.arange(n, device=device) + 0.5) / n).expand(*shape).clone()


@pytest.mark.parametrize("case", UPDATE_CASES)
def test_stacked_update_equals_separate_updates(case, monkeypatch):
    agent, env, kind, extra, *per_seed = UPDATE_CASES[case]
    # the actors' sampling noise is drawn once for all rows stacked, once per run apart:
    # zero it so both sides see the same actions (the math is what is compared)
    monkeypatch.setattr(torch, "randn_like", torch.zeros_like)
    torch.manual_seed(0)
    stacked, singles, info = build_agents(agent, env, extra, *per_seed)
    rand = torch.rand
    for _step in range(4):  # Adam's moments, TD3's delayed actor and a hard copy included
        batches = [random_batch(info, kind, B) for _ in range(N)]
        if agent in ("iqn", "acqin"):  # their quantile fractions, drawn per row
            monkeypatch.setattr(torch, "rand", row_fractions)
        update_all(stacked, singles, batches)
        monkeypatch.setattr(torch, "rand", rand)
    assert_runs_equal(stacked, singles)


def update_all(stacked, singles, batches) -> None:
    """One update of the stacked agent on the runs' batches joined, and of each single
    agent on its own."""
    stacked.update(torch.cat(batches), stacked.progress)
    stacked.progress.add_update()
    for single, batch in zip(singles, batches, strict=True):
        single.update(batch, single.progress)
        single.progress.add_update()


def assert_runs_equal(stacked, singles) -> None:
    """Run k's modules' state in the stacked agent is single agent k's."""
    for k, single in enumerate(singles):
        for name, module in single.modules().items():
            got = run_state(stacked.modules()[name], k, module)
            for key, want in module.state_dict().items():
                torch.testing.assert_close(
                    got[key], want, atol=2e-5, rtol=1e-4, msg=f"{name}.{key}"
                )


def test_stacked_recurrent_iqn_update_equals_separate_updates(tmp_path, monkeypatch):
    """Recurrent IQN's sequence update (the cores unrolled per run, the quantile head on
    the core's outputs, time-major rows read run-major) with N runs stacked: run k's
    weights move as run k's own agent's do on its B sequences (fractions fixed per row)."""
    from tests.test_recurrent_dqn import fill, small

    torch.manual_seed(0)
    lone = small(tmp_path, agent="iqn")
    fill(lone, 20)
    samples = [lone.buffer.sample(lone.progress) for _ in range(N)]
    extra = ["agent.recurrent=lstm", "agent.recurrent_hidden=8", "agent.sequence_length=4"]
    extra += ["agent.burn_in=2", "agent.sequence_overlap=2", "agent.n_step=3"]
    stacked, singles, _ = build_agents("iqn", "cartpole", [*extra, "agent.target_update=polyak"])
    monkeypatch.setattr(torch, "rand", row_fractions)
    for _step in range(3):
        update_all(stacked, singles, samples)
    assert_runs_equal(stacked, singles)


@pytest.mark.parametrize("critic", ["local", pytest.param("central", marks=pytest.mark.slow)])
def test_stacked_multi_robot_ppo_update_equals_separate_updates(critic):
    """IPPO and MAPPO on MarineNav: robots that do not act are masked, and each run's
    loss stays the mean over its own acting robots however many the other runs have."""
    torch.manual_seed(3)
    extra = [f"agent.critic={critic}"]
    stacked, singles, info = build_agents("ppo", "marinenav", extra)
    cfg = load_config(["env=marinenav", "agent=ppo"])
    for _step in range(3):
        batches = []
        for single in singles:
            env = make_env(cfg.env, num_envs=B, seed=int(torch.randint(1000, ())))
            td = single.policy(env.reset())  # real observations, actions, log-probs, values
            keys = [*single.policy.in_keys, *single.policy.out_keys]
            batch = td.select(*keys)
            group = td.get(info.valid_key).shape
            batch.set("advantage", torch.randn(group))
            batch.set("value_target", torch.randn(group))
            batch.set("valid", (torch.rand(group) < 0.6).float())  # runs differ in count
            batches.append(batch)
        stacked.update(torch.cat(batches), stacked.progress)
        for single, batch in zip(singles, batches, strict=True):
            single.update(batch, single.progress)
    for k, single in enumerate(singles):
        for name, module in single.modules().items():
            got = run_state(stacked.modules()[name], k, module)
            for key, want in module.state_dict().items():
                torch.testing.assert_close(got[key], want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("agent", ["ppo", "pqn"])
def test_per_seed_gamma_targets_equal_each_runs_own(agent):
    """GAE (PPO) and Q(lambda) (PQN) targets of a rollout of N runs with a gamma per run
    equal each run's targets computed alone with its gamma."""
    torch.manual_seed(2)
    gammas = [0.9, 0.99, 0.5]
    stacked, singles, info = build_agents(agent, "cartpole", (), {"gamma": gammas})
    T, E = 5, 4
    obs = {k: torch.randn(T, N * E, *info.obs_shapes[k]) for k in info.obs_keys}
    nxt = {
        "reward": torch.randn(T, N * E),
        "terminated": torch.rand(T, N * E) < 0.2,
        "done": torch.rand(T, N * E) < 0.3,
    }
    nxt["done"] |= nxt["terminated"]
    nxt.update({k: torch.randn(T, N * E, *info.obs_shapes[k]) for k in info.obs_keys})
    rollout = TensorDict({**obs, VALUE: torch.randn(T, N * E)}, batch_size=[T, N * E])
    rollout.set("next", TensorDict(nxt, batch_size=[T, N * E]))
    last = TensorDict(
        {k: torch.randn(N * E, *info.obs_shapes[k]) for k in info.obs_keys}, batch_size=[N * E]
    )
    got = stacked.compute_targets(rollout, last).clone()
    for k, single in enumerate(singles):
        own = slice(k * E, (k + 1) * E)
        want = single.compute_targets(rollout[:, own], last[own])
        for key in want.keys():
            torch.testing.assert_close(got[key][:, own], want[key], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_stacked_linear_is_each_runs_own_with_its_gradient_in_the_weights_layout(bias):
    """RunLinear: run k's rows through run k's Linear alone, forward and backward (input,
    weight and bias gradients); the weight's gradient comes out contiguous in the
    weight's own [N, out, in] layout, so no transposed copy of the weight is made."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(6, 3, bias=bias) for _ in range(N)]
    stacked = stack_modules(layers)
    x = torch.randn(N * 4, 6, requires_grad=True)
    xs = x.detach().clone().requires_grad_()
    out = stacked(x)
    want = torch.cat([m(part) for m, part in zip(layers, xs.chunk(N), strict=True)])
    torch.testing.assert_close(out, want)
    (out**2).sum().backward()
    (want**2).sum().backward()
    torch.testing.assert_close(x.grad, xs.grad)
    assert stacked.weight.grad.is_contiguous()
    for k, m in enumerate(layers):
        torch.testing.assert_close(stacked.weight.grad[k], m.weight.grad)
        if bias:
            torch.testing.assert_close(stacked.bias.grad[k], m.bias.grad)
    # an input that needs no gradient (observations) gets none, and costs no matmul
    stacked.zero_grad()
    stacked(torch.randn(N * 2, 6)).sum().backward()
    assert stacked.weight.grad is not None


@pytest.mark.parametrize("kind, parts", [("lstm", 2), ("gru", 1)])
def test_stacked_recurrent_core_is_each_runs_own(kind, parts):
    """RunRecurrentCore: run k's envs through run k's core alone, one acting step and a
    replayed sequence with episode ends, forward and backward (the input's and every
    weight's gradient); unstacked, run k is run k's core again."""
    torch.manual_seed(0)
    E, T = 2, 6
    cores = [RecurrentCore(kind, 3, 4, (N * E,), parts=parts) for _ in range(N)]
    stacked = stack_modules(cores)
    assert isinstance(stacked, RunRecurrentCore)
    S = cores[0].state_size
    x = torch.randn(T, N * E, 3, requires_grad=True)
    xs = x.detach().clone().requires_grad_()
    state, done = torch.randn(N * E, S), torch.rand(T, N * E) < 0.3
    out = stacked.sequence(x, state, done)
    rows = [slice(k * E, (k + 1) * E) for k in range(N)]
    want = torch.cat(
        [c.sequence(xs[:, r], state[r], done[:, r]) for c, r in zip(cores, rows, strict=True)], 1
    )
    torch.testing.assert_close(out, want)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (want * weight).sum().backward()
    torch.testing.assert_close(x.grad, xs.grad)
    for k, core in enumerate(cores):
        for name, p in core.rnn.named_parameters():
            torch.testing.assert_close(stacked.rnn.get_parameter(name).grad[k], p.grad)
            torch.testing.assert_close(unstack_module(stacked, k).rnn.get_parameter(name), p)
    step, new = stacked.step(x[0].detach(), state)
    for core, r in zip(cores, rows, strict=True):
        own, own_new = core.step(x[0, r].detach(), state[r])
        torch.testing.assert_close(step[r], own)
        torch.testing.assert_close(new[r], own_new)


def test_stacked_quantile_network_is_each_runs_own_with_shared_or_own_fractions():
    """IQN's network stacked: with fractions shared by a run's rows (acting: one set a
    call and run) each run's rows meet its own set and embedding; with a row's own
    (learning) too."""
    from gpurl.agents.iqn import QuantileNetwork
    from gpurl.policies.networks import SpecEncoder

    cfg = load_config(["env=cartpole"])
    info = env_info(make_env(cfg.env, num_envs=2))
    runs = Runs(N, 0)
    stacked = runs.build(lambda: QuantileNetwork(SpecEncoder(info), 2, [16], cos_embed=8))
    singles = [unstack_module(stacked, k) for k in range(N)]
    feature = torch.randn(N * 5, 3, stacked.encoder.out_features)  # run-major rows
    shared, own = torch.rand(N, 7), torch.rand(N * 5, 3, 7)
    z_shared = stacked.quantiles(feature, shared, shared=True)
    z_own = stacked.quantiles(feature, own)
    assert z_shared.shape == z_own.shape == (N * 5, 3, 7, 2)
    for k, single in enumerate(singles):
        rows = slice(5 * k, 5 * (k + 1))
        alone = single.quantiles(feature[rows], shared[k : k + 1], shared=True)
        torch.testing.assert_close(z_shared[rows], alone)
        torch.testing.assert_close(z_own[rows], single.quantiles(feature[rows], own[rows]))


@pytest.mark.parametrize("form", ["forward", "forward_grouped", "forward_per_run"])
def test_stacked_convolution_is_each_runs_own(form):
    """RunConv2d: run k's images through run k's filters alone, forward and backward, with
    a stride and padding, in both its forms (one grouped convolution, the GPU's; one per
    run, the CPU's); unstacked, run k is run k's Conv2d again."""
    torch.manual_seed(0)
    convs = [torch.nn.Conv2d(3, 5, 3, stride=2, padding=1) for _ in range(N)]
    stacked = stack_modules(convs)
    x = torch.randn(N * 4, 3, 9, 9)
    out = getattr(stacked, form)(x)
    want = torch.cat([conv(part) for conv, part in zip(convs, x.chunk(N), strict=True)])
    torch.testing.assert_close(out, want)
    (out**2).sum().backward()
    (want**2).sum().backward()
    for k, conv in enumerate(convs):
        torch.testing.assert_close(stacked.weight.grad[k], conv.weight.grad)
        torch.testing.assert_close(stacked.bias.grad[k], conv.bias.grad)
        single = unstack_module(stacked, k)
        assert isinstance(single, torch.nn.Conv2d) and single.stride == (2, 2)
        torch.testing.assert_close(single(x[:4]), conv(x[:4]))
    with pytest.raises(ConfigError, match="groups=1"):
        stack_modules([torch.nn.Conv2d(4, 4, 3, groups=2) for _ in range(N)])


class AdamPair:
    """RunAdam over N stacked Linear layers beside torch's Adam on each layer alone, with
    the same learning rates, stepped on the same data."""

    def __init__(self, seed: int, inputs: int, max_norm: float | None):
        torch.manual_seed(seed)
        self.nets = [torch.nn.Linear(inputs, 3) for _ in range(N)]
        self.stacked = stack_modules(self.nets)
        lrs = torch.tensor([1e-2, 3e-3, 1e-3])
        self.adam = RunAdam(self.stacked.parameters(), N, lrs)
        self.singles = [
            torch.optim.Adam(n.parameters(), lr=float(lr))
            for n, lr in zip(self.nets, lrs, strict=True)
        ]
        self.inputs, self.max_norm = inputs, max_norm

    def step(self):
        x = torch.randn(N * 8, self.inputs)
        self.adam.backward_and_step(self.stacked(x).square().mean(), max_norm=self.max_norm)
        for k, (net, opt) in enumerate(zip(self.nets, self.singles, strict=True)):
            opt.zero_grad()
            net(x[k * 8 : (k + 1) * 8]).square().mean().backward()
            if self.max_norm:
                torch.nn.utils.clip_grad_norm_(net.parameters(), self.max_norm)
            opt.step()

    def assert_equal(self):
        for k, net in enumerate(self.nets):
            torch.testing.assert_close(self.stacked.weight[k], net.weight, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(self.stacked.bias[k], net.bias, atol=1e-6, rtol=1e-5)


def test_run_adam_is_torch_adam_run_by_run():
    pair = AdamPair(seed=1, inputs=5, max_norm=0.1)
    for _ in range(3):
        pair.step()
    pair.assert_equal()


def test_run_adam_steps_each_run_with_its_own_step_count():
    """A run whose step count differs from the others' (what a PBT copy leaves) gets the
    bias correction of its own count, as torch's Adam with that count would give it."""
    pair = AdamPair(seed=2, inputs=4, max_norm=None)
    pair.step()
    for p in pair.stacked.parameters():  # run 1 as if it had stepped 7 times
        pair.adam.state[p]["step"][1] = 7.0
    for p in pair.nets[1].parameters():
        pair.singles[1].state[p]["step"].fill_(7.0)
    pair.step()
    pair.step()
    pair.assert_equal()
    assert pair.adam.state[pair.stacked.weight]["step"].tolist() == [3.0, 9.0, 3.0]


def test_runs_build_each_run_from_its_own_seed():
    """Run k's initial weights depend on seed + k alone, not on how many runs there are."""
    three = Runs(3, seed=5).build(lambda: torch.nn.Linear(4, 2))
    two = Runs(2, seed=6).build(lambda: torch.nn.Linear(4, 2))
    assert torch.equal(three.weight[1], two.weight[0])
    assert not torch.equal(three.weight[0], three.weight[1])


SMALL = ["trainer.progress=false", "logger=none", "env.eval_envs=2", "agent.hidden=[16,16]"]
# epsilon at its end value within the run: a changed epsilon_end surely changes some of
# run 1's actions (over the default 10k frames it moves epsilon by 0.7%)
OFF_POLICY_SMALL = [
    "env=cartpole",
    "env.num_envs=4",
    "trainer.batch_size=16",
    "trainer.init_random_frames=32",
    "trainer.total_frames=160",
    "trainer.eval_interval=80",
    "agent.epsilon_frames=64",
]
INDEPENDENCE_CASES = {
    "dqn": ["agent=dqn", *OFF_POLICY_SMALL],
    # IQN's acting draws a set of fractions per run; its target moves within the run
    # (hard copies come every 10k updates)
    "iqn": ["agent=iqn", "agent.target_update=polyak", *OFF_POLICY_SMALL],
    "ppo": [
        "env=cartpole",
        "agent=ppo",
        "env.num_envs=4",
        "trainer.rollout_steps=8",
        "agent.minibatches=2",
        "trainer.total_frames=96",
        "trainer.eval_interval=64",
    ],
}


CHANGES = [
    ("dqn", "lr", "[1e-3,1e-3,1e-3]", "[1e-3,1e-2,1e-3]"),
    pytest.param(
        "dqn", "epsilon_end", "[0.05,0.05,0.05]", "[0.05,0.5,0.05]", marks=pytest.mark.slow
    ),
    pytest.param("dqn", "gamma", "[0.99,0.99,0.99]", "[0.99,0.5,0.99]", marks=pytest.mark.slow),
    pytest.param("iqn", "gamma", "[0.99,0.99,0.99]", "[0.99,0.5,0.99]", marks=pytest.mark.slow),
    ("ppo", "lr", "[1e-3,1e-3,1e-3]", "[1e-3,1e-2,1e-3]"),
    pytest.param("ppo", "entropy_coef", "[0.0,0.0,0.0]", "[0.0,0.5,0.0]", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("case, key, same, changed", CHANGES)
def test_changing_one_runs_hyperparameter_leaves_the_others_unchanged(
    tmp_path, case, key, same, changed
):
    def train(values):
        args = [*INDEPENDENCE_CASES[case], *SMALL, "trainer.num_seeds=3"]
        cfg = load_config([*args, f"trainer.per_seed.{key}={values}"])
        trainer = build(cfg, tmp_path / values)
        trainer.train()
        return trainer

    a = train(same)
    b = train(changed)
    for name, module in a.agent.modules().items():
        if name == "exploration":
            continue
        for k in range(3):
            same = tensors_equal(
                unstack_module(module, k).state_dict(),
                unstack_module(b.agent.modules()[name], k).state_dict(),
            )
            assert same == (k != 1), (name, k)
    assert returns(a.run_eval_log[0]) == returns(b.run_eval_log[0])
    assert returns(a.run_eval_log[2]) == returns(b.run_eval_log[2])


def returns(log):
    """An evaluation log less its clock times."""
    return [{k: v for k, v in e.items() if k not in ("wall_s", "eval_s")} for e in log]


@pytest.mark.slow  # three short runs: seconds (CI runs slow tests)
def test_resumed_group_equals_the_uninterrupted_group_bitwise(tmp_path):
    args = [
        "env=cartpole",
        "env.num_envs=4",
        "agent.hidden=[32,32]",
        "trainer.batch_size=32",
        "trainer.init_random_frames=64",
        "trainer.num_seeds=2",
        "trainer.per_seed.lr=[1e-3,3e-3]",
        "trainer.progress=false",
        "trainer.log_interval=64",
        "trainer.eval_interval=128",
        "trainer.checkpoint_interval=128",
        "seed=3",
    ]
    whole, whole_summary = train_to(args, 256, tmp_path / "whole")
    train_to(args, 128, tmp_path / "first")
    second, second_summary = train_to(args, 256, tmp_path / "second", resume=tmp_path / "first")
    assert second.frames == whole.frames == 256
    assert [returns(x) for x in second.run_eval_log] == [returns(x) for x in whole.run_eval_log]
    assert second_summary["eval_returns"] == whole_summary["eval_returns"]
    for name, module in whole.agent.modules().items():
        assert tensors_equal(module.state_dict(), second.agent.modules()[name].state_dict()), name


def test_each_run_leaves_the_files_of_a_run_of_its_own(tmp_path):
    from tools.sweep_summary import load_runs

    cfg = load_config([*INDEPENDENCE_CASES["dqn"], *SMALL, "trainer.num_seeds=3", "seed=7"])
    path = run(cfg, tmp_path)
    group = json.loads(path.read_text())
    assert group["seeds"] == [7, 8, 9] and len(group["eval_returns"]) == 3
    assert group["aggregate"]["runs"] == 3
    lo, hi = group["aggregate"]["iqm_ci"]
    assert lo <= group["aggregate"]["iqm"] <= hi
    assert (tmp_path / "seeds_curve.png").stat().st_size > 0
    runs = load_runs(tmp_path)  # as tools/sweep_summary.py reads a sweep
    assert sorted(r["seed"] for r in runs) == [7, 8, 9]
    for r in runs:
        assert r["eval_return"] == group["eval_returns"][r["seed"] - 7]
        assert r["eval_history"][-1][0] == group["frames"] == 160
        assert r["commit"] == group["commit"]
    assert {tuple(r["overrides"]) for r in runs} == {tuple(runs[0]["overrides"])}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["agent=rainbow", "trainer.num_seeds=2"], "agent=rainbow trains one seed per process"),
        (["trainer.num_seeds=2", "trainer.per_seed.lr=[1e-3]"], "has 1 values"),
        (["trainer.per_seed.lr=[1e-3,2e-3]"], "needs trainer.num_seeds > 1"),
        (
            ["agent=sac", "env=pendulum", "trainer.num_seeds=2", "trainer.per_seed.lr=[1,2]"],
            "no agent.lr",
        ),
        (["trainer.num_seeds=2", "agent.prioritized=true"], "prioritized replay"),
    ],
)
def test_many_seeds_refuses_what_it_cannot_do_in_one_line(tmp_path, overrides, message):
    cfg = load_config([*overrides, *SMALL])
    with pytest.raises(ConfigError, match=message) as err:
        build(cfg, tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.slow  # torch.compile of the stacked update: a minute on a CPU
@pytest.mark.parametrize(
    "agent, env, own",
    [
        ("dqn", "cartpole", ["trainer.init_random_frames=32", "trainer.batch_size=16"]),
        ("ppo", "pendulum", ["trainer.rollout_steps=8", "agent.minibatches=2"]),
        # a rate per run: RunAdam's per-run step, which runs eagerly inside a compiled
        # update on the CPU (core/runs.py says why)
        ("pqn", "cartpole", ["trainer.rollout_steps=8", "trainer.per_seed.lr=[1e-3,3e-3]"]),
        # the stacked quantile embedding (its fractions drawn in the graph, fallback_random)
        ("iqn", "cartpole", ["trainer.init_random_frames=32", "trainer.batch_size=16"]),
    ],
)
def test_compiled_stacked_update_matches_eager(tmp_path, agent, env, own):
    def trained(mode):
        torch.manual_seed(0)
        cfg = load_config(
            [
                f"agent={agent}",
                f"env={env}",
                *SMALL,
                "env.num_envs=4",
                "trainer.num_seeds=2",
                *own,
                f"compile.update={mode == 'full'}",
            ]
        )
        trainer = build(cfg, tmp_path / mode)
        if hasattr(trainer, "buffer"):  # off-policy: the fused step's draw
            buffer = trainer.buffer  # (uniform_index) on the eager side too
            buffer.sample = lambda progress=None: buffer.draw(buffer.bounds, progress)
        # and the compiled draw from the eager generator
        with torch._inductor.config.patch(fallback_random=True):
            for _ in range(12):
                trainer.iteration()
        return trainer

    eager, full = trained("eager"), trained("full")
    for name, module in eager.agent.modules().items():
        for key, want in module.state_dict().items():
            got = full.agent.modules()[name].state_dict()[key]
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3, msg=f"{name}.{key}")


def test_a_group_evaluates_in_one_pass_where_the_protocol_splits_by_run(tmp_path):
    """CartPole's greedy-return protocol splits by env slice: N runs evaluate on one env
    of N x eval_envs copies, each run's return the mean of its slice. MarineNav has a
    protocol of its own (fixed episode sets): each run keeps copies of its own."""
    cfg = load_config(["env=cartpole", "agent=dqn", *SMALL, "trainer.num_seeds=3"])
    trainer = build(cfg, tmp_path / "cartpole")
    (group_env,) = trainer.run_eval_envs
    assert group_env.batch_size.numel() == 3 * 2
    trainer.evaluate()
    got = [log[-1]["return"] for log in trainer.run_eval_log]
    fresh = make_eval_env({**cfg.env, "eval_envs": 6}, seed=0)  # the same copies again
    with greedy_mode():
        want = fresh.play_episodes(trainer.agent.policy)["return"].reshape(3, 2).mean(1)
    assert got == pytest.approx(want.tolist())
    cfg = load_config(
        ["env=marinenav", "agent=dqn", *SMALL, "env.eval_envs=60", "trainer.num_seeds=2"]
    )
    assert len(build(cfg, tmp_path / "marinenav").run_eval_envs) == 2


def logged_intervals(run_dir):
    """{frames: (episodes, mean return)} of a run's CSV-logged training intervals."""
    (logs,) = (run_dir / "logs").iterdir()

    def column(name):
        lines = (logs / "scalars" / "train" / f"episode_{name}.csv").read_text().split()
        return {int(f): float(v) for f, v in (line.split(",") for line in lines)}

    counts, returns = column("episodes"), column("return")
    return {f: (counts[f], returns[f]) for f in counts}


@pytest.mark.parametrize("seeds", [1, 2])
def test_summaries_give_the_last_hundred_training_episodes(tmp_path, seeds):
    """final_train_return, the figure published DQN curves report (the exploring
    policy's last 100 or more episodes, whole log intervals), in a run's summary and in
    each run's of a group, from the episodes each run finished."""
    cfg = load_config(
        [*INDEPENDENCE_CASES["dqn"], "trainer.progress=false", "env.eval_envs=2",
         "agent.hidden=[16,16]", "trainer.total_frames=4000", "trainer.eval_interval=4000",
         "trainer.log_interval=400", f"trainer.num_seeds={seeds}"]
    )  # fmt: skip
    path = run(cfg, tmp_path)
    logged = logged_intervals(tmp_path)
    if seeds == 1:  # exactly the logged intervals from since_frames on
        final = json.loads(path.read_text())["final_train_return"]
        window = [v for f, v in logged.items() if f >= final["since_frames"]]
        assert final["episodes"] == sum(n for n, _ in window) >= 100
        assert final["return"] == pytest.approx(sum(n * r for n, r in window) / final["episodes"])
        return
    for seed in range(seeds):  # each run's own episodes (the CSV sums the runs')
        summary = json.loads((tmp_path / "seeds" / f"seed_{seed}" / "summary.json").read_text())
        final = summary["final_train_return"]
        # CartPole's episodes are tens of frames: its 2 envs make hundreds
        assert final["episodes"] >= 100 and final["return"] > 0
        window = sum(n for f, (n, _) in logged.items() if f >= final["since_frames"])
        assert final["episodes"] < window  # one run's share of both runs' episodes
