"""The compile group (trainers/compile.py): compiled agent steps give the eager results
to float rounding, amp to bf16 precision, and a compiled collector acts as the eager one.

Tolerances: compiled vs eager 1e-4 relative on losses and weights after three updates
(Inductor fuses and reorders float math; fallback_random keeps the random draws of
SAC and TD3 those of the eager generator). amp vs fp32: bf16 keeps 8 bits of mantissa,
so the first update's Q-values within 2% and the TD losses, which square a difference
of two such values, within 15% (measured: 5.5% for SAC's first update on an H100).
Compiling on CPU takes seconds per graph, so
the per-agent update checks are marked slow; the fast suite compiles DQN's policy, env
and update once (test_compiled_collector_acts_as_the_eager_one).
"""

import math

import pytest
import torch
from tensordict import TensorDict

from gpurl.core.compile import CompileSpec
from gpurl.errors import ConfigError
from gpurl.train import build, load_config
from tools.common import training_batch

from .conftest import iterate_without_syncs, requires_cuda

SEQUENCES = [
    "agent.recurrent=lstm",
    "agent.recurrent_hidden=16",
    "agent.sequence_length=4",
    "agent.burn_in=2",
    "agent.sequence_overlap=2",
]
AGENTS = {
    "dqn": ["env=cartpole", "agent=dqn"],
    "iqn": ["env=cartpole", "agent=iqn"],
    "rainbow": ["env=cartpole", "agent=rainbow"],
    "acqin": ["env=pendulum", "agent=acqin"],
    "ddpg": ["env=pendulum", "agent=ddpg"],
    "td3": ["env=pendulum", "agent=td3", "agent.policy_delay=2"],
    "sac": ["env=pendulum", "agent=sac"],
    "ppo": ["env=cartpole", "agent=ppo"],
    "ppo_pendulum": ["env=pendulum", "agent=ppo"],
    "pqn": ["env=cartpole", "agent=pqn"],
    "a2c": ["env=cartpole", "agent=a2c"],  # PPO's update, its own loss
    # the pixel presets' networks (tile CNN for PPO, Nature CNN + LayerNorm for PQN)
    "ppo_pixels": ["experiment=pixels_ppo"],
    "ppo_pixels_shared": [
        "experiment=pixels_ppo",
        "agent.shared_encoder=true",
    ],
    "pqn_pixels": ["experiment=pixels_pqn"],
    # R2D2's sequence update (the draw stays eager), DQN's and IQN's heads
    "dqn_lstm": ["env=cartpole", "agent=dqn", *SEQUENCES, "agent.prioritized=true"],
    "iqn_gru": ["env=cartpole", "agent=iqn", *SEQUENCES, "agent.recurrent=gru"],
}
FAST: tuple[str, ...] = ()  # compiling takes ~10 s a graph on 2 cores: all slow


def trainer(tmp_path, overrides, compile_overrides=(), device="cpu", last=()):
    cfg = load_config(
        [
            *overrides,
            *compile_overrides,
            f"device={device}",
            "env.num_envs=8",
            "env.eval_envs=2",
            "agent.hidden=[32,32]",
            "logger=none",
            "trainer.progress=false",
            "trainer.init_random_frames=1000000",  # off-policy agents: no update in build
            "trainer.batch_size=32",
            *last,
        ]
    )
    return build(cfg, tmp_path)


def a_batch(tr) -> TensorDict:
    return training_batch(tr)


def run_updates(agent, batch, n=3, seed=1):
    """n updates on `batch`, each counted as the trainer counts it (TD3's delayed actor
    steps on the even ones)."""
    torch.manual_seed(seed)
    out = []
    for _ in range(n):
        out.append(agent.update(batch.clone(), agent.progress))
        agent.progress.add_update()
    return out


def assert_close_runs(a, b, ma, mb, rtol):
    for step_a, step_b in zip(ma, mb, strict=True):
        for key in step_a.keys():
            if key == "priority":
                continue
            torch.testing.assert_close(step_b[key], step_a[key], rtol=rtol, atol=rtol)
    for name, module in a.modules().items():
        other = b.modules()[name].state_dict()
        for k, v in module.state_dict().items():
            torch.testing.assert_close(other[k], v, rtol=rtol, atol=rtol, msg=f"{name}.{k}")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in AGENTS]
)
def test_compiled_update_matches_eager(tmp_path, name):
    eager = trainer(tmp_path / "eager", AGENTS[name])
    compiled = trainer(tmp_path / "compiled", AGENTS[name], ["compile.update=true"])
    batch = a_batch(eager)
    with torch._inductor.config.patch(fallback_random=True):
        mb = run_updates(compiled.agent, batch)
    assert_close_runs(eager.agent, compiled.agent, run_updates(eager.agent, batch), mb, 1e-4)


@pytest.mark.parametrize("name", ["dqn", pytest.param("sac", marks=pytest.mark.slow)])
def test_amp_update_within_bf16_tolerance(tmp_path, name):
    fp32 = trainer(tmp_path / "fp32", AGENTS[name])
    amp = trainer(tmp_path / "amp", AGENTS[name], ["compile.amp=true"])
    batch = a_batch(fp32)
    ma, mb = run_updates(fp32.agent, batch), run_updates(amp.agent, batch)
    loss = "loss" if name == "dqn" else "critic_loss"
    # From equal weights the Q-values agree to bf16's precision (2%); a TD loss squares
    # the difference of two such values, which amplifies their error (15%).
    torch.testing.assert_close(mb[0]["q"].float(), ma[0]["q"], rtol=0.02, atol=0.02)
    for a, b in zip(ma, mb, strict=True):
        assert torch.isfinite(b[loss])
        assert (b[loss] - a[loss]).abs() <= 0.15 * a[loss].abs() + 1e-3
    # weights, gradients and optimizer state stay fp32
    for module in amp.agent.modules().values():
        assert all(p.dtype == torch.float32 for p in module.parameters())
    for opt in amp.agent.optimizers().values():
        for state in opt.state.values():
            assert state["exp_avg"].dtype == torch.float32


@pytest.mark.slow
def test_compiled_collector_acts_as_the_eager_one(tmp_path):
    """compile=full (policy, env and update compiled): same trajectories as eager when
    acting greedily from the same state (epsilon 0), and training iterations run."""
    greedy = ["agent.epsilon_start=0", "agent.epsilon_end=0", "trainer.init_random_frames=0"]
    eager = trainer(tmp_path / "eager", AGENTS["dqn"], last=greedy)
    full = trainer(tmp_path / "full", AGENTS["dqn"], ["compile=full"], last=greedy)
    assert eager.collector.act is eager.agent.policy
    assert full.collector.act is not full.agent.policy  # evaluation stays eager
    assert full.collector.step != full.env.lean_step  # the compiled step
    a, b = eager.collector.rollout().clone(), full.collector.rollout().clone()
    for key in ("action", ("next", "reward"), ("next", "done"), ("next", "observation")):
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-5)
    full.iteration()
    assert full.frames > 0


@pytest.mark.slow
def test_compiled_acqin_collector_with_the_eval_search(tmp_path):
    """AC-IQN's policy network holds its actor and critic (CriticCheckedActor): compiled
    collection on MarineNav (agent compiled, env eager) traces them and acts as eager."""
    overrides = [
        "agent=acqin",
        "env=marinenav_continuous",
        "env.max_episode_steps=20",
        "agent.eval_search=3",
        "agent.critic_width=32",
        "agent.critic_hidden=[32]",
    ]
    greedy = ["agent.epsilon_start=0", "agent.epsilon_end=0", "trainer.init_random_frames=0"]
    greedy += ["env.eval_envs=60"]  # MarineNav's fixed evaluation set
    eager = trainer(tmp_path / "eager", overrides, last=greedy)
    full = trainer(tmp_path / "full", overrides, ["compile=full", "compile.env=false"], last=greedy)
    a, b = eager.collector.rollout().clone(), full.collector.rollout().clone()
    torch.testing.assert_close(b["agents", "action"], a["agents", "action"], rtol=1e-5, atol=1e-5)
    full.iteration()
    assert full.frames > 0


def test_compile_bad_input_is_one_line():
    with pytest.raises(ConfigError, match="compile.cudagraphs needs a CUDA device"):
        CompileSpec.from_config({"cudagraphs": True}, "cpu")
    with pytest.raises(ConfigError, match="unknown compile option"):
        CompileSpec.from_config({"updates": True}, "cpu")
    with pytest.raises(ConfigError, match="compile.warmup"):
        CompileSpec.from_config({"warmup": 0}, "cpu")


@requires_cuda
@pytest.mark.parametrize(
    "name", ["dqn", "td3", "sac", "ppo", "pqn", "ppo_pixels", "pqn_pixels", "dqn_lstm"]
)
def test_cudagraph_update_matches_eager_on_cuda(tmp_path, name):
    eager = trainer(tmp_path / "eager", AGENTS[name], device="cuda")
    # the pixel env has no pure lean core to compile: graph the agent, not the env
    graphs = ["compile=cudagraphs", *(["compile.env=false"] if "pixels" in name else [])]
    graphed = trainer(tmp_path / "graphed", AGENTS[name], graphs, "cuda")
    batch = a_batch(eager)
    n = 6  # past CudaGraphModule's warm-up (3) and capture: replays are compared
    ma, mb = run_updates(eager.agent, batch, n), run_updates(graphed.agent, batch, n)
    if name in ("td3", "sac"):  # their random draws come from other streams when graphed
        for m in mb:
            assert all(torch.isfinite(v).all() for v in m.values())
        return
    assert_close_runs(eager.agent, graphed.agent, ma, mb, rtol=1e-3)


@requires_cuda
def test_recurrent_ppo_update_under_cudagraphs_matches_eager_on_cuda(tmp_path):
    # the LSTM's sequence replay captured in the update's graph, the acting eager on
    # both sides: the same rollout, then 20 minibatch updates
    # (3 warm-up, the capture, 16 replays) give the eager weights to float rounding
    preset = ["experiment=ppo_cartpole_masked_lstm", "agent.recurrent_hidden=16"]
    eager = trainer(tmp_path / "eager", preset, device="cuda")
    graphed = trainer(tmp_path / "graphed", preset, ["compile.cudagraphs=true"], "cuda")
    assert graphed.acting is graphed.agent.policy  # the acting is not captured
    for tr in (eager, graphed):  # the same action draws on both sides
        torch.manual_seed(1)
        tr.iteration()
    assert graphed.progress.update_count == eager.progress.update_count == 20
    assert_close_runs(eager.agent, graphed.agent, [], [], rtol=1e-3)


@requires_cuda
@pytest.mark.parametrize(
    "preset",
    ["dqn_cartpole", "sac_pendulum", "ppo_cartpole", "pqn_cartpole", "ppo_cartpole_masked_lstm"],
)
def test_cudagraphs_training_never_syncs(tmp_path, preset):
    on_policy = preset.startswith(("ppo", "pqn"))
    # a recurrent preset's acting is traced (compile.policy), not captured
    cfg = load_config(
        [f"experiment={preset}", "device=cuda", "compile=cudagraphs", "logger=none"]
        + ["trainer.progress=false"]
        + ([] if on_policy else ["trainer.init_random_frames=0"])
    )
    iterate_without_syncs(build(cfg, tmp_path), warmup=6, steps=4)  # warm-up: capture


@requires_cuda
@pytest.mark.parametrize("preset", ["marinenav_iqn", "marinenav_acqin", "dqn_cartpole"])
def test_captured_update_draws_its_own_sample_on_cuda(tmp_path, preset):
    """Under compile=cudagraphs the replay's draw is inside the captured update
    (OffPolicyAgent.fuse_draw): training never syncs, and the updates move the weights
    with finite losses."""
    cfg = load_config(
        [f"experiment={preset}", "device=cuda", "compile=cudagraphs", "logger=none"]
        + ["trainer.progress=false", "trainer.init_random_frames=0", "env.num_envs=16"]
        + (["compile.env=false"] if preset.startswith("marinenav") else [])
    )
    tr = build(cfg, tmp_path)
    assert tr.fused
    before = {n: p.detach().clone() for n, p in tr.agent.parameters()}
    iterate_without_syncs(tr, warmup=6, steps=4)
    assert tr.progress.update_count > 0
    assert any(not torch.equal(p, before[n]) for n, p in tr.agent.parameters())
    assert all(math.isfinite(v) for v in tr.metrics.peek().values())
