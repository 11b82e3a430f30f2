"""Aggregate results over runs the way Agarwal et al. (2021, "Deep RL at the Edge of the
Statistical Precipice") recommend: the estimators of their `rliable` library, in numpy
and vectorised over resamples (a many-seeds run or a sweep summary gets its intervals
in milliseconds, without importing scipy; tests/test_aggregate.py checks them against
rliable, the `stats` extra).

A table of scores is `[runs, tasks]` (one column for one task). Point estimates:

    iqm    the interquartile mean: the mean of the middle 50% of all scores (25% trimmed
           at each end, as scipy.stats.trim_mean cuts), robust to one outlying seed,
           yet using half the runs
    mean   the plain mean over runs and tasks

Each comes with a stratified bootstrap confidence interval: runs are resampled with
replacement within each task, `reps` times, and the interval is the percentile range
of the estimate over resamples. A performance profile is, per threshold tau, the
fraction of runs whose score exceeds tau (mean over tasks), with the same intervals.

The bootstrap is seeded (`seed`, its own generator): the same table gives the same
intervals, and numpy's global stream is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

REPS = 2000
CONFIDENCE = 0.95


def _table(scores) -> np.ndarray:
    table = np.asarray(scores, dtype=np.float64)
    if table.ndim == 1:  # one task
        table = table[:, None]
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError(f"scores must be [runs] or [runs, tasks], got shape {table.shape}")
    return table


def iqm(tables: np.ndarray) -> np.ndarray:
    """Interquartile mean of `[..., runs, tasks]` tables, over all scores of each: the
    sorted scores less int(n / 4) at each end, averaged."""
    flat = np.sort(tables.reshape(*tables.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut : flat.shape[-1] - cut].mean(-1)


def _interval(
    table: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    reps: int,
    confidence: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """statistic(table) and its stratified-bootstrap percentile interval. `statistic`
    maps `[..., runs, tasks]` tables to `[..., k]` estimates."""
    runs, tasks = table.shape
    index = np.random.default_rng(seed).integers(0, runs, size=(reps, runs, tasks))
    resampled = np.take_along_axis(table[None], index, axis=1)  # each task's own runs
    estimates = statistic(resampled)  # [reps, k]
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail], axis=0)
    return statistic(table), low, high


def aggregate(scores, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """IQM and mean of a `[runs]` or `[runs, tasks]` table with their bootstrap intervals.

    Returns {"runs", "iqm", "iqm_ci": [low, high], "mean", "mean_ci": [low, high],
    "reps", "confidence"}: plain floats, ready for JSON.
    """
    table = _table(scores)

    def estimates(t):
        return np.stack([iqm(t), t.reshape(*t.shape[:-2], -1).mean(-1)], axis=-1)

    (point_iqm, point_mean), low, high = _interval(table, estimates, reps, confidence, seed)
    return {
        "runs": int(table.shape[0]),
        "iqm": float(point_iqm),
        "iqm_ci": [float(low[0]), float(high[0])],
        "mean": float(point_mean),
        "mean_ci": [float(low[1]), float(high[1])],
        "reps": reps,
        "confidence": confidence,
    }


def performance_profile(
    scores,
    taus: Sequence[float],
    reps: int = REPS,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> dict:
    """Per threshold tau, the fraction of runs scoring above it (averaged over tasks),
    with its bootstrap interval: {"tau", "fraction", "ci_low", "ci_high"} lists."""
    table = _table(scores)
    taus = np.asarray(taus, dtype=np.float64)

    def profile(t):  # [..., runs, tasks] -> [..., taus]
        return (t[..., None] > taus).mean(axis=(-3, -2))

    fraction, low, high = _interval(table, profile, reps, confidence, seed)
    return {
        "tau": taus.tolist(),
        "fraction": fraction.tolist(),
        "ci_low": low.tolist(),
        "ci_high": high.tolist(),
    }


def curve_band(curves: Sequence[np.ndarray], reps: int = REPS, seed: int = 0) -> dict:
    """IQM and its interval at each evaluation point of several runs' curves.

    `curves` are `[points, 2]` arrays of (frames, return). Runs may evaluate at different
    frames: they are compared on every frame any of them evaluated at, within the span
    all of them cover (linear interpolation between a run's own points)."""
    curves = [np.asarray(c, dtype=np.float64) for c in curves if len(c)]
    if not curves:
        return {"frames": [], "iqm": [], "ci_low": [], "ci_high": []}
    grid = np.unique(np.concatenate([c[:, 0] for c in curves]))
    start, end = max(c[0, 0] for c in curves), min(c[-1, 0] for c in curves)
    grid = grid[(grid >= start) & (grid <= end)]
    values = np.stack([np.interp(grid, c[:, 0], c[:, 1]) for c in curves])  # [runs, points]
    points = [aggregate(point, reps=reps, seed=seed) for point in values.T]
    return {
        "frames": grid.tolist(),
        "iqm": [a["iqm"] for a in points],
        "ci_low": [a["iqm_ci"][0] for a in points],
        "ci_high": [a["iqm_ci"][1] for a in points],
    }
