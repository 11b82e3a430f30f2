"""The shell every native env shares (envs/base.NativeEnv), on every native env: action
validation and forced resets on both faces, TorchRL's spec checks, and exact resume
through env_state_dict. Small configs keep each env to a few milliseconds a step."""

import io

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env, native_envs
from gpurl.errors import ActionOutOfRangeError, ConfigError

SMALL_MARINENAV = {"stage": 5, "pool_size": 16, "pool_refresh": 8, "pool_refresh_every": 2}
# name -> (env config, an action in the spec, one outside it), for 2 envs
CASES = {
    "cartpole": ({}, [0, 1], [0, 2]),
    "pendulum": ({}, [[2.0], [-2.0]], [[0.0], [2.5]]),
    "pixels": ({"max_steps": 6, "stack_k": 2, "num_worlds": 5}, [0, 7], [8, 0]),
    "packing": (
        {"resolution": 32, "num_objects": 4, "pool_size": 8, "max_steps": 4},
        [[0, 0, 0, 0], [1, 23, 7, 7]],
        [[0, 0, 0, 0], [4, 0, 0, 0]],  # slot 4 of 4 candidates
    ),
    "minatar": ({"game": "breakout"}, [0, 2], [0, 3]),
    "memory": ({"delay": 3}, [0, 1], [0, 2]),
    "marinenav": (SMALL_MARINENAV, [[0] * 5, [24] * 5], [[0] * 5, [0, 0, 25, 0, 0]]),
    "marinenav_continuous": (
        SMALL_MARINENAV,
        [[[1.0, -1.0]] * 5] * 2,
        [[[0.0, 0.0]] * 5, [[0.0, 0.0]] * 4 + [[0.0, 1.5]]],
    ),
}


def test_every_native_env_is_covered():
    assert CASES.keys() == native_envs(own_only=True).keys()


def _env(name: str, seed: int = 0, **kw):
    cfg, _, _ = CASES[name]
    return make_env({"name": name, **cfg, **kw}, num_envs=2, seed=seed)


def _action(name: str, which: int) -> torch.Tensor:
    value = torch.tensor(CASES[name][which])
    return value if value.is_floating_point() else value.to(torch.int64)


def _with_action(env, td, action):
    return td.set(env.action_key, action)


@pytest.mark.parametrize("name", CASES)
def test_check_env_specs(name):
    check_env_specs(_env(name))


@pytest.mark.parametrize("name", CASES)
def test_validate_actions_on_both_faces(name):
    env = _env(name, validate_actions=True)
    good, bad = _action(name, 1), _action(name, 2)
    env.lean_reset()
    env.lean_step(good)
    with pytest.raises(ActionOutOfRangeError, match="env.validate_actions=false"):
        env.lean_step(bad)
    td = env.reset()
    env.step(_with_action(env, td, good))
    with pytest.raises(ActionOutOfRangeError, match="env.validate_actions=false"):
        env.step(_with_action(env, env.reset(), bad))


def _assert_all_truncated(env, nxt):
    assert nxt["truncated"].all() and nxt["done"].all()
    if env.group_key is not None:  # MarineNav: every robot's episode ends too
        assert nxt["agents", "truncated"].all() and nxt["agents", "done"].all()


@pytest.mark.parametrize("name", CASES)
def test_force_reset_ends_every_episode_every_step(name):
    env = _env(name)
    env.force_reset = True
    first = env.lean_reset()
    for _ in range(3):
        nxt, obs = env.lean_step(_action(name, 1))
        _assert_all_truncated(env, nxt)
        assert (env.steps == 0).all()  # restarted
    assert set(obs.keys(include_nested=True)) == set(first.keys(include_nested=True))
    # the TorchRL face: a rollout resets every env after every step (but the last), so
    # no episode runs past one step
    rollout = env.rollout(3, break_when_any_done=False)
    _assert_all_truncated(env, rollout["next"])
    assert (env.steps == 1).all()
    # off again: episodes go on unless they end on their own
    env.force_reset = False
    env.lean_reset()
    nxt, _ = env.lean_step(_action(name, 1))
    assert not nxt["truncated"].any()
    assert torch.equal(env.steps == 1, ~nxt["done"].reshape(-1))


@pytest.mark.parametrize("name", CASES)
def test_env_state_dict_resumes_exactly(name):
    """An env of the same config, elsewhere in its run, loaded with a stepped env's state
    through a checkpoint round trip, steps exactly as the original from there: through
    autoresets (and pool refreshes, world draws) on both faces."""
    env, copy = _env(name, seed=1), _env(name, seed=1)
    env.lean_reset(), copy.lean_reset()
    torch.manual_seed(0)
    spec = env.full_action_spec[env.action_key]
    actions = [spec.rand() for _ in range(14)]
    for action in actions[:5]:
        env.lean_step(action)
    for action in actions[:3]:
        copy.lean_step(action.flip(0))
    buffer = io.BytesIO()
    torch.save(env.env_state_dict(), buffer)
    buffer.seek(0)
    copy.load_env_state_dict(torch.load(buffer, weights_only=True))
    for action in actions[5:12]:
        (n1, o1), (n2, o2) = env.lean_step(action), copy.lean_step(action)
        assert (n1 == n2).all() and (o1 == o2).all()
    td1, td2 = env.reset(), copy.reset()
    for action in actions[12:]:
        td1 = env.step(_with_action(env, td1, action))["next"]
        td2 = copy.step(_with_action(copy, td2, action))["next"]
        assert (td1 == td2).all()


def test_an_env_state_of_the_old_format_is_a_config_error():
    env = _env("cartpole")
    with pytest.raises(ConfigError, match="older gpurl"):
        env.load_env_state_dict({"tensors": {}, "tables": {}, "rng": env.rng.get_state()})
