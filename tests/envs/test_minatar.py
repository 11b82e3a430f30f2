"""MinAtar (gpurl/envs/minatar): step-by-step parity with the reference package
(minatar 1.0.15) from identical states and draws, per game; the shell's keys."""

import io

import numpy as np
import pytest
import torch
from torchrl.envs.utils import check_env_specs

from gpurl.envs import make_env
from gpurl.envs.minatar.grid import REALIZE_SHARED
from gpurl.errors import ConfigError
from gpurl.utils.host_reads import count_host_reads
from tests.conftest import requires_cuda
from tests.envs.minatar_reference import run_parity


def _freeway_speeds(u):
    """The reference's randint(1, 6, 8) from Freeway's three speed uniforms, decoded
    as gpurl does (three base-5 digits each; float32, as drawn)."""
    three = np.floor(u.astype(np.float32) * np.float32(125)).astype(int).clip(max=124)
    return 1 + np.stack((three // 25, three // 5 % 5, three % 5), axis=1).reshape(-1)[:8]


def _freeway_directions(u):
    """rand(8) for the reference's sign(rand(8) - 0.5): 0.75 where bit i of floor(256 u)
    is set (right), 0.25 where not."""
    bits = int(np.floor(np.float32(u[0]) * np.float32(256)))
    return np.array([0.75 if bits >> i & 1 else 0.25 for i in range(8)])


# per game: the reference's draw sites -> gpurl's noise slots (after the sticky slot 0)
SITES = {
    "breakout": [("ball_start = self.random.randint(2)", 0, 1)],
    "asterix": [
        ("lr = self.random.rand() < 1/2", 0, 1),
        ("is_gold = self.random.rand() < 1/3", 1, 1),
        ("slot = slot_options[self.random.randint(len(slot_options))]", 2, 1),
    ],
    "seaquest": [
        ("_spawn_enemy::lr = self.random.rand() < 1/2", 0, 1),
        ("_spawn_enemy::is_sub = self.random.rand() < 1/3", 1, 1),
        ("_spawn_enemy::y = self.random.randint(low=1, high=9)", 2, 1),
        ("_spawn_diver::lr = self.random.rand() < 1/2", 3, 1),
        ("_spawn_diver::y = self.random.randint(low=1, high=9)", 4, 1),
    ],
    "space_invaders": [],  # no draws but the sticky actions
    "freeway": [
        ("speeds = self.random.randint(1,6,8)", 0, 3, _freeway_speeds),
        ("directions = np.sign(self.random.rand(8) - 0.5)", 3, 1, _freeway_directions),
    ],
}


def _env(game, num_envs=8, seed=0, **kw):
    return make_env({"name": "minatar", "game": game, **kw}, num_envs=num_envs, seed=seed)


def _short_freeway(env, refs):
    """Episodes of 100 to 170 frames left, on both sides: some end within the test."""
    left = torch.arange(env.num_envs) * 10 + 100
    game = env.env_state.game
    env.env_state = env.env_state._replace(game=game._replace(time_left=left))
    for ref, t in zip(refs, left.tolist(), strict=True):
        ref.env.terminate_timer = t


def _ramp_soon(field):
    """The first ramp 0, 3, 6, ... frames in, on both sides: ramps happen within the test."""

    def setup(env, refs):
        soon = torch.arange(env.num_envs) * 3
        game = env.env_state.game
        env.env_state = env.env_state._replace(game=game._replace(**{field: soon}))
        for ref, t in zip(refs, soon.tolist(), strict=True):
            setattr(ref.env, field, t)

    return setup


def _thin_wave(env, refs):
    """Waves of one to eight aliens on both sides: waves are cleared and ramps happen
    within the test."""
    from gpurl.envs.minatar.space_invaders import grid

    game = env.env_state.game
    aliens = game.aliens.clone()  # rows of bits: bit x of row y is cell (y, x)
    for i in range(env.num_envs):
        aliens[i, :3] = 0
        aliens[i, 3] &= (1 << (2 + (i % 6) + 1)) - 1  # columns 2 .. 2 + i % 6 stay
    for ref, cells in zip(refs, grid(aliens), strict=True):
        ref.env.alien_map = cells.numpy().astype(np.float64)
    env.env_state = env.env_state._replace(game=game._replace(aliens=aliens))


def _divers_aboard(env, refs):
    """1 to 6 divers aboard and oxygen from 200 down (5 in the last env), on both sides:
    surfacing pays, ramps, and oxygen runs out within the test."""
    i = torch.arange(env.num_envs)
    aboard = i % 6 + 1
    oxygen = torch.where(i == env.num_envs - 1, 5, 200 - (i * 20) % 200)
    game = env.env_state.game._replace(diver_count=aboard, oxygen=oxygen)
    env.env_state = env.env_state._replace(game=game)
    for ref, n, o in zip(refs, aboard.tolist(), oxygen.tolist(), strict=True):
        ref.env.diver_count, ref.env.oxygen = n, o


def _dense_seaquest(env, refs):
    """Seaquest ramped near its end (an enemy every 1 to 3 frames, moving every 3 or 4)
    with divers aboard, on both sides: crowded lanes, many bullets, conflicts."""
    i = torch.arange(env.num_envs)
    fields = dict(e_spawn_speed=1 + i % 3, move_speed=2 + i % 2, diver_count=i % 6 + 1)
    game = env.env_state.game._replace(**fields)
    env.env_state = env.env_state._replace(game=game)
    for k, ref in enumerate(refs):
        for name, value in fields.items():
            setattr(ref.env, name, int(value[k]))


# the slow test's setups (the first episode of each env only)
LONG_SETUP = {"seaquest": _dense_seaquest}

# Breakout and Seaquest (the simplest and the largest state) in the fast suite for the
# shell-level checks, the others in the slow one
SHELL_GAMES = [
    g if g in ("breakout", "seaquest") else pytest.param(g, marks=pytest.mark.slow) for g in SITES
]

# per game: the odds of the minimal actions (uniform if absent), a setup of both sides
POLICY = {
    "freeway": ([1, 6, 1], _short_freeway),
    "asterix": (None, _ramp_soon("ramp_timer")),
    "space_invaders": ([1, 1, 1, 3], _thin_wave),
    "seaquest": ([1, 1, 2, 1, 2, 3], _divers_aboard),
}


@pytest.mark.parametrize("game", SITES)
@pytest.mark.parametrize(
    ("sticky", "ramping"),
    # the published settings in the fast suite; the variants with the slow one
    [(0.1, True), pytest.param(0.5, True, marks=pytest.mark.slow), (0.1, False)],
)
def test_parity_with_the_reference(game, sticky, ramping):
    env = _env(game, sticky_prob=sticky, difficulty_ramping=ramping, seed=int(sticky * 10))
    weights, setup = POLICY.get(game, (None, None))
    main = (sticky, ramping) == (0.1, True)  # the variants for fewer steps
    ended, rewards = run_parity(env, SITES[game], 200 if main else 60, weights=weights, setup=setup)
    assert not main or (ended > 0 and rewards > 0)


@pytest.mark.parametrize("game", SITES)
def test_parity_with_the_reference_in_all_six_actions(game):
    """env.minimal_actions=false: the agent picks among MinAtar's six actions, as the
    paper's DQN did; the ones a game ignores are no-ops on both sides."""
    env = _env(game, minimal_actions=False, seed=3)
    assert env.actions == (0, 1, 2, 3, 4, 5) and env.action_spec.n == 6
    ended, rewards = run_parity(env, SITES[game], 120, seed=3, setup=POLICY.get(game, (0, None))[1])
    assert ended + rewards > 0


@pytest.mark.slow
@pytest.mark.parametrize("game", SITES)
def test_long_parity_with_the_reference(game):
    """32 envs for 3,000 steps each from their resets: ramps run their course."""
    env = _env(game, num_envs=32, seed=7)
    weights = POLICY.get(game, [None])[0]
    setup = LONG_SETUP.get(game)
    ended, rewards = run_parity(env, SITES[game], 3000, seed=7, weights=weights, setup=setup)
    assert ended > 0 and rewards > 0


def test_bad_keys_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="use one of breakout"):
        _env("pong")
    with pytest.raises(ConfigError, match=r"sticky_prob must be in \[0, 1\], got 1.5"):
        _env("breakout", sticky_prob=1.5)


def test_observation_layout_and_actions():
    env = _env("breakout", num_envs=3)
    obs = env.reset()["observation"]
    assert obs.shape == (3, 4, 10, 10) and obs.dtype == torch.bool
    assert env.action_spec.n == 3
    assert obs[:, 0, 9, 4].all()  # the paddle, channels first
    assert obs[:, 3, 1:4].all() and obs[:, 3].sum((1, 2)).eq(30).all()  # the bricks


@pytest.mark.parametrize("game", SITES)
def test_lean_steps_read_nothing_on_the_host(game):
    env = _env(game, num_envs=4)
    env.lean_reset()
    action = torch.tensor([0, 1, 2, len(env.rules.actions) - 1])
    with count_host_reads() as reads:
        for _ in range(20):
            env.lean_step(action)
    assert reads.count == 0, reads.report()


@requires_cuda
@pytest.mark.parametrize("game", SITES)
def test_every_game_resets_and_steps_on_cuda(game):
    # every tensor a game makes must follow the env's device (a CPU bound in freeway's
    # random speeds once failed here and nowhere on the CPU)
    env = make_env({"name": "minatar", "game": game}, device="cuda", num_envs=64)
    env.lean_reset()
    action = torch.randint(len(env.rules.actions), (64,), device="cuda")
    for _ in range(50):
        nxt, obs = env.lean_step(action)
    assert nxt["reward"].device.type == obs.device.type == "cuda"


@requires_cuda
def test_a_packed_observation_compiles_and_views_on_cuda():
    """Space Invaders' observation leaves the compiled CUDA step as int32 words and is
    viewed as its bool cells after the graph (LeanCore.views)."""
    from gpurl.envs.compile import compile_lean_step

    env = make_env({"name": "minatar", "game": "space_invaders"}, device="cuda", num_envs=64)
    env.lean_reset()
    step = compile_lean_step(env, rng="counter")
    action = torch.randint(len(env.rules.actions), (64,), device="cuda")
    for _ in range(5):
        nxt, obs = step(action)
    cells = obs["observation"]
    assert cells.dtype == torch.bool and cells.shape == (64, 6, 10, 10)
    assert torch.equal(cells, env.rules.observe(env.env_state.game))
    assert nxt["observation"].dtype == torch.bool


# -- agreement in distribution with the reference's own randomness (slow) -----------------
EPISODES = 2000


def _track_ball(obs: torch.Tensor) -> torch.Tensor:
    """Breakout: move the paddle under the ball's column (obs [N, C, 10, 10])."""
    cols = torch.arange(10)
    paddle = (obs[:, 0, 9].long() * cols).sum(-1)
    ball = (obs[:, 1].any(1).long() * cols).sum(-1)
    return torch.where(ball < paddle, 1, torch.where(ball > paddle, 2, 0))


# per game: a scripted policy over observations [N, C, 10, 10] -> minimal actions [N]
SCRIPTED = {
    "breakout": _track_ball,
    "asterix": lambda obs: torch.full((len(obs),), 2),  # always up
    "space_invaders": lambda obs: torch.full((len(obs),), 3),  # always fire
    "seaquest": lambda obs: torch.full((len(obs),), 4),  # always down: oxygen runs out
}


def _gpurl_episodes(game, policy, seed):
    """One episode per env, 2,000 envs: returns and lengths."""
    env = _env(game, num_envs=EPISODES, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    n = len(env.rules.actions)

    def act(obs):
        if policy is None:
            return {"action": torch.randint(0, n, (EPISODES,), generator=gen)}
        return {"action": policy(obs["observation"])}

    out = env.play_episodes(act)
    assert not (out["length"] >= env.max_episode_steps).any()
    return out["return"].double(), out["length"].double()


def _reference_episodes(game, policy, seed):
    from minatar import Environment

    rng = np.random.RandomState(seed)
    returns, lengths = [], []
    for i in range(EPISODES):
        # a fresh env an episode, as each of gpurl's envs plays its first: the previous
        # action, which sticky actions repeat, starts at no-op
        ref = Environment(game)  # sticky actions 0.1 and ramping, as published
        ref.seed(seed * EPISODES + i)
        actions = ref.minimal_action_set()
        ref.reset()
        total, steps, terminal = 0.0, 0, False
        while not terminal:
            if policy is None:
                a = rng.randint(len(actions))
            else:
                obs = torch.from_numpy(np.ascontiguousarray(ref.state().transpose(2, 0, 1)))
                a = int(policy(obs[None])[0])
            r, terminal = ref.act(actions[a])
            total, steps = total + r, steps + 1
        returns.append(total)
        lengths.append(steps)
    return torch.tensor(returns, dtype=torch.float64), torch.tensor(lengths, dtype=torch.float64)


def _agree(ours: torch.Tensor, theirs: torch.Tensor, what: str) -> str:
    se = (ours.var() / len(ours) + theirs.var() / len(theirs)).sqrt()
    gap = (ours.mean() - theirs.mean()).abs()
    line = (
        f"{what}: gpurl {ours.mean():.3f} ± {ours.std() / len(ours) ** 0.5:.3f}, "
        f"reference {theirs.mean():.3f} ± {theirs.std() / len(theirs) ** 0.5:.3f} "
        f"({gap / se:.2f} s.e. apart)"
    )
    assert gap <= 3 * se, line
    return line


@pytest.mark.slow
@pytest.mark.parametrize("scripted", [False, True], ids=["random", "scripted"])
@pytest.mark.parametrize("game", SCRIPTED)
def test_episode_statistics_agree_with_the_reference(game, scripted):
    """2,000 episodes a side from each side's own randomness: mean return and length
    within 3 standard errors, under a uniform random policy and a scripted one."""
    policy = SCRIPTED[game] if scripted else None
    ours = _gpurl_episodes(game, policy, seed=11)
    theirs = _reference_episodes(game, policy, seed=11)
    print(_agree(ours[0], theirs[0], f"{game} return"))
    print(_agree(ours[1], theirs[1], f"{game} length"))


@pytest.mark.parametrize("game", SHELL_GAMES)
def test_specs_and_exact_resume_for_every_game(game):
    """The shell tests (tests/envs/test_native_shell.py) run Breakout; every game's own
    state (Seaquest's nested slots included) passes TorchRL's checks and resumes
    exactly through a checkpoint round trip."""
    check_env_specs(_env(game, num_envs=2))
    env, copy = _env(game, num_envs=3, seed=1), _env(game, num_envs=3, seed=2)
    env.lean_reset(), copy.lean_reset()
    action = torch.tensor([0, 1, len(env.rules.actions) - 1])
    for _ in range(30):
        env.lean_step(action)
    buffer = io.BytesIO()
    torch.save(env.env_state_dict(), buffer)
    buffer.seek(0)
    copy.load_env_state_dict(torch.load(buffer, weights_only=True))
    for _ in range(30):
        (n1, o1), (n2, o2) = env.lean_step(action), copy.lean_step(action)
        assert (n1 == n2).all() and (o1 == o2).all()


@pytest.mark.parametrize("game", SHELL_GAMES)
def test_lean_core_is_lean_step_eagerly(game):
    """One LeanCore step with the generator's noise is lean_step, bit for bit, through
    episode ends (force_reset on for a stretch)."""
    env, ref = _env(game, num_envs=6, seed=9), _env(game, num_envs=6, seed=9)
    env.lean_reset(), ref.lean_reset()
    core = env.lean_core()

    def view(entries, key):  # a packed entry as the env's (LeanCore.views)
        return core.views.get(key, lambda t: t)(entries[key])

    gen = torch.Generator().manual_seed(2)
    for t in range(60):
        env.force_reset = ref.force_reset = 20 <= t < 23
        action = torch.randint(0, len(env.rules.actions), (6,), generator=gen)
        nxt_r, obs_r = ref.lean_step(action)
        noise = tuple(torch.rand(s, generator=env.rng) for s in core.noise_shapes)
        work, nxt = core.step(core.unpack(*env.env_state), action, noise, env.force_reset)
        env.env_state = core.pack(*work)
        obs = core.observe(*env.env_state)
        for key in nxt_r.keys():
            assert torch.equal(view(nxt, key), nxt_r[key]), (t, key)
        assert torch.equal(view(obs, "observation"), obs_r["observation"])
        assert torch.equal(env.steps, ref.steps)


def test_packed_rows_are_the_cells_of_their_bits():
    """pack_rows' words viewed as bool are the rows' bits, cell by cell: every 10-bit
    row, in every position of the pairs the packing reads."""
    from gpurl.envs.minatar.grid import pack_rows, unpack_cells

    rows = torch.arange(1024).reshape(8, 128)
    rows = torch.cat((rows, rows.roll(1, dims=1)))  # each value first and second of a pair
    cells = ((rows.unsqueeze(-1) >> torch.arange(10)) & 1).bool()
    words = pack_rows(rows)
    assert words.dtype == torch.int32 and words.shape == (16, 320)
    assert torch.equal(words.view(torch.bool).view(16, 128, 10), cells)
    assert torch.equal(unpack_cells(words[:, :250], 10), cells[:, :100].reshape(16, 10, 10, 10))
    # Space Invaders packs its observation; the compiled step views it (LeanCore.views)
    env = _env("space_invaders")
    env.lean_reset()
    core = env.lean_core()
    packed = core.observe(*env.env_state)["observation"]
    assert packed.dtype == torch.int32
    cells = core.views["observation"](packed)
    assert cells.dtype == torch.bool and cells.shape == (8, 6, 10, 10)
    assert torch.equal(cells, env.rules.observe(env.env_state.game))
    assert cells.data_ptr() == packed.data_ptr()  # a view, not a copy


def test_compiled_step_takes_the_games_inductor_options_under_the_callers():
    from gpurl.envs.compile import compile_lean_step

    env = _env("freeway")
    assert env.lean_core().inductor_options == {"cpp.simdlen": 1}  # scalar loops on CPU
    assert compile_lean_step(env).kwargs == {"options": {"cpp.simdlen": 1}}
    # a game's own options on top (Breakout's: realize longer expressions first)
    breakout = {"cpp.simdlen": 1, "realize_opcount_threshold": 2}
    assert _env("breakout").lean_core().inductor_options == breakout
    shared = {"cpp.simdlen": 1, **REALIZE_SHARED}  # values several slot loops read
    assert _env("seaquest").lean_core().inductor_options == shared
    assert _env("asterix").lean_core().inductor_options == shared
    mine = compile_lean_step(env, options={"cpp.simdlen": 8, "max_autotune": False})
    assert mine.kwargs == {"options": {"cpp.simdlen": 8, "max_autotune": False}}
    assert compile_lean_step(env, backend="dynamo").kwargs == {}  # Inductor options only


@pytest.mark.slow  # compiles Freeway's step: about 10 s on 2 CPU cores
def test_compiled_counter_rng_step_is_its_eager_self():
    """rng="counter" on Freeway: its [B, 8] car state, computed from the generator's
    column-major lanes, comes back row-major, so the second call takes it; each step is
    the LeanCore step with the generator's draws."""
    from gpurl.envs.compile import CounterRNG, compile_lean_step

    env, ref = _env("freeway", seed=2), _env("freeway", seed=2)
    env.lean_reset(), ref.lean_reset()
    step = compile_lean_step(env, rng="counter")
    crng, core = step.counter_rng, ref.lean_core()
    key, counter, lanes = crng.key.clone(), crng.counter.clone(), crng.lanes
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        action = torch.randint(0, 3, (8,), generator=gen)
        nxt, obs = step(action)
        noise = tuple(CounterRNG.draws(key, counter, lanes))
        work, nxt_r = core.step(core.unpack(*ref.env_state), action, noise)
        ref.env_state = core.pack(*work)
        counter = counter + 1
        for k in nxt_r:
            assert torch.equal(nxt[k], nxt_r[k]), k
        assert torch.equal(obs["observation"], core.observe(*ref.env_state)["observation"])
    assert torch.equal(crng.counter, counter)


@pytest.mark.slow  # compiles the step: about 10 s a game on 2 CPU cores
@pytest.mark.parametrize("game", SITES)
def test_compiled_lean_step_follows_the_eager_env(game):
    from gpurl.envs.compile import compile_lean_step

    env, ref = _env(game, seed=3), _env(game, seed=3)
    env.lean_reset(), ref.lean_reset()
    step = compile_lean_step(env)
    gen = torch.Generator().manual_seed(0)
    for t in range(100):
        action = torch.randint(0, len(env.rules.actions), (8,), generator=gen)
        (nxt, obs), (nxt_r, obs_r) = step(action), ref.lean_step(action)
        for key in nxt_r.keys():
            assert torch.equal(nxt[key], nxt_r[key]), (t, key)
        assert torch.equal(obs["observation"], obs_r["observation"]), t
