"""Aggregate results over runs the way Agarwal et al. (2021, "Deep RL at the Edge of the
Statistical Precipice") recommend, through their `rliable` library (the `stats` extra).

A table of scores is `[runs, tasks]` (one column for one task). Point estimates:

    iqm    the interquartile mean: the mean of the middle 50% of all scores (25% trimmed
           at each end), robust to one outlying seed, yet using half the runs
    mean   the plain mean over runs and tasks

Each comes with a stratified bootstrap confidence interval: runs are resampled with
replacement within each task, `reps` times, and the interval is the percentile range
of the estimate over resamples. A performance profile is, per threshold tau, the
fraction of runs whose score exceeds tau (mean over tasks), with the same intervals.

The bootstrap is seeded (`seed`): the same table gives the same intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from gpurl.errors import ConfigError

REPS = 2000
CONFIDENCE = 0.95


def _rliable():
    try:
        from rliable import library, metrics
    except ImportError as e:  # the extra is missing, or a dependency of it does not load
        raise ConfigError(
            f"aggregate statistics need rliable ({e}): pip install -e '.[stats]'"
        ) from None
    return library, metrics


@contextmanager
def _seeded(seed: int):
    """rliable 1.2 draws its resampling indices from numpy's global stream (the
    random_state it takes reaches only arch's base class), so seed that stream for the
    bootstrap and give the caller's state back after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _table(scores) -> np.ndarray:
    table = np.asarray(scores, dtype=np.float64)
    if table.ndim == 1:  # one task
        table = table[:, None]
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError(f"scores must be [runs] or [runs, tasks], got shape {table.shape}")
    return table


def aggregate(scores, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """IQM and mean of a `[runs]` or `[runs, tasks]` table with their bootstrap intervals.

    Returns {"runs", "iqm", "iqm_ci": [low, high], "mean", "mean_ci": [low, high],
    "reps", "confidence"}: plain floats, ready for JSON.
    """
    library, metrics = _rliable()
    table = _table(scores)

    def estimates(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])

    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"runs": table}, estimates, reps=reps, confidence_interval_size=confidence
        )
    (iqm, mean), ci = points["runs"], intervals["runs"]
    return {
        "runs": int(table.shape[0]),
        "iqm": float(iqm),
        "iqm_ci": [float(ci[0, 0]), float(ci[1, 0])],
        "mean": float(mean),
        "mean_ci": [float(ci[0, 1]), float(ci[1, 1])],
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
    library, _ = _rliable()
    table = _table(scores)
    taus = np.asarray(taus, dtype=np.float64)

    def profile(x):
        return np.array([(x > tau).mean(axis=0).mean() for tau in taus])

    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"runs": table}, profile, reps=reps, confidence_interval_size=confidence
        )
    return {
        "tau": taus.tolist(),
        "fraction": points["runs"].tolist(),
        "ci_low": intervals["runs"][0].tolist(),
        "ci_high": intervals["runs"][1].tolist(),
    }


def curve_band(curves: Sequence[np.ndarray], reps: int = 200, seed: int = 0) -> dict:
    """IQM and its interval at each evaluation point of several runs' curves.

    `curves` are `[points, 2]` arrays of (frames, return). Runs may evaluate at different
    frames: they are compared on every frame any of them evaluated at, within the span
    all of them cover (linear interpolation between a run's own points). Fewer
    resamples than `aggregate` by default: rliable's bootstrap is a Python loop per
    resample, and a plotted band needs no third digit."""
    curves = [np.asarray(c, dtype=np.float64) for c in curves if len(c)]
    if not curves:
        return {"frames": [], "iqm": [], "ci_low": [], "ci_high": []}
    grid = np.unique(np.concatenate([c[:, 0] for c in curves]))
    start, end = max(c[0, 0] for c in curves), min(c[-1, 0] for c in curves)
    grid = grid[(grid >= start) & (grid <= end)]
    values = np.stack([np.interp(grid, c[:, 0], c[:, 1]) for c in curves])  # [runs, points]
    iqm, low, high = [], [], []
    for point in values.T:
        a = aggregate(point, reps=reps, seed=seed)
        iqm.append(a["iqm"])
        low.append(a["iqm_ci"][0])
        high.append(a["iqm_ci"][1])
    return {"frames": grid.tolist(), "iqm": iqm, "ci_low": low, "ci_high": high}
