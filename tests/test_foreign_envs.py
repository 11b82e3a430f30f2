"""Envs gpurl does not register, by `_target_` (envs/foreign.py): a TorchRL EnvBase
written here trains a few iterations; an unbatched factory is batched; a NativeEnv
subclass of the user's own is used as it is; mistakes are one line."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, SerialEnv

from gpurl.envs import make_env
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.foreign import ForeignEnv
from gpurl.envs.pixels import PixelsEnv
from gpurl.errors import ConfigError
from gpurl.train import build, load_config


class ChainEnv(EnvBase):
    """A TorchRL env of gpurl's nothing: positions 0..4 on a chain, action 1 right, 0
    left; reaching 4 pays 1 and ends the episode; batched over `num_envs`."""

    def __init__(self, num_envs: int = 1, device="cpu"):
        super().__init__(batch_size=torch.Size([num_envs]) if num_envs else (), device=device)
        b = self.batch_size
        self.observation_spec = Composite(observation=Unbounded((*b, 5)), shape=b)
        self.action_spec = Categorical(2, shape=b)
        self.reward_spec = Unbounded((*b, 1))
        self.position = torch.zeros(b, dtype=torch.long)

    def _reset(self, td=None):
        reset = torch.ones(self.batch_size, dtype=torch.bool)
        if td is not None and "_reset" in td.keys():
            reset = td["_reset"].reshape(self.batch_size)
        self.position = torch.where(reset, 0, self.position)
        return self._out(torch.zeros((*self.batch_size, 1), dtype=torch.bool))

    def _out(self, done):
        obs = torch.nn.functional.one_hot(self.position, 5).float()
        return TensorDict(
            {"observation": obs, "done": done, "terminated": done.clone()},
            batch_size=self.batch_size,
        )

    def _step(self, td):
        move = torch.where(td["action"].reshape(self.batch_size) == 1, 1, -1)
        self.position = (self.position + move).clamp(0, 4)
        done = (self.position == 4).unsqueeze(-1)
        out = self._out(done)
        out["reward"] = done.float()
        return out

    def _set_seed(self, seed):
        return seed


def make_chain(num_envs: int = 1):
    return ChainEnv(num_envs)


def make_one_chain():
    return ChainEnv(0)


class ForwardingChainEnv(ChainEnv):
    """An unbatched env of one's own with no max_episode_steps, whose __getattr__
    forwards a name it lacks, as TorchRL's batched envs and many wrappers do; here to an
    attribute that is itself missing, so a getattr of a missing name recurses until
    RecursionError (the issue-44 traceback)."""

    def __getattr__(self, name):
        if name.startswith("_") or name in ("batch_size", "device"):
            return super().__getattr__(name)
        return getattr(self, f"forwarded_{name}")


def make_forwarding_chain():
    return ForwardingChainEnv(0)


class LimitedChainEnv(ChainEnv):
    max_episode_steps = 7  # its own limit, read without getattr


def make_limited_chain():
    return LimitedChainEnv(0)


def make_cartpole(num_envs, device, seed):
    return CartPoleEnv(num_envs, device, seed)


def make_nothing():
    return "not an env"


def custom(target, n=4, **extra):
    return make_env({"name": "custom", "_target_": target, "num_envs": n, **extra})


def test_a_batched_foreign_env_is_adapted_and_handed_its_count():
    env = custom(f"{__name__}.make_chain", n=4)
    assert isinstance(env, ForeignEnv) and env.batch_size == (4,)
    assert env.max_episode_steps == 1000  # the default cap; env.max_episode_steps sets it
    assert custom(f"{__name__}.make_chain", max_episode_steps=20).max_episode_steps == 20


def test_an_unbatched_factory_is_copied_num_envs_times():
    env = custom(f"{__name__}.make_one_chain", n=3)
    assert isinstance(env.base_env, SerialEnv) and env.batch_size == (3,)
    assert env.rollout(3).batch_size == (3, 3)


def test_a_forwarding_env_without_a_limit_is_never_asked_by_getattr():
    with pytest.raises(RecursionError):  # what a getattr of a missing name does
        _ = make_forwarding_chain().max_episode_steps
    for n in (1, 8):
        env = custom(f"{__name__}.make_forwarding_chain", n=n)
        assert env.batch_size == (n,) and env.max_episode_steps == 1000  # the default
        assert custom(f"{__name__}.make_limited_chain", n=n).max_episode_steps == 7
        given = custom(f"{__name__}.make_forwarding_chain", n=n, max_episode_steps=60)
        assert given.max_episode_steps == 60


@pytest.mark.parametrize("num_envs", [1, 8])
def test_a_forwarding_env_without_a_limit_trains(tmp_path, num_envs):
    """env.max_episode_steps null: evaluation runs to the default cap, 1000 steps."""
    cfg = load_config(
        [
            "env=custom",
            f"env._target_={__name__}.make_forwarding_chain",
            f"env.num_envs={num_envs}",
            "env.eval_envs=1",
            "agent.hidden=[8]",
            "trainer.total_frames=64",
            "trainer.init_random_frames=32",
            "trainer.batch_size=8",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    assert trainer.env.max_episode_steps == 1000
    summary = trainer.train()
    assert summary["frames"] == 64 and trainer.progress.update_count > 0
    assert len(summary["eval_history"]) == 1


def test_a_native_env_of_ones_own_is_used_as_it_is():
    env = custom(f"{__name__}.make_cartpole", n=5)
    assert type(env) is CartPoleEnv and env.num_envs == 5


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_such_package.make", "cannot be imported"),
        (f"{__name__}.no_such_factory", "cannot be imported"),
        (f"{__name__}.make_nothing", "not a TorchRL EnvBase"),
    ],
)
def test_a_bad_target_is_one_line(target, message):
    with pytest.raises(ConfigError, match=message) as err:
        custom(target)
    assert "\n" not in str(err.value)


def test_a_missing_target_names_the_fix(tmp_path):
    cfg = load_config(["env=custom", "logger=none"])
    with pytest.raises(ConfigError, match="env._target_="):
        build(cfg, tmp_path)


def test_a_foreign_env_trains_by_target(tmp_path):
    cfg = load_config(
        [
            "env=custom",
            f"env._target_={__name__}.make_chain",
            "env.max_episode_steps=20",
            "agent=dqn",
            "agent.hidden=[16]",
            "trainer.total_frames=256",
            "trainer.init_random_frames=64",
            "trainer.batch_size=16",
            "trainer.eval_interval=128",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    trainer = build(cfg, tmp_path)
    summary = trainer.train()
    assert summary["frames"] == 256 and trainer.progress.update_count > 0
    assert len(summary["eval_history"]) == 2  # evaluated on the foreign env's copies


def test_the_lean_adapter_follows_the_native_lean_path():
    """The generic adapter (TorchRL's step_and_maybe_reset) on a native env gives the
    trajectories of its own lean path: same actions, same next observations, rewards,
    flags and observations after the autoreset. Pixel worlds restart from a fixed state
    (no random draw at a reset), so the two draw alike however often they reset."""
    kw = dict(num_envs=3, seed=2, map_height=6, map_width=6, max_steps=6)
    native = PixelsEnv(**kw)
    adapted = ForeignEnv(PixelsEnv(**kw), max_episode_steps=6, collector="lean")
    assert adapted.lean_path
    obs_n, obs_a = native.lean_reset(), adapted.lean_reset()
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(20):
        assert torch.equal(obs_n["pixels"], obs_a["pixels"])
        action = torch.randint(0, 8, (3,), generator=gen)
        (nxt_n, obs_n), (nxt_a, obs_a) = native.lean_step(action), adapted.lean_step(action)
        for key in ("pixels", "reward", "done", "terminated", "truncated"):
            assert torch.equal(nxt_n[key], nxt_a[key]), key
        ended += int(nxt_n["done"].sum())
    assert ended >= 6  # the comparison crossed resets


def test_the_collector_follows_env_collector(tmp_path):
    """auto: on the CPU the lean adapter (a host read of host data syncs nothing);
    torchrl: TorchRL's Collector; anything else is one line."""
    from gpurl.trainers.collector import LeanCollector, TorchRLCollector

    def trainer(collector):
        cfg = load_config(
            ["env=gym", "env.num_envs=2", "env.eval_envs=1", f"env.collector={collector}"]
            + ["agent.hidden=[8]", "logger=none", "trainer.progress=false"]
        )
        return build(cfg, tmp_path / collector)

    assert type(trainer("auto").collector) is LeanCollector
    assert type(trainer("lean").collector) is LeanCollector
    assert type(trainer("torchrl").collector) is TorchRLCollector
    with pytest.raises(ConfigError, match="env.collector must be one of") as err:
        trainer("bogus")
    assert "\n" not in str(err.value)


def test_the_probe_counts_the_host_reads_of_a_foreign_step():
    """A Gymnasium vector env's step_and_maybe_reset reads the host (TorchRL checks
    whether any env is done): on a device, auto would leave it to TorchRL's Collector."""
    env = make_env({"name": "gym", "id": "CartPole-v1", "num_envs": 2})
    assert env._probe_host_reads() > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "env, extra, module",
    [
        ("dmc", ["agent=sac"], "dm_control"),
        ("envpool", ["agent=ppo", "trainer.rollout_steps=2"], "envpool"),
        ("vmas", ["agent=sac"], "vmas"),
    ],
)
def test_env_collector_reaches_the_ecosystem_envs(tmp_path, env, extra, module):
    """env=dmc / envpool build gpurl's own ForeignEnv subclass in their factory and
    env=vmas a plain TorchRL env: env.collector picks the path for all three."""
    pytest.importorskip(module)
    from gpurl.trainers.collector import LeanCollector, TorchRLCollector

    def collector(choice):
        cfg = load_config(
            [f"env={env}", "env.num_envs=2", "env.eval_envs=1", f"env.collector={choice}"]
            + ["agent.hidden=[8]", "logger=none", "trainer.progress=false", *extra]
        )
        trainer = build(cfg, tmp_path / choice)
        return type(trainer.collector)

    assert collector("lean") is LeanCollector
    assert collector("torchrl") is TorchRLCollector


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_the_direct_gymnasium_path_steps_as_torchrl_does(env_id):
    """LeanGymEnv's own lean path (the vector env stepped directly) gives what the
    TorchRL path gives, step for step, resets included (CartPole ends episodes within
    the 300 steps, Pendulum truncates them at 200)."""
    pytest.importorskip("gymnasium")
    from gpurl.envs.gym import make_gym_env

    direct, through = make_gym_env(env_id, 4, seed=3), make_gym_env(env_id, 4, seed=3)
    assert direct.direct
    through.direct = False  # ForeignEnv's lean path: TorchRL's step_and_maybe_reset
    obs_a, obs_b = direct.lean_reset(), through.lean_reset()
    spec = direct.full_action_spec[direct.action_key]
    torch.manual_seed(0)
    resets = 0
    for _ in range(300):
        action = spec.rand()
        (nxt_a, obs_a), (nxt_b, obs_b) = direct.lean_step(action), through.lean_step(action)
        for key in ("observation", "reward", "terminated", "truncated", "done"):
            assert torch.equal(nxt_a.get(key), nxt_b.get(key)), key
        assert torch.equal(obs_a.get("observation"), obs_b.get("observation"))
        resets += int(nxt_a.get("done").sum())
    assert resets > 0


@pytest.mark.parametrize("direct", [True, False])
def test_evaluation_plays_each_envs_first_episode_and_stops(direct):
    """The foreign protocol's return is each env's first episode return, as TorchRL's
    rollout of max_episode_steps gives it, and it stops once every env has ended one
    (a host read every 16 steps): CartPole pushed one way falls within 20 steps."""
    pytest.importorskip("gymnasium")
    from gpurl.envs.foreign import first_episode_returns
    from gpurl.envs.gym import make_gym_env

    def push_left(td):
        return td.set("action", torch.zeros(td.batch_size, dtype=torch.long))

    ours, theirs = make_gym_env("CartPole-v1", 3, seed=5), make_gym_env("CartPole-v1", 3, seed=5)
    ours.direct = direct
    steps, lean_step = [], ours.lean_step
    ours.lean_step = lambda action: steps.append(1) or lean_step(action)
    result = ours.evaluation_protocol(push_left)
    rollout = theirs.rollout(theirs.max_episode_steps, push_left, break_when_any_done=False)
    assert result["return"] == pytest.approx(first_episode_returns(rollout).mean().item())
    assert 8 <= result["return"] <= 20 and len(steps) == 16


def test_gym_copies_step_without_a_render_mode_and_draw_once_asked():
    """A render mode can change what a task simulates (LunarLander adds a body per flame
    particle): the copies are made without one and set to rgb_array at the first frame."""
    pytest.importorskip("gymnasium")
    from gpurl.envs.gym import make_gym_env

    env = make_gym_env("Acrobot-v1", 2, seed=0)
    assert all(copy.unwrapped.render_mode is None for copy in env.vector.envs)
    env.lean_reset()
    env.lean_step(torch.zeros(2, dtype=torch.long))
    frames = env.render_frames()
    assert frames.shape[0] == 2 and frames.shape[-1] == 3 and frames.dtype == torch.uint8
    assert all(copy.unwrapped.render_mode == "rgb_array" for copy in env.vector.envs)
    assert frames.float().std() > 0  # a picture, not a blank


def test_gym_copies_of_neighbouring_seeds_share_no_start_state():
    """Gymnasium seeds vector copy i with first + i: with the run's seed as `first`,
    seed 1's first copy was seed 0's second, and five seeds' ten evaluation copies
    replayed nearly the same start states. Each run's copies start from its own draws;
    the same seed starts alike."""
    pytest.importorskip("gymnasium")
    from gpurl.envs.gym import make_gym_env

    def starts(seed):
        env = make_gym_env("Pendulum-v1", 10, seed=seed)
        return [tuple(row) for row in env.lean_reset().get("observation").tolist()]

    by_seed = {seed: starts(seed) for seed in (10_000, 10_001, 10_002)}
    assert starts(10_000) == by_seed[10_000]
    assert len(set().union(*by_seed.values())) == 30


def test_gym_truncations_reach_the_replay_as_the_episodes_last_observations(tmp_path):
    """End to end on the direct Gymnasium path: off-policy collection of Pendulum (which
    truncates at 200) stores, at each truncation, the episode's last observation as the
    next one (not the reset's) and a bootstrapping discount; elsewhere the next
    observation is the following row's."""
    pytest.importorskip("gymnasium")
    cfg = load_config(
        ["env=gym", "env.id=Pendulum-v1", "env.num_envs=1", "agent=td3", "threads=1",
         "trainer.frames_per_batch=1", "trainer.init_random_frames=1000", "logger=none",
         "trainer.total_frames=1000", "trainer.progress=false"]
    )  # fmt: skip
    trainer = build(cfg, tmp_path)
    for _ in range(450):
        trainer.iteration()
    data = trainer.buffer.data
    obs, nxt = data["obs", "observation"][:450, 0], data["next", "observation"][:450, 0]
    moved_on = (nxt[:-1] != obs[1:]).any(-1)
    assert moved_on.nonzero().flatten().tolist() == [199, 399]  # the truncations only
    assert data["done"][:450, 0].nonzero().flatten().tolist() == [199, 399]
    assert not data["terminated"][:450].any()  # so both bootstrap (discount gamma)
