"""Drive MinAtar's reference package (minatar 1.0.15, NumPy) with gpurl's draws.

The reference draws from `self.random` (a NumPy RandomState) and its Environment's
sticky-action draw too. FakeRandom stands in for it: each call is served from the
uniforms gpurl drew for that env on that step (or reset), at the slot the game module
reserves for that call site. A call site is told by its source line, so a game maps
each of its draws (`self.random.rand() < 1/2`, ...) to a slot; a site called several
times in one step takes the next `width` slots each time. randint and choice turn a
uniform u into an integer as gpurl does: low + floor(u (high - low)). A site may name
its own decoding instead, a function of its `width` uniforms that returns the call's
values (Freeway draws its cars' speeds and directions packed in four uniforms).
"""

from __future__ import annotations

import linecache
import sys

import numpy as np
import pytest
import torch

minatar = pytest.importorskip("minatar", reason="the reference MinAtar package (dev extra)")
from minatar import Environment  # noqa: E402

STICKY_SITE = ("self.random.rand() < self.sticky_action_prob", 0, 1)


class FakeRandom:
    def __init__(self, sites):
        # sites: (source fragment, first slot, slots per call[, decode])
        self.sites = [(*site, None)[:4] for site in sites]
        self.u = np.zeros(0)
        self.calls = {}

    def serve(self, u, offset: int = 0):
        """Serve the draws from `u`; the game's slots start at `offset` (1 on a step,
        after the sticky-action slot 0)."""
        self.u = np.asarray(u, dtype=np.float64)
        self.offset = offset
        self.calls = {}

    def _slots(self, n: int) -> tuple[np.ndarray, bool]:
        """The n uniforms for the calling draw, or its n values where its site decodes
        its own (then True)."""
        frame = sys._getframe(2)
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        for fragment, first, width, decode in self.sites:
            # "function::text": the text at a call site in that function
            function, _, text = fragment.rpartition("::")
            if text in line and function in ("", frame.f_code.co_name):
                k = self.calls.get(fragment, 0)
                self.calls[fragment] = k + 1
                start = first + k * width + (0 if fragment == STICKY_SITE[0] else self.offset)
                if decode is not None:
                    values = np.asarray(decode(self.u[start : start + width]))
                    assert len(values) == n, (line, len(values), n)
                    return values, True
                assert n <= width and start + n <= len(self.u), (line, k, len(self.u))
                return self.u[start : start + n], False
        raise AssertionError(f"a reference draw at an unmapped site: {line.strip()}")

    def rand(self, *size):
        u, _ = self._slots(int(np.prod(size)) if size else 1)
        return float(u[0]) if not size else u.reshape(size)

    def randint(self, low, high=None, size=None):
        if high is None:
            low, high = 0, low
        u, decoded = self._slots(1 if size is None else int(size))
        if decoded:
            return int(u[0]) if size is None else u
        # float32 as gpurl draws them
        values = low + np.floor(u.astype(np.float32) * np.float32(high - low)).astype(int)
        values = np.minimum(values, high - 1)
        return int(values[0]) if size is None else values

    def choice(self, a):
        options = list(a)
        return options[int(self.randint(len(options)))]


def reference_env(game: str, sticky_prob: float, ramping: bool, sites):
    ref = Environment(game, sticky_action_prob=sticky_prob, difficulty_ramping=ramping)
    fake = FakeRandom([STICKY_SITE, *sites])
    ref.random = fake
    ref.env.random = fake
    return ref, fake


def run_parity(env, sites, steps: int, seed: int = 0, weights=None, setup=None):
    """Step gpurl's env (lean path, random actions) and one reference env per batch
    entry from the same draws; assert equal observations, rewards and terminals on
    every step and reset. `weights`: the actions' odds (uniform if None); `setup(env,
    refs)` may set both sides' states alike after the first reset. Returns the number
    of episodes that ended and the rewards."""
    draws = []
    uniform = env._uniform

    def recording(columns):
        u = uniform(columns)
        draws.append(u.double().numpy())
        return u

    env._uniform = recording
    n = env.num_envs
    refs = [reference_env(env.rules.name, env.sticky_prob, env.ramping, sites) for _ in range(n)]
    obs = env.lean_reset()["observation"]
    (reset_u,) = draws
    for i, (ref, fake) in enumerate(refs):
        fake.serve(reset_u[i])
        ref.reset()
        _same(ref, obs[i], f"env {i} after its first reset")
    if setup is not None:
        setup(env, [ref for ref, _ in refs])
    actions = torch.tensor(env.actions)
    odds = torch.ones(len(actions)) if weights is None else torch.tensor(weights, dtype=torch.float)
    gen = torch.Generator().manual_seed(seed)
    ended, rewards = 0, 0.0
    for t in range(steps):
        draws.clear()
        a = torch.multinomial(odds, n, replacement=True, generator=gen)
        nxt, obs = env.lean_step(a)
        obs = obs["observation"]
        step_u, reset_u = draws
        for i, (ref, fake) in enumerate(refs):
            fake.serve(step_u[i], offset=1)
            r, terminal = ref.act(int(actions[a[i]]))
            where = f"env {i}, step {t}"
            assert float(nxt["reward"][i, 0]) == r, where
            rewards += r
            assert bool(nxt["terminated"][i, 0]) == terminal, where
            _same(ref, nxt["observation"][i], where)
            if terminal:
                ended += 1
                fake.serve(reset_u[i])
                ref.reset()
                _same(ref, obs[i], where + ", after its reset")
    return ended, rewards


def _same(ref, observation: torch.Tensor, where: str):
    expected = torch.from_numpy(np.ascontiguousarray(ref.state().transpose(2, 0, 1)))
    if not torch.equal(observation, expected):
        diff = (observation != expected).nonzero().tolist()
        raise AssertionError(f"{where}: observations differ at [c, y, x] {diff[:6]}")
