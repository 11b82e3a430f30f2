"""Atari games through envpool, as a batched TorchRL env: `env=envpool` (docs/envs/envpool.md).

envpool runs the games in C++ threads and does the standard preprocessing itself
(Machado et al. 2018, the Nature-DQN settings CleanRL's ppo_atari_envpool uses):
frame skip 4 with the max over the last two frames, 84 x 84 grayscale, a stack of the
last 4 frames, up to 30 no-op actions at the start of a game, FIRE pressed at reset in
games that need it, and for training an episode per life (episodic life) with rewards
clipped to their sign. What this module adds is the TorchRL face and the bookkeeping
a score needs:

    pixels                    uint8 [num_envs, 4, 84, 84], bounds 0..255 (encoders
                              divide by 255)
    action                    int64 [num_envs], Categorical over the game's minimal set
    reward                    the training reward: the sign of the game's (reward_clip)
    terminated / truncated    a lost life ends an episode (episodic_life); truncated at
                              max_episode_steps agent steps of a game (27,000 = 108,000
                              frames, the standard cap), over all its lives
    info/score                the step's unclipped game reward
    info/game_over            the game ended (last life lost, or the step cap)

Why not TorchRL's MultiThreadedEnv: it drops envpool's info (the unclipped reward, the
lives), and its explicit partial reset starts a new game, so inside a TransformedEnv
(gpurl's ForeignEnv), whose resets go through `_reset`, every episodic-life episode
would be a game's first life. Here a reset of an env whose life ended steps that env
alone (envpool's own autoreset: the next life, with its no-ops and FIRE, or a new game
after the last life), so no transition is spent on it and later lives are played.

Evaluation (`AtariEnv.evaluation_protocol`) plays each evaluation env's first full game
greedily and reports the mean unclipped score; training logs the same score of the
games it finishes (`read_stats`: train/env_score).
"""

from __future__ import annotations

import difflib

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import DeviceCastTransform, EnvBase

from gpurl.core.config import declare, key
from gpurl.core.registry import register
from gpurl.envs.config import ForeignEnvConfig
from gpurl.envs.foreign import ForeignEnv, first_copy_seed
from gpurl.errors import ConfigError

MISSING = "env=envpool needs envpool (Linux, x86_64 or aarch64): pip install -e '.[envpool]'"


def import_envpool():
    try:
        import envpool
    except ImportError:
        raise ConfigError(MISSING) from None
    return envpool


class EnvPoolAtari(EnvBase):
    """envpool's Atari pool as one TorchRL env of `num_envs` games, on the CPU."""

    def __init__(
        self,
        game: str = "Breakout-v5",
        num_envs: int = 8,
        seed: int = 0,
        *,
        episodic_life: bool = True,
        reward_clip: bool = True,
        noop_max: int = 30,
        frame_skip: int = 4,
        stack_num: int = 4,
        img_size: int = 84,
        repeat_action_probability: float = 0.0,
        use_fire_reset: bool = True,
        full_action_space: bool = False,
        max_episode_steps: int = 27000,
        num_threads: int = 0,
    ):
        envpool = import_envpool()
        from envpool.atari import AtariEnvSpec

        ids = envpool.list_all_envs()
        if game not in ids or not isinstance(envpool.make_spec(game), AtariEnvSpec):
            close = difflib.get_close_matches(game, [g for g in ids if g.endswith("-v5")], n=1)
            hint = f"did you mean {close[0]}?" if close else "e.g. env.game=Breakout-v5"
            raise ConfigError(f"env.game={game} is not an envpool Atari game: {hint}")
        n = int(num_envs)
        if n < 1:
            raise ConfigError(f"env.num_envs must be >= 1, got {num_envs}")
        super().__init__(batch_size=torch.Size([n]), device="cpu")
        self.num_envs = n
        self.pool = envpool.make_gymnasium(
            game,
            num_envs=n,
            seed=first_copy_seed(seed),  # game i seeded first + i: no run shares a game's seed
            episodic_life=bool(episodic_life),
            reward_clip=bool(reward_clip),
            noop_max=int(noop_max),
            frame_skip=int(frame_skip),
            stack_num=int(stack_num),
            img_height=int(img_size),
            img_width=int(img_size),
            gray_scale=True,
            repeat_action_probability=float(repeat_action_probability),
            use_fire_reset=bool(use_fire_reset),
            full_action_space=bool(full_action_space),
            max_episode_steps=int(max_episode_steps),
            num_threads=int(num_threads),
        )
        frames = (n, int(stack_num), int(img_size), int(img_size))
        b = self.batch_size
        flag = Categorical(2, shape=(*b, 1), dtype=torch.bool)
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, frames, dtype=torch.uint8),
            info=Composite(
                score=Unbounded((*b, 1)),
                lives=Unbounded((*b, 1), dtype=torch.int64),
                game_over=flag.clone(),
                shape=b,
            ),
            shape=b,
        )
        self.action_spec = Categorical(int(self.pool.action_space.n), shape=b)
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=b
        )
        self.pixels = np.zeros(frames, dtype=np.uint8)
        self.lives = np.zeros(n, dtype=np.int64)
        self.ended = np.zeros(n, dtype=bool)  # the last step ended an episode (a life)
        # the unclipped score of each env's game so far, and of games finished since the
        # last read_stats (training's train/env_score)
        self.game_score = np.zeros(n, dtype=np.float64)
        self.finished = [0, 0.0]  # games, summed score

    def _set_seed(self, seed: int | None):
        return seed  # envpool seeds each game from the seed it is built with

    def _write(self, rows, obs, info) -> None:
        """Put the rows `rows` of a step or reset (ordered as info's env_id) in place."""
        self.pixels[rows] = obs
        self.lives[rows] = info["lives"]

    def _out(self, score, game_over, reward=None, terminated=None, truncated=None):
        n, b = self.num_envs, self.batch_size
        zeros = np.zeros(n, dtype=bool)
        terminated = zeros if terminated is None else terminated
        truncated = zeros if truncated is None else truncated
        col = (n, 1)
        out = {
            "pixels": torch.from_numpy(self.pixels.copy()),
            "info": {
                "score": torch.from_numpy(score.astype(np.float32)).reshape(col),
                "lives": torch.from_numpy(self.lives.copy()).reshape(col),
                "game_over": torch.from_numpy(game_over).reshape(col),
            },
            "terminated": torch.from_numpy(terminated.copy()).reshape(col),
            "truncated": torch.from_numpy(truncated.copy()).reshape(col),
            "done": torch.from_numpy(terminated | truncated).reshape(col),
        }
        if reward is not None:
            out["reward"] = torch.from_numpy(reward.astype(np.float32)).reshape(col)
        return TensorDict(out, batch_size=b)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        n = self.num_envs
        mask = None
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict.get("_reset").reshape(n).cpu().numpy()
        if mask is None or mask.all() and not self.ended.any():
            obs, info = self.pool.reset()
            self._write(info["env_id"], obs, info)
            self.ended[:] = False
            self.game_score[:] = 0.0
        else:
            # an env whose episode ended steps alone: envpool's autoreset plays the next
            # life (no-ops, FIRE) or starts a new game, and ignores the action
            ended = np.flatnonzero(mask & self.ended)
            if len(ended):
                obs, _, _, _, info = self.pool.step(np.zeros(len(ended), np.int32), ended)
                self._write(info["env_id"], obs, info)
            forced = np.flatnonzero(mask & ~self.ended)  # asked to restart mid-game
            if len(forced):
                obs, info = self.pool.reset(forced)
                self._write(info["env_id"], obs, info)
                self.game_score[forced] = 0.0
            self.ended[mask] = False
        return self._out(np.zeros(n), np.zeros(n, dtype=bool))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action").reshape(self.num_envs).cpu().numpy()
        obs, reward, terminated, truncated, info = self.pool.step(action.astype(np.int32))
        rows = info["env_id"]
        self._write(rows, obs, info)
        score = np.empty(self.num_envs, np.float64)
        score[rows] = info["reward"]  # envpool's unclipped reward, beside the clipped one
        order = np.argsort(rows)
        reward, terminated, truncated = reward[order], terminated[order], truncated[order]
        game_over = np.zeros(self.num_envs, dtype=bool)
        game_over[rows] = info["terminated"].astype(bool)
        game_over |= truncated
        self.ended = terminated | truncated
        self.game_score += score
        if game_over.any():
            self.finished[0] += int(game_over.sum())
            self.finished[1] += float(self.game_score[game_over].sum())
            self.game_score[game_over] = 0.0
        return self._out(score, game_over, reward, terminated, truncated)

    def read_finished(self) -> dict[str, float] | None:
        """Mean unclipped score of the games finished since the last call, or None."""
        games, total = self.finished
        self.finished = [0, 0.0]
        return None if games == 0 else {"score": total / games, "games": float(games)}

    def close(self, *, raise_if_closed: bool = True):
        self.pool.close()
        super().close(raise_if_closed=raise_if_closed)


def game_scores(env: EnvBase, policy, max_steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each env's first game played by `policy` from a fresh reset: (unclipped score,
    whether the game ended within `max_steps` agent steps), [num_envs] each on the CPU.
    A lost life ends an episode the env restarts from; the score runs over all lives."""
    n = env.batch_size.numel()
    score = torch.zeros(n, dtype=torch.float64)
    over = torch.zeros(n, dtype=torch.bool)
    td = env.reset()
    for _ in range(max_steps):
        td, after = env.step_and_maybe_reset(policy(td))
        nxt = td.get("next")
        gained = nxt.get(("info", "score")).reshape(n).cpu().double()
        score += torch.where(over, 0.0, gained)
        over |= nxt.get(("info", "game_over")).reshape(n).cpu()
        if bool(over.all()):  # evaluation, not the hot path: stop once every game is over
            break
        td = after
    return score, over


class AtariEnv(ForeignEnv):
    """The envpool games with gpurl's hooks: evaluation plays full games and reports the
    unclipped score; training logs the score of the games it finishes."""

    def __init__(self, env: EnvPoolAtari, transform=None, max_episode_steps: int = 27000):
        super().__init__(env, transform, max_episode_steps=max_episode_steps)
        self.games = env

    def evaluation_protocol(self, policy) -> dict[str, float]:
        """Mean unclipped score of each env's first full game (every life), and the share
        of games that ended before the step cap (max_episode_steps; the others count
        the score they had)."""
        score, over = game_scores(self, policy, self.max_episode_steps)
        return {"return": score.mean().item(), "games_finished": over.float().mean().item()}

    def read_stats(self) -> dict[str, float] | None:
        return self.games.read_finished()


@declare
class EnvpoolConfig(ForeignEnvConfig):
    """Atari games through envpool (gpurl/envs/envpool.py, docs/envs/envpool.md), e.g.
      python -m gpurl.train env=envpool env.game=Pong-v5 agent=ppo
    Needs the envpool extra: pip install -e '.[envpool]'. The preprocessing is envpool's
    (the standard Nature-DQN settings); observations are uint8 frames [4, 84, 84]."""

    obs = "images"

    _target_: str = key(
        "gpurl.envs.envpool.make_envpool_env", "the factory (gpurl/envs/envpool.py)"
    )
    name: str = key("envpool", "the run directory's label")
    game: str = key("Breakout-v5", "an envpool Atari id (<Game>-v5)")
    num_envs: int = key(8, "games stepped together (one envpool pool)", ge=1)
    eval_envs: int = key(8, "evaluation games: each plays one full game per evaluation", ge=1)
    max_episode_steps: int | None = key(
        27000,
        "agent steps a game may last (27,000 = 108,000 frames, the standard cap); null: 27000",
        ge=1,
    )
    episodic_life: bool = key(
        True, "a lost life ends an episode (the game goes on); evaluation scores full games"
    )
    reward_clip: bool = key(
        True, "train on the sign of the reward; info/score keeps the game's own"
    )
    noop_max: int = key(30, "up to this many no-op actions at the start of a game", ge=0)
    frame_skip: int = key(
        4, "each action repeated frame_skip frames; the frame is the max of the last two", ge=1
    )
    stack_num: int = key(4, "frames stacked in an observation", ge=1)
    img_size: int = key(84, "frames resized to img_size x img_size, grayscale", ge=1)
    repeat_action_probability: float = key(
        0.0,
        "sticky actions (0.25 is Machado et al.'s; 0 is CleanRL's envpool runs)",
        ge=0,
        le=1,
    )
    use_fire_reset: bool = key(True, "press FIRE at the start of each life in games that need it")
    full_action_space: bool = key(False, "false: the game's minimal action set")
    num_threads: int = key(0, "envpool's threads; 0: one per core", ge=0)


@register("env", "envpool", EnvpoolConfig)
def make_envpool_env(
    game: str = "Breakout-v5",
    num_envs: int = 8,
    device="cpu",
    seed: int = 0,
    max_episode_steps: int | None = None,
    **options,
) -> AtariEnv:
    """The `_target_` of configs/env/envpool.yaml: `num_envs` games of `game` (an envpool
    id, e.g. Breakout-v5), stepped on the CPU, observations moved to `device`; `options`
    are EnvPoolAtari's (episodic_life, reward_clip, noop_max, ...)."""
    steps = int(max_episode_steps or 27000)
    base = EnvPoolAtari(game, num_envs, seed, max_episode_steps=steps, **options)
    cast = DeviceCastTransform(device, "cpu") if torch.device(device).type != "cpu" else None
    return AtariEnv(base, cast, max_episode_steps=steps)
