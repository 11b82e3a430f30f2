"""gpurl.envs.compile: a compiled lean step follows the eager env; a compiled rollout
follows the same rollout run eagerly; nothing is read on the host; the bench tool runs.

Compiles cost seconds each, so each compiled object is built once per module.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from gpurl.envs.base import NativeEnv
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.compile import (
    CounterRNG,
    RandomRollout,
    compile_lean_step,
    compile_rollout,
    hashed_uniform,
    mix32,
)
from gpurl.envs.pendulum import PendulumEnv
from gpurl.errors import ActionOutOfRangeError, ConfigError
from gpurl.utils.host_reads import count_host_reads

N = 16  # envs: the bench-tool test below uses the same shapes, so it reuses these compiles
CHUNK = 2

_PATH = Path(__file__).resolve().parents[1] / "tools" / "bench_compile.py"
_spec = importlib.util.spec_from_file_location("bench_compile", _PATH)
bench_compile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_compile)


@pytest.fixture(scope="module")
def cartpoles():
    """An eager CartPole, and another of the same seed with its compiled step."""
    eager, compiled = CartPoleEnv(N, seed=3), CartPoleEnv(N, seed=3)
    eager.lean_reset(), compiled.lean_reset()
    return eager, compiled, compile_lean_step(compiled)


@pytest.fixture(scope="module")
def rollouts():
    """The same random rollout, compiled and eager, from equal envs and equal keys."""
    a, b = CartPoleEnv(N, seed=5), CartPoleEnv(N, seed=5)
    a.lean_reset(), b.lean_reset()
    return compile_rollout(a, chunk=CHUNK, seed=11), RandomRollout(b, CHUNK, 11, compile=False)


def _actions(env, gen):
    if isinstance(env, CartPoleEnv):
        return torch.randint(0, 2, (env.num_envs,), generator=gen)
    return 4 * torch.rand((env.num_envs, 1), generator=gen) - 2


def _assert_close_steps(eager, compiled, step, steps, gen):
    """Step both envs with the same actions, the same state in each time (so rounding
    differences cannot compound); return how many episodes ended."""
    ended = 0
    for _ in range(steps):
        compiled.state, compiled.steps = eager.state.clone(), eager.steps.clone()
        action = _actions(eager, gen)
        (nxt_e, obs_e), (nxt_c, obs_c) = eager.lean_step(action), step(action)
        assert nxt_c.keys() == nxt_e.keys() and obs_c.keys() == obs_e.keys()
        for key in ("done", "terminated", "truncated"):
            assert torch.equal(nxt_c[key], nxt_e[key]), key
        for key in ("observation", "reward"):
            assert nxt_c[key].shape == nxt_e[key].shape and nxt_c[key].dtype == nxt_e[key].dtype
            torch.testing.assert_close(nxt_c[key], nxt_e[key], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(obs_c["observation"], obs_e["observation"], rtol=1e-5, atol=1e-5)
        assert torch.equal(compiled.steps, eager.steps)
        ended += int(nxt_e["done"].sum())
    return ended


@pytest.mark.slow  # Inductor compiles the rollout: seconds, as the other compiled checks
def test_compiled_cartpole_follows_eager(cartpoles):
    eager, compiled, step = cartpoles
    gen = torch.Generator().manual_seed(0)
    # Both draw their reset noise from their own generator, same seed, same calls: the
    # resets match. Lockstep (the eager state copied in before each step) keeps float
    # rounding from compounding in this chaotic system, so 1e-5 holds on any CPU.
    assert _assert_close_steps(eager, compiled, step, 150, gen) > 20


@pytest.mark.slow  # Inductor compiles the rollout: seconds, as the other compiled checks
def test_compiled_pendulum_follows_eager():
    eager, compiled = PendulumEnv(4, seed=2), PendulumEnv(4, seed=2)
    step = compile_lean_step(compiled)
    eager.lean_reset(), compiled.lean_reset()
    gen = torch.Generator().manual_seed(1)
    # Through a truncation at 200 steps: the reset path runs under compile too.
    assert _assert_close_steps(eager, compiled, step, 205, gen) == 4


def test_autoreset_under_compile(cartpoles):
    _, env, step = cartpoles
    env.lean_reset()
    state = torch.zeros(N, 4)
    state[:4, 0] = 2.39  # moving right past x = 2.4: terminates
    state[:4, 1] = 1.0
    steps = torch.full((N,), 10)
    steps[4:8] = 499  # balanced, but at the step limit: truncates
    env.state, env.steps = state.clone(), steps.clone()
    nxt, obs = step(torch.ones(N, dtype=torch.long))
    term, trunc = nxt["terminated"].squeeze(-1), nxt["truncated"].squeeze(-1)
    assert term[:4].all() and not term[4:].any()
    assert trunc[4:8].all() and not trunc[:4].any() and not trunc[8:].any()
    assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])
    ended = term | trunc
    assert (nxt["observation"][:4, 0] > 2.4).all()  # `next` is the state reached, pre-reset
    assert (obs["observation"][ended].abs() <= 0.05).all()  # restarted
    assert torch.equal(obs["observation"][~ended], nxt["observation"][~ended])  # carried on
    assert torch.equal(obs["observation"], env.state)
    assert (env.steps[ended] == 0).all() and (env.steps[~ended] == 11).all()
    # force_reset (the bench knob) is a Python flag: a separately traced variant
    env.force_reset = True
    try:
        nxt, _ = step(torch.ones(N, dtype=torch.long))
        assert nxt["truncated"].all() and (env.steps == 0).all()
    finally:
        env.force_reset = False
    nxt, _ = step(torch.ones(N, dtype=torch.long))
    assert not nxt["truncated"].any()


def test_compiled_step_validates_actions(cartpoles):
    _, env, step = cartpoles
    env.validate_actions = True
    try:
        step(torch.ones(N, dtype=torch.long))  # in the spec: passes
        bad = torch.ones(N, dtype=torch.long)
        bad[3] = 2
        with pytest.raises(ActionOutOfRangeError, match="env.validate_actions=false"):
            step(bad)
    finally:
        env.validate_actions = False


def test_compiled_step_reads_nothing_on_the_host(cartpoles):
    _, env, step = cartpoles
    action = torch.ones(N, dtype=torch.long)
    step(action)
    with count_host_reads() as reads:
        for _ in range(20):
            step(action)
    assert reads.count == 0, reads.report()


def test_lean_core_is_lean_step_eagerly():
    """Eagerly, one LeanCore step with the generator's noise is lean_step, bit for bit."""
    env, ref = CartPoleEnv(64, seed=9), CartPoleEnv(64, seed=9)
    env.lean_reset(), ref.lean_reset()
    core = env.lean_core()
    gen = torch.Generator().manual_seed(2)
    for _ in range(100):
        action = torch.randint(0, 2, (64,), generator=gen)
        nxt_r, obs_r = ref.lean_step(action)
        noise = tuple(torch.rand(s, generator=env.rng) for s in core.noise_shapes)
        work, nxt = core.step(core.unpack(env.state, env.steps), action, noise)
        env.state, env.steps = core.pack(*work)
        obs = core.observe(env.state, env.steps)
        for key in nxt_r.keys():
            assert torch.equal(nxt[key], nxt_r[key]), key
        assert torch.equal(obs["observation"], obs_r["observation"])
        assert torch.equal(env.steps, ref.steps)


def test_counter_rng_step_is_its_eager_self():
    """rng="counter": the noise is drawn in the graph; the step is the LeanCore step with
    the CounterRNG's draws, which the eager reference replays."""
    env = CartPoleEnv(N, seed=4)
    step = compile_lean_step(env, rng="counter")
    ref = CartPoleEnv(N, seed=4)
    env.lean_reset(), ref.lean_reset()
    crng, core = step.counter_rng, ref.lean_core()
    key, counter, lanes = crng.key.clone(), crng.counter.clone(), crng.lanes
    gen, ended = torch.Generator().manual_seed(5), 0
    for _ in range(120):
        env.state, env.steps = ref.state.clone(), ref.steps.clone()  # lockstep
        action = torch.randint(0, 2, (N,), generator=gen)
        nxt, obs = step(action)
        noise = tuple(CounterRNG.draws(key, counter, lanes))
        work, nxt_r = core.step(core.unpack(ref.state, ref.steps), action, noise)
        ref.state, ref.steps = core.pack(*work)
        counter = counter + 1
        for k in ("done", "terminated", "truncated"):
            assert torch.equal(nxt[k], nxt_r[k]), k
        torch.testing.assert_close(nxt["observation"], nxt_r["observation"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(obs["observation"], ref.state, rtol=1e-5, atol=1e-5)
        assert torch.equal(env.steps, ref.steps)
        ended += int(nxt["done"].sum())
    assert torch.equal(crng.counter, counter) and ended > 20
    assert (obs["observation"].abs().max(0).values[[0, 2]] < torch.tensor([2.4, 0.21])).all()


@pytest.mark.slow  # compiles a 16-step rollout: seconds (CI runs slow tests)
def test_compiled_rollout_equals_eager_rollout(rollouts):
    compiled, eager = rollouts
    episodes, frames = 0, 0
    for _ in range(40):  # chunk by chunk, the same state in (rounding cannot compound)
        eager.env.state, eager.env.steps = compiled.env.state.clone(), compiled.env.steps.clone()
        out_c, out_e = compiled(CHUNK), eager(CHUNK)
        assert torch.equal(out_c["episodes"], out_e["episodes"])
        assert out_c["frames"] == out_e["frames"] == N * CHUNK
        # CartPole pays 1 a step: the summed rewards are the frames
        assert torch.equal(out_c["reward"], out_e["reward"])
        assert out_c["reward"].sum().item() == out_c["frames"]
        torch.testing.assert_close(compiled.env.state, eager.env.state, rtol=1e-5, atol=1e-5)
        assert torch.equal(compiled.env.steps, eager.env.steps)
        assert torch.equal(compiled.rng.counter, eager.rng.counter)
        episodes, frames = episodes + out_c["episodes"].sum().item(), frames + out_c["frames"]
    assert compiled.rng.counter.item() == 40 * CHUNK
    # A random CartPole policy lasts about 22 steps an episode
    assert 10 < frames / episodes < 45
    # Longer calls run whole chunks: ceil(5 / CHUNK) of them
    assert compiled(5)["frames"] == N * CHUNK * 3


@pytest.mark.slow
def test_compiled_rollout_reads_nothing_on_the_host(rollouts):
    compiled, _ = rollouts
    with count_host_reads() as reads:
        compiled(4 * CHUNK)
    assert reads.count == 0, reads.report()


def test_random_rollout_draws_bounded_actions():
    """Pendulum: float torques in [-2, 2]; every env truncates at 200 steps (eagerly)."""
    env = PendulumEnv(8, seed=1)
    env.lean_reset()
    out = RandomRollout(env, chunk=4, compile=False)(400)
    assert out["frames"] == 3200 and (out["episodes"] == 2).all()
    assert (out["reward"] < 0).all() and (env.steps == 0).all()


def test_hashed_uniforms_look_uniform():
    lanes = mix32(torch.arange(4096, dtype=torch.int32) * 0x2545F491)
    assert lanes.unique().numel() == 4096
    draws = torch.stack(
        [hashed_uniform(torch.tensor(k, dtype=torch.int32), lanes) for k in range(8)]
    )
    assert draws.min() >= 0 and draws.max() < 1
    assert abs(draws.mean().item() - 0.5) < 0.01 and abs(draws.var().item() - 1 / 12) < 0.005
    # consecutive keys are uncorrelated, lane by lane
    assert abs(torch.corrcoef(draws[:2])[0, 1].item()) < 0.05


def test_compile_errors_are_config_errors():
    class NoCore(NativeEnv):
        pass

    with pytest.raises(ConfigError, match="compile.env=false"):
        compile_lean_step(NoCore(2))(torch.zeros(2))
    with pytest.raises(ConfigError, match="backend"):
        compile_rollout(CartPoleEnv(2), chunk=1, backend="nope")


def _run_tool(argv, capsys):
    assert bench_compile.main(argv) == 0
    captured = capsys.readouterr()
    return [json.loads(line) for line in captured.out.strip().splitlines()], captured.err


@pytest.mark.slow  # seconds: an optional backend or a tool end to end (CI runs slow tests)
def test_bench_tool_env_section_prints_records(capsys, monkeypatch):
    # Peers stubbed out as not installed: they are skipped with a note, not a crash.
    for name in ("envpool", "gymnax", "jax"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setenv("XLA_FLAGS", "")  # the tool sets it; leave the process's as it was
    impls = ["gpurl_eager", "gpurl_compiled", "gpurl_compiled_rollout", "envpool", "gymnax_scan"]
    argv = ["--what", "env", "--num-envs", str(N), "--steps", "4", "--rounds", "2"]
    records, err = _run_tool([*argv, "--chunk", str(CHUNK), "--impls", *impls], capsys)
    assert [r["impl"] for r in records] == impls[:3]
    assert "skipping envpool" in err and "skipping gymnax_scan" in err
    for record in records:
        assert record["env"] == "CartPole-v1" and record["num_envs"] == N
        assert record["env_steps_per_sec"] > 0 and len(record["env_steps_per_sec_rounds"]) == 2
        assert record["threads"]["torch"] == 1 and "versions" in record and "commit" in record
        assert record["device"] == "cpu" and record["date"]
    compiled = {r["impl"]: r["compile_seconds"] for r in records}
    assert compiled["gpurl_eager"] is None
    assert compiled["gpurl_compiled"] > 0 and compiled["gpurl_compiled_rollout"] > 0


def test_compile_env_without_a_cpp_compiler_steps_eagerly_and_says_so(monkeypatch, capsys):
    """compile.env on a CPU with no C++ compiler for Inductor (a preset sets it as a
    speed-up): the env's own eager lean step, and one warning line."""
    import gpurl.trainers.compile as trainer_compile
    from gpurl.core.compile import CompileSpec
    from gpurl.core.private import missing_cpp_compiler
    from gpurl.envs.compile import CompiledLeanStep

    assert missing_cpp_compiler() is None  # this machine has one
    env = CartPoleEnv(4, seed=0)
    assert isinstance(trainer_compile.env_step(env, CompileSpec(env=True)), CompiledLeanStep)
    reason = "Inductor needs a C++ compiler for the CPU (g++ or clang on PATH, or $CXX)"
    monkeypatch.setattr(trainer_compile, "missing_cpp_compiler", lambda: reason)
    step = trainer_compile.env_step(env, CompileSpec(env=True))
    assert step == env.lean_step
    err = capsys.readouterr().err
    assert f"compile.env=true: {reason}; the env steps eagerly" in err
