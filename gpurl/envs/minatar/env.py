"""MinAtarEnv: the TorchRL shell over the MinAtar games (Young & Tian 2019), batched.

`env=minatar env.game=<game>`. Observation "observation": bool [B, C, 10, 10], the
game's channels first (MinAtar's state() is [10, 10, C]; channels first is what gpurl's
image encoder reads). Actions: the game's minimal action set, 0..n-1, in MinAtar's
minimal_action_set() order (env.minimal_actions=false: all six, 0..5, MinAtar's full
set, as the paper's DQN acted). Sticky actions (env.sticky_prob, 0.1 as published): with
that probability a step repeats the previous action instead, as MinAtar's Environment
does, the previous action carrying over resets as there. Difficulty ramping
(env.difficulty_ramping) for the games that have one. All randomness is uniforms drawn
from the env's generator, a fixed number per env per step and per reset
(Game.step_noise, Game.reset_noise). See docs/envs/minatar.md.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch
from torchrl.data import Categorical

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.base import LeanCore, NativeEnv, StepResult, state_attributes
from gpurl.envs.config import EnvConfig
from gpurl.envs.minatar import asterix, breakout, freeway, seaquest, space_invaders
from gpurl.envs.minatar.grid import FULL_ACTIONS, SIZE, Game, lookup, unpack_cells
from gpurl.errors import ConfigError

GAMES: dict[str, Game] = {
    g.name: g
    for g in (breakout.GAME, freeway.GAME, asterix.GAME, space_invaders.GAME, seaquest.GAME)
}


class MinAtarState(NamedTuple):
    """The game's state, the last action taken (a full-set index, for sticky actions)
    and the episode lengths."""

    game: tuple
    last_action: torch.Tensor  # int64 [B]
    steps: torch.Tensor  # int64 [B]


def check_game(game: str) -> Game:
    if game not in GAMES:
        raise ConfigError(
            f"env.game={game} is not a MinAtar game gpurl has: use one of {', '.join(GAMES)}"
        )
    return GAMES[game]


@declare(name="minatar", num_envs=128, eval_envs=16)
class MinAtarConfig(EnvConfig):
    """MinAtar's games (Young & Tian 2019) batched on the device: 10 x 10 boolean
    channels, sticky actions and difficulty ramping as published (docs/envs/minatar.md)."""

    obs = "images"

    game: str = key(
        "breakout", "the MinAtar game", choices=lambda: tuple(GAMES), note=("the game",)
    )
    sticky_prob: float = key(
        0.1, "probability that a step repeats the previous action (MinAtar: 0.1)", ge=0, le=1
    )
    difficulty_ramping: bool = key(
        True, "true: the games that ramp speed up over an episode, as published"
    )
    max_episode_steps: int = key(
        10_000, "steps before an episode is truncated (MinAtar has no cap: a FIX)", ge=1
    )
    minimal_actions: bool = key(
        True,
        "true: the game's minimal action set; false: all six, as the MinAtar paper's DQN "
        "acted (examples/dqn.py: the actions a game ignores are no-ops)",
    )


@register("env", "minatar", MinAtarConfig)
class MinAtarEnv(state_attributes(MinAtarState), NativeEnv):
    def __init__(
        self,
        num_envs: int = 1,
        device="cpu",
        seed: int = 0,
        *,
        game: str = "breakout",
        sticky_prob: float = 0.1,
        difficulty_ramping: bool = True,
        max_episode_steps: int = 10_000,
        minimal_actions: bool = True,
    ):
        spec = check_game(game)
        if not 0.0 <= float(sticky_prob) <= 1.0:
            raise ConfigError(f"env.sticky_prob must be in [0, 1], got {sticky_prob}")
        if int(max_episode_steps) < 1:
            raise ConfigError(f"env.max_episode_steps must be >= 1, got {max_episode_steps}")
        super().__init__(num_envs, device, seed)
        self.rules = spec
        self.sticky_prob = float(sticky_prob)
        self.ramping = bool(difficulty_ramping)
        self.max_episode_steps = int(max_episode_steps)
        # the actions the agent picks from, as full-set indices
        self.actions = spec.actions if minimal_actions else FULL_ACTIONS
        b = self.batch_size
        self._set_specs(
            {
                "observation": Categorical(
                    2, shape=(*b, spec.channels, SIZE, SIZE), dtype=torch.bool, device=self.device
                )
            },
            Categorical(len(self.actions), shape=b, device=self.device),
        )
        zero = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.env_state = MinAtarState(spec.init(self.num_envs, self.device), zero, zero)

    def _uniform(self, columns: int) -> torch.Tensor:
        """Uniforms [B, columns] from the env's generator: all of a step's or a reset's
        randomness."""
        return torch.rand((self.num_envs, columns), generator=self.rng, device=self.device)

    def _reset_where(self, mask):
        game, last, steps = self.env_state
        u = self._uniform(self.rules.reset_noise)
        self.env_state = MinAtarState(
            self.rules.reset(game, mask, u), last, torch.where(mask, 0, steps)
        )

    def _advance(self, action):
        game, last, steps = self.env_state
        u = self._uniform(1 + self.rules.step_noise)
        full = lookup(self.actions, action.reshape(self.batch_size).long())
        full = torch.where(u[:, 0] < self.sticky_prob, last, full)
        game, reward, terminal = self.rules.step(game, full, u[:, 1:], self.ramping)
        steps = steps + 1
        self.env_state = MinAtarState(game, full, steps)
        truncated = (steps >= self.max_episode_steps) & ~terminal
        return StepResult(reward.unsqueeze(-1), terminal.unsqueeze(-1), truncated.unsqueeze(-1))

    def _observation(self):
        return {"observation": self.rules.observe(self.env_state.game)}

    CELL = 16  # pixels a side of a grid cell: 10 x 10 cells, 160 x 160 frames
    # a colour per channel (the highest set channel of a cell shows), on black
    PALETTE = (
        (0, 0, 0), (230, 159, 0), (86, 180, 233), (0, 158, 115), (240, 228, 66),
        (0, 114, 178), (213, 94, 0), (204, 121, 167), (255, 255, 255), (153, 153, 153),
        (120, 60, 180),
    )  # fmt: skip

    def render_frames(self) -> torch.Tensor:
        """The game's grid, each cell in the colour of its highest set channel."""
        obs = self.rules.observe(self.env_state.game)  # bool [B, C, 10, 10]
        channel = torch.arange(1, obs.shape[1] + 1, device=obs.device).view(1, -1, 1, 1)
        shown = (obs * channel).amax(1)  # [B, 10, 10]: 0 where empty
        palette = torch.tensor(self.PALETTE, dtype=torch.uint8, device=obs.device)
        cells = palette[shown.clamp(max=len(self.PALETTE) - 1)]
        return cells.repeat_interleave(self.CELL, 1).repeat_interleave(self.CELL, 2)

    def lean_core(self) -> LeanCore:
        b, rules = self.num_envs, self.rules
        # a game that packs its cells (grid.pack_rows) returns the words from the step,
        # and the compiled step views them as bool cells
        observe = rules.observe_packed or rules.observe
        views = {}
        if rules.observe_packed is not None:
            views["observation"] = partial(unpack_cells, channels=rules.channels)
        return LeanCore(
            step=_core(
                rules, self.actions, observe, self.sticky_prob, self.ramping,
                self.max_episode_steps,
            ),  # fmt: skip
            noise_shapes=(torch.Size((b, 1 + rules.step_noise)),
                          torch.Size((b, rules.reset_noise))),
            observe=lambda game, last, steps: {"observation": observe(game)},
            pack=MinAtarState,
            views=views,
            # The games are integer and bool logic on small grids, which Inductor's CPU
            # vectorizer turns into mask conversions: its scalar loops ran Breakout's
            # step 8x faster (1,024 envs, one thread). No effect on GPU code; a game's
            # own options were measured on the CPU and apply there alone.
            inductor_options={
                "cpp.simdlen": 1,
                **(rules.inductor_options if self.device.type == "cpu" else {}),
            },
        )  # fmt: skip


def _core(rules: Game, actions, observe, sticky: float, ramping: bool, max_steps: int):
    """LeanCore.step: the sticky-action draw, the game's step, then fresh episodes where
    done, from the same uniforms lean_step draws (the step's, then the reset's).
    `actions`: the env's action set as full-set indices; `observe`: the game's observe,
    or its observe_packed."""

    def step(work, action, noise, force_reset=False):
        game, last, steps = work
        u, fresh = noise
        full = torch.where(
            u[:, 0] < sticky, last, lookup(actions, action.reshape(last.shape).long())
        )
        game, reward, terminal = rules.step(game, full, u[:, 1:], ramping)
        steps = steps + 1
        reached = observe(game)
        if force_reset:
            truncated = torch.ones_like(terminal)
        else:
            truncated = (steps >= max_steps) & ~terminal
        done = terminal | truncated
        game = rules.reset(game, done, fresh)
        terminal, truncated = terminal.unsqueeze(-1), truncated.unsqueeze(-1)
        nxt = {
            "observation": reached,
            "reward": reward.unsqueeze(-1),
            "done": terminal | truncated,
            "terminated": terminal,
            "truncated": truncated,
        }
        return (game, full, torch.where(done, 0, steps)), nxt

    return step
