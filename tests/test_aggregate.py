"""gpurl.utils.aggregate against values worked out by hand on small tables, and
against rliable (the `stats` extra), whose estimators it implements."""

import numpy as np
import pytest

from gpurl.utils.aggregate import aggregate, curve_band, performance_profile


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 runs: the lowest two and highest two are cut, mean(3, 4, 5, 6) = 4.5
    assert aggregate(np.arange(1.0, 9.0), reps=10)["iqm"] == pytest.approx(4.5)
    # an outlying seed moves the mean but not the IQM
    scores = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 800.0]
    a = aggregate(scores, reps=10)
    assert a["iqm"] == pytest.approx(4.5)
    assert a["mean"] == pytest.approx(828.0 / 8)


def test_iqm_over_tasks_trims_all_scores_together():
    # [runs=4, tasks=2]: 8 scores 1..8 in all, so again mean(3, 4, 5, 6)
    table = np.array([[1.0, 8.0], [2.0, 7.0], [3.0, 6.0], [4.0, 5.0]])
    a = aggregate(table, reps=10)
    assert a["iqm"] == pytest.approx(4.5) and a["runs"] == 4


def test_bootstrap_interval_of_the_mean_by_hand():
    # runs [0, 0, 0, 1]: a resample's mean is k/4 with k ~ Binomial(4, 1/4).
    # P(k = 0) = 0.316 > 2.5%, so the 2.5th percentile is 0; P(k >= 3) = 0.051 > 2.5% and
    # P(k = 4) = 0.004 < 2.5%, so the 97.5th percentile is 3/4.
    a = aggregate([0.0, 0.0, 0.0, 1.0], reps=2000)
    assert a["mean"] == pytest.approx(0.25)
    assert a["mean_ci"] == [pytest.approx(0.0), pytest.approx(0.75)]


def test_interval_contains_the_estimate_and_collapses_without_spread():
    a = aggregate(np.random.default_rng(0).normal(10.0, 2.0, size=16), reps=500)
    assert a["iqm_ci"][0] <= a["iqm"] <= a["iqm_ci"][1]
    assert a["mean_ci"][0] <= a["mean"] <= a["mean_ci"][1]
    flat = aggregate([3.0] * 5, reps=100)
    assert flat["iqm_ci"] == [3.0, 3.0] and flat["mean_ci"] == [3.0, 3.0]


def test_same_seed_same_interval_other_seed_other_interval():
    scores = np.random.default_rng(1).normal(size=12)
    assert aggregate(scores, reps=200, seed=3) == aggregate(scores, reps=200, seed=3)
    assert aggregate(scores, reps=200, seed=3) != aggregate(scores, reps=200, seed=4)


def test_performance_profile_counts_runs_above_each_threshold():
    p = performance_profile([1.0, 2.0, 3.0, 4.0], taus=[0.0, 2.5, 4.0], reps=500)
    assert p["tau"] == [0.0, 2.5, 4.0]
    assert p["fraction"] == pytest.approx([1.0, 0.5, 0.0])
    # nobody can exceed the best score in any resample, everybody exceeds 0 in every one
    assert p["ci_low"][0] == p["ci_high"][0] == 1.0
    assert p["ci_low"][2] == p["ci_high"][2] == 0.0
    assert p["ci_low"][1] <= 0.5 <= p["ci_high"][1]


def test_curve_band_interpolates_onto_the_shared_span():
    a = np.array([[0.0, 0.0], [10.0, 10.0], [20.0, 20.0]])
    b = np.array([[0.0, 0.0], [20.0, 20.0]])  # evaluated less often: interpolated at 10
    band = curve_band([a, b, a, b], reps=100)
    assert band["frames"] == [0.0, 10.0, 20.0]
    assert band["iqm"] == pytest.approx([0.0, 10.0, 20.0])
    bounds = zip(band["ci_low"], band["iqm"], band["ci_high"], strict=True)
    assert all(lo <= m <= hi for lo, m, hi in bounds)


def test_bad_tables():
    with pytest.raises(ValueError, match="runs, tasks"):
        aggregate(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="runs, tasks"):
        aggregate([])


def test_estimates_and_intervals_match_rliables():
    """The same points as rliable's; intervals from another random stream, so they
    agree to the bootstrap's own noise (a few hundredths of the scores' spread)."""
    pytest.importorskip("rliable")  # the stats extra
    from rliable import library, metrics

    rng = np.random.default_rng(5)
    table = np.concatenate([rng.normal(0, 1, (12, 3)), rng.normal(4, 3, (4, 3))])
    ours = aggregate(table, reps=4000)
    state = np.random.get_state()
    np.random.seed(0)
    points, cis = library.get_interval_estimates(
        {"x": table},
        lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)]),
        reps=4000,
    )
    np.random.set_state(state)
    assert ours["iqm"] == pytest.approx(points["x"][0])
    assert ours["mean"] == pytest.approx(points["x"][1])
    spread = table.std()
    for k, name in enumerate(("iqm_ci", "mean_ci")):
        assert ours[name] == pytest.approx(cis["x"][:, k].tolist(), abs=0.05 * spread)
    taus = [-1.0, 0.0, 2.0, 5.0]
    ours = performance_profile(table, taus, reps=4000)
    np.random.seed(0)
    points, cis = library.get_interval_estimates(
        {"x": table}, lambda x: np.array([(x > t).mean() for t in taus]), reps=4000
    )
    np.random.set_state(state)
    assert ours["fraction"] == pytest.approx(points["x"].tolist())
    assert ours["ci_low"] == pytest.approx(cis["x"][0].tolist(), abs=0.05)
    assert ours["ci_high"] == pytest.approx(cis["x"][1].tolist(), abs=0.05)


def test_the_callers_numpy_stream_is_left_alone():
    np.random.seed(7)
    expected = np.random.rand()
    np.random.seed(7)
    aggregate([1.0, 2.0, 3.0], reps=50)
    assert np.random.rand() == expected
