"""On-policy learning rules on hand-computed numbers, the trainer's hot path, and a short
PPO learning check (the preset targets are in tests/test_learning.py, marked slow)."""

import math

import pytest
import torch
from tensordict import TensorDict

from gpurl.agents.ppo import normalize_advantage, ppo_policy_loss, ppo_value_loss
from gpurl.errors import ConfigError
from gpurl.policies import VALUE, ClippedGaussianActor
from gpurl.train import build, load_config
from gpurl.trainers.evaluation import evaluate_protocol
from gpurl.trainers.off_policy import OffPolicyTrainer
from gpurl.trainers.on_policy import OnPolicyTrainer
from gpurl.utils.host_reads import count_host_reads

from .conftest import iterate_without_syncs, requires_cuda


def test_clipped_surrogate_clips_above_and_below_and_kills_the_gradient():
    ratio = torch.tensor([1.5, 0.5, 1.1, 0.9, 1.5, 0.5], requires_grad=True)
    adv = torch.tensor([2.0, -1.0, 2.0, -1.0, -1.0, 2.0])
    loss = ppo_policy_loss(ratio, adv, clip=0.2)
    # per sample: max(-A r, -A clip(r, 0.8, 1.2))
    #   r 1.5, A +2: max(-3.0, -2.4) = -2.4  (clipped: no credit past 1 + eps)
    #   r 0.5, A -1: max(0.5, 0.8)   = 0.8   (clipped: no credit below 1 - eps)
    #   r 1.1, A +2: -2.2 ;  r 0.9, A -1: 0.9  (inside the trust region)
    #   r 1.5, A -1: max(1.5, 1.2)   = 1.5   (unclipped: the pessimistic side keeps r)
    #   r 0.5, A +2: max(-1.0, -1.6) = -1.0  (unclipped)
    expected = (-2.4 + 0.8 - 2.2 + 0.9 + 1.5 - 1.0) / 6
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    assert ratio.grad.tolist() == pytest.approx([0.0, 0.0, -2 / 6, 1 / 6, 1 / 6, -2 / 6])


def test_unclipped_surrogate_is_the_policy_gradient():
    ratio = torch.tensor([1.5, 0.5], requires_grad=True)
    adv = torch.tensor([2.0, -1.0])
    ppo_policy_loss(ratio, adv, clip=None).backward()
    assert ratio.grad.tolist() == pytest.approx([-1.0, 0.5])


def test_value_clipping_takes_the_larger_error():
    value = torch.tensor([3.0, 1.1, 0.0], requires_grad=True)
    old = torch.tensor([1.0, 1.0, 1.0])
    target = torch.tensor([2.0, 2.0, 2.0])
    loss = ppo_value_loss(value, old, target, clip=0.2)
    # V 3.0: clipped 1.2 -> errors 1.0 and 0.64: 1.0 (unclipped, gradient flows)
    # V 1.1: inside the clip -> 0.81 both
    # V 0.0: clipped 0.8 -> errors 4.0 and 1.44: 4.0
    assert loss.item() == pytest.approx(0.5 * (1.0 + 0.81 + 4.0) / 3)
    # V 3.0 moved away from the target beyond the clip: the larger error is the clipped
    # one only when the clipped value is further from the target
    value2 = torch.tensor([1.5], requires_grad=True)
    loss2 = ppo_value_loss(value2, torch.tensor([1.0]), torch.tensor([0.0]), clip=0.2)
    # clipped 1.2 -> 1.44 vs 2.25 unclipped: 2.25
    assert loss2.item() == pytest.approx(0.5 * 2.25)
    value3 = torch.tensor([0.5], requires_grad=True)
    loss3 = ppo_value_loss(value3, torch.tensor([1.0]), torch.tensor([2.0]), clip=0.2)
    # clipped 0.8 -> 1.44 vs 2.25 unclipped: 2.25; a clipped max has zero gradient
    value4 = torch.tensor([2.5], requires_grad=True)
    loss4 = ppo_value_loss(value4, torch.tensor([1.0]), torch.tensor([2.6]), clip=0.2)
    # unclipped 0.01, clipped 1.2 -> 1.96: the clipped error wins, gradient zero
    assert loss3.item() == pytest.approx(0.5 * 2.25)
    assert loss4.item() == pytest.approx(0.5 * 1.96)
    loss4.backward()
    assert value4.grad.item() == 0.0
    assert ppo_value_loss(value, old, target, clip=None).item() == pytest.approx(
        0.5 * (1.0 + 0.81 + 4.0) / 3
    )


def test_advantage_normalisation():
    adv = torch.tensor([1.0, 2.0, 3.0, 6.0])
    out = normalize_advantage(adv.clone())
    std = math.sqrt(((1 - 3) ** 2 + 1 + 0 + 9) / 3)  # unbiased, as torch.std
    assert out.tolist() == pytest.approx([(x - 3) / std for x in (1, 2, 3, 6)], abs=1e-6)
    assert out.mean().item() == pytest.approx(0.0, abs=1e-6)


def hand_rollout() -> TensorDict:
    """A rollout [T=2, N=2] with values, rewards and flags set by hand; env 0 terminates
    at t = 1."""
    false = torch.zeros(2, 2, 1, dtype=torch.bool)
    terminated = torch.tensor([[False, False], [True, False]]).unsqueeze(-1)
    nxt = {"reward": torch.tensor([[1.0, 0.0], [0.0, 2.0]]).unsqueeze(-1)}
    nxt |= {"terminated": terminated, "truncated": false, "done": terminated.clone()}
    return TensorDict(
        {VALUE: torch.tensor([[0.5, 0.0], [1.0, 0.5]]), "next": nxt}, batch_size=[2, 2]
    )


def test_ppo_targets_are_gae_and_the_advantages_it_trains_on_are_normalised(tmp_path):
    """PPOAgent.compute_targets, the code the trainer runs, on numbers worked by hand."""
    cfg = load_config(
        ["agent=ppo", "agent.gamma=0.5", "agent.gae_lambda=0.5", "logger=none", "env.eval_envs=1"]
    )
    agent = build(cfg, tmp_path).agent
    # the bootstrap V(s_t+1) of each step (the agent keeps next observations by default)
    agent.value = lambda obs: torch.tensor([[1.0, 0.5], [0.0, 1.0]])
    out = agent.compute_targets(hand_rollout(), last_obs=None)
    # delta_t = r + 0.5 V' (1 - terminated) - V:
    #   t=1: env 0: 0 + 0 - 1.0 = -1.0     env 1: 2 + 0.5 - 0.5 = 2.0
    #   t=0: env 0: 1 + 0.5 - 0.5 = 1.0    env 1: 0 + 0.25 - 0 = 0.25
    # A_1 = delta_1; A_0 = delta_0 + 0.5 * 0.5 * A_1 = [0.75, 0.75]
    # value targets A + V (before normalising): [[1.25, 0.75], [0.0, 2.5]]
    torch.testing.assert_close(out["value_target"], torch.tensor([[1.25, 0.75], [0.0, 2.5]]))
    # the advantages normalised over the rollout: mean 0.625, unbiased std sqrt(4.5625 / 3)
    std = math.sqrt(4.5625 / 3)
    expected = (torch.tensor([[0.75, 0.75], [-1.0, 2.0]]) - 0.625) / std
    torch.testing.assert_close(out["advantage"], expected)
    agent.normalize_advantage = False  # agent.normalize_advantage=false: the raw GAE
    out = agent.compute_targets(hand_rollout(), last_obs=None)
    torch.testing.assert_close(out["advantage"], torch.tensor([[0.75, 0.75], [-1.0, 2.0]]))


def test_truncation_without_next_observations_bootstraps_from_the_next_row(tmp_path):
    """agent.bootstrap_truncated=false: V(s_t+1) is the next row's stored value and the
    last row's V(last_obs); a done step then bootstraps nothing."""
    cfg = load_config(
        [
            "agent=ppo",
            "agent.gamma=0.5",
            "agent.gae_lambda=0.5",
            "agent.bootstrap_truncated=false",
            "agent.normalize_advantage=false",
            "logger=none",
            "env.eval_envs=1",
        ]
    )
    agent = build(cfg, tmp_path).agent
    agent.value = lambda obs: torch.tensor([3.0, 4.0])  # V(last_obs) of the two envs
    out = agent.compute_targets(hand_rollout(), last_obs=TensorDict({}, batch_size=[2]))
    # next values: t=0 -> the t=1 row [1.0, 0.5]; t=1 -> V(last_obs) [3.0, 4.0], cut at
    # env 0's end. delta_1 = [0 - 1.0, 2 + 2.0 - 0.5] = [-1.0, 3.5]
    # delta_0 = [1 + 0.5 - 0.5, 0 + 0.25 - 0] = [1.0, 0.25]; A_0 = delta_0 + 0.25 A_1
    expected = torch.tensor([[1.0 - 0.25, 0.25 + 0.875], [-1.0, 3.5]])
    torch.testing.assert_close(out["advantage"], expected)


class Passthrough(torch.nn.Identity):
    out_features = 1


def test_clipped_gaussian_log_prob_matches_the_mixed_distribution():
    torch.manual_seed(0)
    actor = ClippedGaussianActor(Passthrough(), 1, hidden=(), init_log_std=math.log(0.5))
    actor.net = torch.nn.Identity()  # the mean is the observation itself
    mean = torch.tensor([[0.3], [0.3], [0.3]])
    action = torch.tensor([[0.5], [1.0], [-1.0]])
    got = actor._log_prob(mean, action)
    normal = torch.distributions.Normal(0.3, 0.5)
    expected = [
        normal.log_prob(torch.tensor(0.5)).item(),
        math.log(1 - normal.cdf(torch.tensor(1.0)).item()),
        math.log(normal.cdf(torch.tensor(-1.0)).item()),
    ]
    assert got.tolist() == pytest.approx(expected, abs=1e-5)
    # sample() reports the log-prob evaluate() gives the same stored action
    obs = torch.full((1000, 1), 0.3)
    a, logp = actor.sample(obs)
    assert torch.allclose(actor.evaluate(obs, a)[0], logp)
    assert (a.abs() == 1).any()  # the clip does happen at std 0.5


def small(tmp_path, overrides):
    cfg = load_config(
        [
            *overrides,
            "env.num_envs=4",
            "env.eval_envs=2",
            "agent.hidden=[32,32]",
            "trainer.rollout_steps=8",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    return build(cfg, tmp_path)


@pytest.mark.parametrize(
    "overrides",
    [
        ["env=cartpole", "agent=ppo"],
        ["env=pendulum", "agent=ppo"],
        ["env=cartpole", "agent=a2c"],
        ["env=pendulum", "agent=ppo", "agent.bootstrap_truncated=false"],
        ["env=pixels", "agent=ppo"],
        ["env=pixels", "agent=ppo", "agent.shared_encoder=true"],
    ],
    ids=[
        "ppo_cartpole",
        "ppo_pendulum",
        "a2c_cartpole",
        "ppo_pendulum_no_next_obs",
        "ppo_pixels",
        "ppo_pixels_shared",
    ],
)
def test_on_policy_iterations_read_nothing_on_the_host(tmp_path, overrides):
    trainer = small(tmp_path, overrides)
    trainer.iteration()  # warm-up: buffers are allocated
    before = trainer.progress.update_count
    with count_host_reads() as reads:
        for _ in range(3):
            trainer.iteration()
    passes = trainer.epochs * trainer.minibatches
    assert trainer.progress.update_count == before + 3 * passes
    assert int(trainer.progress.updates) == 4 * passes
    assert trainer.frames == 4 * 8 * 4
    assert reads.count == 0, reads.report()


@requires_cuda
@pytest.mark.parametrize(
    "overrides",
    [
        ["env=cartpole", "agent=ppo"],
        ["env=pendulum", "agent=ppo"],
        ["env=cartpole", "agent=a2c"],
        ["env=pixels", "agent=ppo"],
        ["env=pixels", "agent=ppo", "agent.shared_encoder=true"],
    ],
    ids=["ppo_cartpole", "ppo_pendulum", "a2c_cartpole", "ppo_pixels", "ppo_pixels_shared"],
)
def test_on_policy_iterations_never_sync_on_cuda(tmp_path, overrides):
    iterate_without_syncs(small(tmp_path, [*overrides, "device=cuda"]), warmup=1, steps=3)


def test_on_policy_iteration_reuses_its_buffers(tmp_path):
    trainer = small(tmp_path, ["env=cartpole", "agent=ppo"])
    trainer.iteration()
    buffers = lambda: (*trainer.targets.values(), trainer.perm, *trainer._targets)  # noqa: E731
    ptrs = [t.data_ptr() for t in buffers()]
    trainer.iteration()
    assert ptrs == [t.data_ptr() for t in buffers()]
    # the advantages are normalised over the rollout
    advantage = trainer.targets["advantage"]
    assert advantage.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert advantage.std().item() == pytest.approx(1.0, abs=1e-4)


def shared_and_separate(tmp_path, overrides=(), value_coef=0.5):
    """PPO on pixels with one shared CNN and with a CNN each, from the same seed."""
    out = []
    for shared in (True, False):
        torch.manual_seed(0)
        out.append(
            small(
                tmp_path / f"{shared}_{value_coef}",
                [
                    "env=pixels",
                    "agent=ppo",
                    f"agent.shared_encoder={str(shared).lower()}",
                    f"agent.value_coef={value_coef}",
                    *overrides,
                ],
            )
        )
    return out


def test_shared_encoder_runs_one_trunk_once_a_pass(tmp_path):
    shared, separate = shared_and_separate(tmp_path)
    agent = shared.agent
    cnn_params = sum(p.numel() for p in agent.encoder.parameters())
    n_shared = sum(p.numel() for p in agent.params)
    n_separate = sum(p.numel() for p in separate.agent.params)
    assert n_separate - n_shared == cnn_params > 0  # one CNN fewer, no parameter twice
    assert len({id(p) for p in agent.params}) == len(agent.params)
    calls = []
    agent.encoder.register_forward_hook(lambda *_: calls.append(1))
    td = shared.env.lean_reset()
    out = agent.policy(td)
    assert len(calls) == 1  # action, log-prob and value from one trunk pass
    assert "features" not in out.keys()  # the rollout's td never stores the features
    assert out["state_value"].shape == out["sample_log_prob"].shape == (4,)
    shared.iteration()
    passes = shared.epochs * shared.minibatches
    # per iteration: 8 acting steps, the bootstrap value, and one pass per minibatch
    calls.clear()
    shared.iteration()
    assert len(calls) == 8 + 1 + passes


@pytest.mark.slow  # two short trainings: seconds
def test_shared_encoder_is_trained_by_both_losses(tmp_path):
    """The value loss moves the shared trunk, and not the actor's own trunk when separate
    (no grad-norm clip here: one norm over both heads would couple them)."""
    weights = {}
    for coef in (0.0, 0.5):
        shared, separate = shared_and_separate(tmp_path, ["agent.max_grad_norm=null"], coef)
        for name, tr in (("shared", shared), ("separate", separate)):
            torch.manual_seed(1)
            tr.iteration()
            enc = tr.agent.encoder if name == "shared" else tr.agent.actor.encoder
            weights[name, coef] = [p.detach().clone() for p in enc.parameters()]
    pairs = zip(weights["shared", 0.0], weights["shared", 0.5], strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)
    for a, b in zip(weights["separate", 0.0], weights["separate", 0.5], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(
    "overrides, trainer",
    [
        (["agent=dqn"], OffPolicyTrainer),
        (["env=pendulum", "agent=sac"], OffPolicyTrainer),
        (["agent=ppo"], OnPolicyTrainer),
        (["agent=a2c"], OnPolicyTrainer),
        (["agent=pqn"], OnPolicyTrainer),
    ],
)
def test_the_agent_picks_its_trainer(tmp_path, overrides, trainer):
    """`agent=ppo` runs as it is: the agent's kind, not a config key, picks the loop."""
    cfg = load_config([*overrides, "env.eval_envs=2", "logger=none", "trainer.progress=false"])
    assert type(build(cfg, tmp_path)) is trainer


def test_pqn_refuses_multi_robot_envs_in_one_line(tmp_path):
    """PPO and A2C run on multi-robot envs (tests/test_multi_robot_ppo.py); PQN not yet."""
    cfg = load_config(["env=marinenav", "agent=pqn", "logger=none", "trainer.progress=false"])
    with pytest.raises(ConfigError, match="single-agent") as err:
        build(cfg, tmp_path)
    assert "\n" not in str(err.value)


def test_ppo_learns_cartpole_quickly(tmp_path):
    """Random play scores about 22 on CartPole (an untrained greedy policy about 10); after
    4096 frames PPO's greedy return measured 355 (seed 0) and 358 (seed 1)."""
    torch.manual_seed(0)
    cfg = load_config(
        [
            "experiment=ppo_cartpole",
            "seed=0",
            "trainer.total_frames=4096",
            "agent.epochs=4",
            "trainer.eval_interval=100000",
            "agent.anneal_lr=false",
            "agent.lr=1e-3",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    while trainer.frames < cfg.trainer.total_frames:
        trainer.iteration()
    assert evaluate_protocol(trainer.eval_env, trainer.agent.policy)["return"] > 100


def test_a_resumed_run_keeps_annealing_the_learning_rate(tmp_path):
    """The lr is a device tensor the agent anneals in place; loading the optimizer's
    state must leave that tensor the one the optimizer reads."""
    run = small(tmp_path / "a", ["env=cartpole", "agent=ppo", "trainer.total_frames=1024"])
    run.iteration()
    path = run.save()
    resumed = small(tmp_path / "b", ["env=cartpole", "agent=ppo", "trainer.total_frames=1024"])
    resumed.resume(path)
    agent = resumed.agent
    assert agent.optimizer.param_groups[0]["lr"] is agent.lr
    resumed.iteration()
    # annealed over the frames collected so far (two rollouts of 8 steps x 4 envs)
    assert resumed.frames == 64
    assert agent.lr.item() == pytest.approx(agent.cfg.lr * (1 - 64 / 1024), rel=1e-5)
    assert agent.optimizer.param_groups[0]["lr"].item() == agent.lr.item() < agent.cfg.lr


def test_anneal_clip_anneals_the_surrogate_clip_with_the_frames(tmp_path):
    """agent.anneal_clip: the clip is base x (1 - frames / total_frames) at each update,
    as the lr, and it survives a resume (recomputed from the frames)."""
    keys = ["env=cartpole", "agent=ppo", "trainer.total_frames=1024", "agent.anneal_clip=true"]
    run = small(tmp_path / "a", keys)
    assert run.agent.anneals()
    run.iteration()
    path = run.save()
    resumed = small(tmp_path / "b", keys)
    resumed.resume(path)
    resumed.iteration()
    agent = resumed.agent
    assert resumed.frames == 64
    remaining = 1 - 64 / 1024
    assert agent.clip.item() == pytest.approx(0.2 * remaining, rel=1e-5)
    assert agent.lr.item() == pytest.approx(agent.cfg.lr * remaining, rel=1e-5)


def test_anneal_clip_alone_anneals_the_clip_and_leaves_the_lr(tmp_path):
    run = small(
        tmp_path,
        [
            "env=cartpole",
            "agent=ppo",
            "trainer.total_frames=1024",
            "agent.anneal_clip=true",
            "agent.anneal_lr=false",
        ],
    )
    run.iteration()
    assert run.agent.clip.item() == pytest.approx(0.2 * (1 - 32 / 1024), rel=1e-5)
    assert run.agent.lr.item() == pytest.approx(run.agent.cfg.lr)


def test_anneal_clip_without_a_clip_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="anneal_clip") as err:
        small(
            tmp_path,
            ["env=cartpole", "agent=ppo", "agent.anneal_clip=true", "agent.clip_epsilon=null"],
        )
    assert "\n" not in str(err.value)


def test_ppo_policy_loss_takes_a_device_clip():
    """A tensor clip (agent.anneal_clip) gives the float clip's loss."""
    ratio, advantage = torch.tensor([0.5, 1.0, 1.5]), torch.tensor([1.0, -1.0, 1.0])
    assert torch.equal(
        ppo_policy_loss(ratio, advantage, torch.tensor(0.2)), ppo_policy_loss(ratio, advantage, 0.2)
    )


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_ppo_reports_the_approximate_kl_and_the_clipped_fraction_of_its_minibatch(tmp_path, algo):
    """learn's metrics on ratios set by hand: the stored log-probs are the policy's own
    less log r, so the minibatch's ratios are r exactly."""
    cfg = load_config([f"agent={algo}", "logger=none", "env.eval_envs=1"])
    agent = build(cfg, tmp_path).agent
    r = torch.tensor([1.0, 1.5, 0.5, 1.1, 0.7, 1.25])
    n = r.shape[0]
    obs = torch.randn(n, 4)
    action = torch.tensor([0, 1, 1, 0, 1, 0])
    with torch.no_grad():
        log_prob = agent.actor.log_prob(TensorDict(observation=obs, batch_size=[n]), action)
    batch = TensorDict(
        {
            "observation": obs,
            "action": action,
            "sample_log_prob": log_prob - r.log(),
            "advantage": torch.randn(n),
            VALUE: torch.zeros(n),
            "value_target": torch.zeros(n),
        },
        batch_size=[n],
    )
    metrics = agent.learn(batch)
    kl = (r - 1 - r.log()).mean()
    torch.testing.assert_close(metrics["approx_kl"], kl, rtol=1e-5, atol=1e-6)
    # PPO's clip 0.2 holds 1.5, 0.5, 0.7 and 1.25; A2C has no clip
    expected = 4 / 6 if algo == "ppo" else 0.0
    torch.testing.assert_close(metrics["clip_fraction"], torch.tensor(expected))
