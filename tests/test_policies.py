import dataclasses
import math

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs.utils import ExplorationType, set_exploration_type

from gpurl.core.progress import Progress
from gpurl.envs.info import EnvInfo
from gpurl.errors import ConfigError
from gpurl.policies import (
    CNNEncoder,
    DeterministicActor,
    LinearSchedule,
    PolicyWrapper,
    QNetwork,
    SpecEncoder,
    TanhGaussianActor,
    make_exploration,
)
from gpurl.policies.exploration import uniform_legal_action


def make_info(action_spec, obs_dim=3, mask=False, extra=None):
    shapes = {"observation": torch.Size([obs_dim])}
    specs = {"observation": Unbounded(shape=(obs_dim,))}
    return EnvInfo(
        obs_keys=("observation",),
        obs_shapes=shapes,
        obs_specs=specs,
        action_key="action",
        action_spec=action_spec,
        reward_key="reward",
        terminated_key="terminated",
        truncated_key="truncated",
        done_key="done",
        action_mask_key="action_mask" if mask else None,
        **{"batch_shape": torch.Size([1]), **(extra or {})},
    )


def encoder(obs_dim=3):
    return SpecEncoder(make_info(Categorical(2), obs_dim))


class FixedQ(torch.nn.Module):
    """Q-values that prefer the highest action index; one parameter so devices resolve."""

    kind = "q"

    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(n, dtype=torch.float32))

    def forward(self, td):
        return self.w.expand(*td["observation"].shape[:-1], -1)


def discrete_policy(n=4, eps=1.0, random_frames=0, mask=False):
    info = make_info(Categorical(n, shape=(1,)), mask=mask)
    cfg = {"epsilon_start": eps, "epsilon_end": eps, "epsilon_frames": 0}
    progress = Progress()
    return PolicyWrapper(FixedQ(n), info, progress, make_exploration(cfg, info, random_frames))


def obs_td(b, mask=None):
    td = TensorDict({"observation": torch.zeros(b, 3)}, batch_size=[b])
    if mask is not None:
        td["action_mask"] = mask
    return td


def test_linear_schedule_is_closed_form_on_device_counter():
    s = LinearSchedule(1.0, 0.1, 100)
    steps = torch.tensor([0, 50, 100, 1000])
    assert torch.allclose(s(steps), torch.tensor([1.0, 0.55, 0.1, 0.1]))
    assert torch.allclose(LinearSchedule(1.0, 0.2, 0)(steps), torch.full((4,), 0.2))


def test_greedy_when_not_exploring_and_counter_untouched():
    policy = discrete_policy(eps=1.0)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        a = policy(obs_td(64))["action"]
    assert (a == 3).all() and policy.progress.frames == 0


def test_epsilon_greedy_flips_a_coin_per_env():
    torch.manual_seed(0)
    policy = discrete_policy(eps=0.3)
    a = policy(obs_td(20000))["action"]
    non_greedy = (a != 3).float().mean()
    # random actions hit the greedy one 1/4 of the time: P(non-greedy) = 0.3 * 3/4
    assert abs(non_greedy - 0.225) < 0.015


def test_random_actions_are_uniform_over_legal_actions_only():
    torch.manual_seed(0)
    mask = torch.tensor([[True, False, True, False]]).expand(30000, 4)
    policy = discrete_policy(eps=1.0, mask=True)
    a = policy(obs_td(30000, mask))["action"]
    counts = torch.bincount(a, minlength=4).float() / 30000
    assert counts[1] == 0 and counts[3] == 0
    assert abs(counts[0] - 0.5) < 0.02 and abs(counts[2] - 0.5) < 0.02
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert (policy(obs_td(8, mask[:8]))["action"] == 2).all()  # masked greedy


def test_uniform_legal_action_per_row_masks():
    mask = torch.eye(5, dtype=torch.bool)
    assert torch.equal(uniform_legal_action(mask), torch.arange(5))


def test_random_frames_force_exploration_then_schedule_takes_over():
    # the warm-up reads the progress record's frames (the trainer's clock), not a count
    # of actions taken: 1000 actions at frame 0 are all in the warm-up
    policy = discrete_policy(eps=0.0, random_frames=1000)
    first = policy(obs_td(1000))["action"]
    assert (first != 3).any()
    assert (policy(obs_td(1000))["action"] != 3).any()
    policy.progress.frames.fill_(1000)
    later = policy(obs_td(1000))["action"]
    assert (later == 3).all()


def continuous_policy(actor, batch=256, **cfg):
    spec = Bounded(torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0]), shape=(2,))
    info = make_info(spec, extra={"batch_shape": torch.Size([batch])})
    return PolicyWrapper(actor, info, Progress(), make_exploration(cfg, info))


def test_continuous_bounds_scale_and_unscale():
    policy = continuous_policy(DeterministicActor(encoder(), 2, (8,)))
    a = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
    scaled = policy.scale(a)
    assert torch.allclose(scaled, torch.tensor([[-2.0, 0.0], [2.0, 1.0], [0.0, 0.5]]))
    assert torch.allclose(policy.unscale(scaled), a)
    assert "low" in dict(policy.named_buffers())  # bounds live as buffers


@pytest.mark.parametrize("noise", ["gaussian", "ou"])
def test_deterministic_actor_noise_only_while_exploring(noise):
    torch.manual_seed(0)
    actor = DeterministicActor(encoder(), 2, (8,))
    policy = continuous_policy(actor, noise=noise, noise_start=0.5, noise_end=0.5)
    td = obs_td(256)
    greedy = policy.scale(actor(td))
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert torch.allclose(policy(td.clone())["action"], greedy)
    for _ in range(3):
        noisy = policy(td.clone())["action"]
    assert not torch.allclose(noisy, greedy)
    assert (noisy >= policy.low).all() and (noisy <= policy.high).all()


def test_unknown_noise_is_a_config_error():
    with pytest.raises(ConfigError, match="noise"):
        continuous_policy(DeterministicActor(encoder(), 2, (8,)), noise="pink")


def test_tanh_gaussian_log_prob_matches_torch_distributions():
    torch.manual_seed(0)
    actor = TanhGaussianActor(encoder(), 2, (16,))
    obs = TensorDict(observation=torch.randn(512, 3), batch_size=[512])
    torch.manual_seed(1)
    action, logp = actor.sample(obs)
    mean, log_std = actor._mean_log_std(obs)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(cache_size=1)],
    )
    ref = dist.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    ok = action.abs().max(-1).values < 0.999  # atanh is ill-conditioned at the edges
    assert torch.allclose(logp[ok], ref[ok], atol=1e-3)
    assert torch.allclose(actor(obs), torch.tanh(mean))


def test_tanh_gaussian_log_std_squashed_or_clamped():
    obs = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
    squash = TanhGaussianActor(encoder(), 2, (16,))
    clamp = TanhGaussianActor(encoder(), 2, (16,), log_std="clamp")
    for actor in (squash, clamp):  # an output of 0 for the log-std half
        torch.nn.init.zeros_(actor.net[-1].weight)
        torch.nn.init.zeros_(actor.net[-1].bias)
    # CleanRL's squash into [-5, 2] starts the std at exp(-1.5); SB3's clamp at 1
    torch.testing.assert_close(squash._mean_log_std(obs)[1], torch.full((4, 2), -1.5))
    torch.testing.assert_close(clamp._mean_log_std(obs)[1], torch.zeros(4, 2))
    with torch.no_grad():
        clamp.net[-1].bias.copy_(torch.tensor([0.0, 0.0, -30.0, 5.0]))
    torch.testing.assert_close(clamp._mean_log_std(obs)[1][0], torch.tensor([-20.0, 2.0]))
    with pytest.raises(ValueError, match="squash or clamp"):
        TanhGaussianActor(encoder(), 2, (16,), log_std="soft")


def test_tanh_gaussian_epsilon_correction_is_sb3_s_and_stops_at_saturation():
    """correction="epsilon": log N(u) - log(1 - tanh(u)^2 + 1e-6), by hand; the same draw
    as the exact correction's wherever tanh is far from saturated, and a penalty that
    stops growing with |u| where the exact one keeps growing."""
    obs = TensorDict(observation=torch.randn(6, 3), batch_size=[6])
    exact = TanhGaussianActor(encoder(), 2, (16,), log_std="clamp")
    eps = TanhGaussianActor(encoder(), 2, (16,), log_std="clamp", correction="epsilon")
    eps.load_state_dict(exact.state_dict())
    with torch.no_grad():  # means 0 and 12 (saturated), std 1: both rows' draws
        for actor in (exact, eps):
            torch.nn.init.zeros_(actor.net[-1].weight)
            actor.net[-1].bias.copy_(torch.tensor([0.0, 12.0, 0.0, 0.0]))
    torch.manual_seed(3)
    a_exact, lp_exact = exact.sample(obs)
    torch.manual_seed(3)
    a_eps, lp_eps = eps.sample(obs)
    torch.manual_seed(3)
    u = torch.tensor([0.0, 12.0]) + torch.randn(6, 2)
    gauss = -0.5 * (u - torch.tensor([0.0, 12.0])).square() - 0.5 * math.log(2 * math.pi)
    want = gauss.sum(-1) - torch.log(1 - torch.tanh(u).square() + 1e-6).sum(-1)
    torch.testing.assert_close(a_eps, a_exact)
    torch.testing.assert_close(lp_eps, want)
    # dim 0 (u near 0) agrees; dim 1 (u near 12): exact adds ~2 |u| - 2 log 2 = 22.6,
    # epsilon at most -log(1e-6) = 13.8
    per_dim = lambda a: -torch.log(1 - a.square() + 1e-6)  # noqa: E731
    assert per_dim(a_eps[:, 1]).max() <= 13.9
    assert (lp_exact - lp_eps).min() > 5
    with pytest.raises(ValueError, match="exact or epsilon"):
        TanhGaussianActor(encoder(), 2, (16,), correction="sb3")


def test_dueling_q_network_mean_advantage_is_value():
    torch.manual_seed(0)
    q = QNetwork(encoder(4), 3, (16,), dueling=True)
    obs = TensorDict(observation=torch.randn(10, 4), batch_size=[10])
    values = q(obs)
    x = q.trunk(q.encoder(obs))
    assert values.shape == (10, 3)
    assert torch.allclose(values.mean(-1), q.value(x).squeeze(-1), atol=1e-6)


def test_write_max_q_stores_the_max_over_legal_actions_while_exploring():
    # FixedQ scores 0, 1, 2, 3: max 3, or 2 when action 3 is illegal; the stored value is
    # the Q-network's, whatever random action epsilon-greedy took (PQN bootstraps from it)
    info = make_info(Categorical(4, shape=(1,)), mask=True)
    cfg = {"epsilon_start": 1.0, "epsilon_end": 1.0, "epsilon_frames": 0}
    policy = PolicyWrapper(
        FixedQ(4), info, Progress(), make_exploration(cfg, info), write_max_q=True
    )
    assert "state_value" in policy.out_keys
    mask = torch.tensor([[True, True, True, True], [True, False, True, False]])
    td = policy(obs_td(2, mask))
    assert td["state_value"].tolist() == [3.0, 2.0]
    with pytest.raises(ConfigError, match="write_max_q"):
        PolicyWrapper(DeterministicActor(encoder(), 1, (8,)), make_info(Bounded(-1, 1, (1,))),
                      Progress(), write_max_q=True)  # fmt: skip


def test_layer_norm_q_network_normalises_each_hidden_layer():
    torch.manual_seed(0)
    q = QNetwork(encoder(4), 3, (16, 16), layer_norm=True)
    norms = [m for m in q.trunk if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2
    # the first LayerNorm's output is normalised per sample, whatever the input scale
    x = q.trunk[1](q.trunk[0](q.encoder(TensorDict(observation=100 * torch.randn(5, 4)))))
    torch.testing.assert_close(x.mean(-1), torch.zeros(5), atol=1e-5, rtol=0)


def test_cnn_encoder_takes_uint8_frames_with_extra_batch_dims():
    enc = CNNEncoder((4, 72, 80), (0, 3))
    frames = torch.randint(0, 4, (2, 5, 4, 72, 80), dtype=torch.uint8)
    assert enc(frames).shape == (2, 5, 512)
    assert math.isfinite(enc(frames).sum().item())


def test_tile_cnn_sees_each_tile_once_and_scales_by_the_spec_bounds():
    enc = CNNEncoder((1, 72, 80), (0, 3), features=256, kind="tile")
    conv = enc.convs[0]
    assert conv.kernel_size == (8, 8) and conv.stride == (8, 8)
    # 72 x 80 frames -> a 9 x 10 grid of tiles, 32 channels each
    assert enc.fc[0].in_features == 32 * 9 * 10
    frames = torch.randint(0, 4, (2, 5, 1, 72, 80), dtype=torch.uint8)
    assert enc(frames).shape == (2, 5, 256)
    # the first convolution sees 0..3 as 0..1: the spec's bounds, not 255
    x = torch.full((1, 1, 72, 80), 3, dtype=torch.uint8)
    scaled = enc.convs[0](torch.ones(1, 1, 72, 80))
    torch.testing.assert_close(enc.convs[0]((x.float() - enc.low) * enc.inv_range), scaled)
    with pytest.raises(ConfigError, match="use one of nature, tile, minatar"):
        CNNEncoder((1, 72, 80), (0, 3), kind="resnet")


def test_ou_noise_restarts_where_episodes_end_and_is_saved():
    torch.manual_seed(0)
    actor = DeterministicActor(encoder(), 2, (8,))
    policy = continuous_policy(actor, batch=4, noise="ou", noise_start=0.5, noise_end=0.5)
    for _ in range(5):
        policy(obs_td(4))
    ou = policy.exploration[0]
    assert (ou.state != 0).all()
    policy.episode_end(torch.tensor([True, False, True, False]))
    assert (ou.state[[0, 2]] == 0).all() and (ou.state[[1, 3]] != 0).all()
    assert any(k.endswith("exploration.0.state") for k in policy.state_dict())


def test_categorical_head_samples_softmax_and_reports_log_probs():
    class Logits(torch.nn.Module):
        kind = "categorical"

        def __init__(self):
            super().__init__()
            self.logits = torch.nn.Parameter(torch.log(torch.tensor([0.1, 0.2, 0.7])))

        def forward(self, td):
            return self.logits.expand(*td["observation"].shape[:-1], 3)

    info = make_info(Categorical(3, shape=(1,)))
    policy = PolicyWrapper(Logits(), info, Progress(), write_log_prob=True)
    torch.manual_seed(0)
    td = policy(obs_td(50000))
    freq = torch.bincount(td["action"], minlength=3).float() / 50000
    assert torch.allclose(freq, torch.tensor([0.1, 0.2, 0.7]), atol=0.01)
    assert torch.allclose(
        td["sample_log_prob"], torch.log(torch.tensor([0.1, 0.2, 0.7]))[td["action"]]
    )
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert (policy(obs_td(8))["action"] == 2).all()


def test_spec_encoder_concatenates_entries_masks_objects_and_scales_pixels():
    spec = Composite(
        agents=Composite(
            self_state=Unbounded(shape=(2, 3, 7)),
            objects=Unbounded(shape=(2, 3, 5, 5)),
            objects_mask=Categorical(2, shape=(2, 3, 5), dtype=torch.bool),
            shape=(2, 3),
        ),
        pixels=Bounded(0, 3, shape=(2, 1, 72, 80), dtype=torch.uint8),
        shape=(2,),
    )
    keys = (("agents", "self_state"), ("agents", "objects"))
    info = make_info(Categorical(25), extra={})
    info = EnvInfo(
        **{
            **info.__dict__,
            "obs_keys": keys,
            "obs_shapes": {keys[0]: torch.Size([7]), keys[1]: torch.Size([5, 5])},
            "obs_specs": {k: spec[k] for k in keys},
            "slot_masks": {keys[1]: ("agents", "objects_mask")},
        }
    )
    enc = SpecEncoder(info, embed=56, object_embed=40)
    assert enc.out_features == 56 + 5 * 40  # the MarineNav spec's 256 features
    td = spec.rand()
    td["agents", "objects_mask"] = torch.zeros(2, 3, 5, dtype=torch.bool)
    td["agents", "objects_mask"][..., 0] = True
    out = enc(td)
    assert out.shape == (2, 3, 256)
    assert (out[..., 56 + 40 :] == 0).all()  # masked object slots contribute nothing
    pix = CNNEncoder((1, 72, 80), (0.0, 3.0))
    frames = torch.full((1, 1, 72, 80), 3, dtype=torch.uint8)
    assert pix.inv_range == pytest.approx(1 / 3)  # 0..3 frames scaled by 3, not 255
    assert math.isfinite(pix(frames).sum().item())


def test_encoders_divide_by_the_envs_observation_scales():
    from gpurl.policies.networks import ObjectListEncoder, VectorEncoder

    vec = VectorEncoder((3,), scale=(2.0, 10.0, 1000.0))
    torch.testing.assert_close(
        vec(torch.tensor([[4.0, 5.0, 500.0]])), torch.tensor([[2.0, 0.5, 0.5]])
    )
    assert "scale" not in vec.state_dict()  # from the env, not a checkpoint
    objects = ObjectListEncoder((2, 2), embed=3, scale=(2.0, 4.0))
    x, mask = torch.tensor([[[2.0, 4.0], [8.0, 8.0]]]), torch.tensor([[True, False]])
    expected = objects.embed(torch.tensor([[1.0, 1.0]]))
    torch.testing.assert_close(objects(x, mask), torch.cat([expected, torch.zeros(1, 3)], -1))


def test_marinenav_encoders_see_unit_scale_features():
    from gpurl.envs.info import env_info
    from gpurl.envs.marinenav import MarineNavEnv
    from gpurl.policies import make_encoder

    info = env_info(MarineNavEnv(num_envs=2, pool_size=8))
    enc = make_encoder(info)
    scale = enc.parts[0].scale
    assert scale is not None and scale[-1] == 1000.0  # thrusts in N


def test_deterministic_actor_squashes():
    from gpurl.errors import ConfigError
    from gpurl.policies import DeterministicActor

    class Const(torch.nn.Module):
        out_features = 1

        def forward(self, obs):
            return torch.tensor([[1.0]])

    atan = DeterministicActor(Const(), 1, hidden=(), squash="atan")
    with torch.no_grad():
        atan.net[0].weight.fill_(1.0)
        atan.net[0].bias.fill_(0.0)
    torch.testing.assert_close(atan(None), torch.tensor([[0.5]]))  # (2 / pi) atan(1)
    with pytest.raises(ConfigError, match="squash"):
        DeterministicActor(Const(), 1, squash="sigmoid")


def test_minatar_cnn_is_one_layer_of_16_3x3_filters_on_10x10_grids():
    enc = CNNEncoder((4, 10, 10), (0.0, 1.0), 128, "minatar")
    (conv,) = [m for m in enc.convs if isinstance(m, torch.nn.Conv2d)]
    assert conv.out_channels == 16 and conv.kernel_size == (3, 3) and conv.stride == (1, 1)
    assert enc.fc[0].in_features == 16 * 8 * 8
    grids = torch.zeros((3, 4, 10, 10), dtype=torch.bool)
    assert enc(grids).shape == (3, 128)


def test_one_plain_vector_entry_is_read_as_is_and_any_other_goes_through_its_part():
    """SpecEncoder reads one float32 vector entry with no scale, statistics or embedding
    straight from the TensorDict (a small update calls its encoders three times); a
    scaled or embedded entry goes through its part as before."""
    from gpurl.envs.cartpole import CartPoleEnv
    from gpurl.envs.info import env_info
    from gpurl.policies.networks import SpecEncoder

    info = env_info(CartPoleEnv(num_envs=2))
    td = TensorDict({"observation": torch.randn(2, 4)}, batch_size=[2])
    plain, embedded = SpecEncoder(info), SpecEncoder(info, embed=8)
    assert plain.plain == "observation" and plain(td) is td["observation"]
    assert embedded.plain is None and embedded(td).shape == (2, 8)
    scaled = SpecEncoder(dataclasses.replace(info, obs_scales={"observation": (2.0,) * 4}))
    assert scaled.plain is None
    torch.testing.assert_close(scaled(td), td["observation"] / 2)
