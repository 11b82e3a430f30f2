"""Prioritized sampling (gpurl.trainers.priority): distribution, updates, weights, no syncs."""

import math

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.trainers.priority import (
    CumsumSampler,
    SumTreeSampler,
    importance_weights,
    make_priority_sampler,
)
from gpurl.utils.host_reads import count_host_reads

KINDS = ["sumtree", "cumsum"]
# Capacity 10 pads the tree to 16 leaves; entries 7..9 are never written (priority 0).
PRIORITY = torch.tensor([1.0, 2.0, 0.0, 4.0, 0.5, 0.0, 2.5])  # sum 10


def filled(kind, capacity=10, priority=PRIORITY):
    sampler = make_priority_sampler(kind, capacity, "cpu")
    sampler.update(torch.arange(len(priority)), priority)
    return sampler


def frequencies(sampler, draws=199_400, batch=997, seed=0):
    """Counts per entry over draws // batch stratified batches. A batch of 997 puts the
    entries' boundaries inside strata (width total / 997), so the counts vary from call
    to call; with 1000 strata and these round priorities they would be exact."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(sampler.capacity)
    for _ in range(draws // batch):
        index, _ = sampler.sample(batch, generator=g)
        counts += torch.bincount(index, minlength=sampler.capacity)
    return counts


def assert_frequencies_match(counts, priority):
    """Pearson's chi-square over the entries with mass, and no draw of the others."""
    draws = counts.sum()
    p = torch.zeros_like(counts)
    p[: len(priority)] = priority / priority.sum()
    assert counts[p == 0].sum() == 0
    expected = draws * p[p > 0]
    chi2 = ((counts[p > 0] - expected) ** 2 / expected).sum()
    # 4 or 5 degrees of freedom here (5 or 6 entries with mass); P(chi2 > 25) < 2e-4
    # for independent draws. Stratified draws vary less, so a correct sampler sits far
    # below (~0.01 here); an entry of share 0.1 drawn 5% too often alone adds ~50.
    assert chi2 < 25, (chi2, counts)


@pytest.mark.parametrize("kind", KINDS)
def test_frequencies_match_priorities_and_zeros_are_never_drawn(kind):
    assert_frequencies_match(frequencies(filled(kind)), PRIORITY)


@pytest.mark.parametrize("kind", KINDS)
def test_probability_is_priority_over_total(kind):
    sampler = filled(kind)
    torch.testing.assert_close(sampler.total(), torch.tensor(10.0, dtype=torch.float64))
    index, probability = sampler.sample(64, generator=torch.Generator().manual_seed(1))
    assert probability.dtype == torch.float32
    torch.testing.assert_close(probability, PRIORITY[index] / 10)


@pytest.mark.parametrize("kind", KINDS)
def test_update_changes_the_distribution(kind):
    sampler = filled(kind)
    # Entry 3 drops from 4 to 0, entry 2 rises from 0 to 4, and entry 8 (never written
    # before) gets 1: the new priorities are [1, 2, 4, 0, .5, 0, 2.5, 0, 1, 0], sum 11.
    sampler.update(torch.tensor([3, 2, 8]), torch.tensor([0.0, 4.0, 1.0]))
    new = torch.tensor([1.0, 2.0, 4.0, 0.0, 0.5, 0.0, 2.5, 0.0, 1.0])
    torch.testing.assert_close(sampler.total(), torch.tensor(11.0, dtype=torch.float64))
    assert_frequencies_match(frequencies(sampler), new)


@pytest.mark.parametrize("kind", KINDS)
def test_duplicate_indices_in_one_update_last_write_wins(kind):
    sampler = filled(kind)
    # Entry 0 is written three times (9, 0, 3), entry 6 twice (7, 1): the last of each
    # wins, so the priorities become [3, 2, 0, 4, .5, 0, 1], total 10.5.
    index, priority = torch.tensor([0, 6, 0, 6, 0]), torch.tensor([9.0, 7.0, 0.0, 1.0, 3.0])
    # A CPU scatter happens to keep the last write anyway; on CUDA the order is
    # unspecified, so every duplicate position must carry the winning value.
    assert sampler._last_write(index, priority).tolist() == [3.0, 1.0, 3.0, 1.0, 3.0]
    sampler.update(index, priority)
    torch.testing.assert_close(sampler.total(), torch.tensor(10.5, dtype=torch.float64))
    index, probability = sampler.sample(256, generator=torch.Generator().manual_seed(2))
    expected = torch.tensor([3.0, 2.0, 0.0, 4.0, 0.5, 0.0, 1.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(probability, expected[index] / 10.5)


@pytest.mark.parametrize("kind", KINDS)
def test_top_of_the_range_stays_in_bounds(kind):
    # Capacity 5 (tree padded to 8 leaves); only entry 4, the last, has mass, and its
    # priority is tiny against nothing else: every draw, including the top stratum, must
    # return 4, never 5..7 (padding) nor an empty entry.
    sampler = make_priority_sampler(kind, 5, "cpu")
    sampler.update(torch.tensor([4]), torch.tensor([1e-30]))
    index, probability = sampler.sample(1000, generator=torch.Generator().manual_seed(3))
    assert torch.equal(index, torch.full((1000,), 4))
    torch.testing.assert_close(probability, torch.ones(1000))


@pytest.mark.parametrize("kind", KINDS)
def test_points_at_the_fp_edges_never_reach_empty_entries(kind, monkeypatch):
    # Priorities spanning 2^-60..2^4 with zeros between them (and 3 unwritten entries at
    # the end, 16 tree leaves for 13 entries), so sums round. The drawn points are forced
    # onto every prefix sum, the floats either side of it, and the largest float below
    # the total: each must land on an entry with mass, inside the capacity.
    g = torch.Generator().manual_seed(6)
    for _ in range(50):
        scale = 2.0 ** torch.randint(-60, 5, (10,), generator=g)
        priority = torch.rand(10, generator=g, dtype=torch.float64) * scale
        priority[torch.randperm(10, generator=g)[:4]] = 0
        sampler = filled(kind, 13, priority)
        total = sampler.total()
        edges = torch.cumsum(priority, 0)
        below_total = torch.nextafter(total, torch.zeros_like(total))
        points = torch.cat(
            [
                edges,
                torch.nextafter(edges, torch.zeros_like(edges)),
                torch.nextafter(edges, torch.full_like(edges, math.inf)),
                below_total.reshape(1),
            ]
        ).clamp(0, below_total)
        monkeypatch.setattr(
            sampler, "_targets", lambda batch, total, generator, points=points: points
        )
        index, probability = sampler.sample(len(points))
        assert (index < 10).all() and (priority[index] > 0).all(), (priority, points)
        assert (probability > 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_top_stratum_rounding_up_to_the_total_is_clamped(kind, monkeypatch):
    # (B-1 + U) / B * total can round up to the total itself; force U to the largest
    # float below 1: the points are ~3.33, ~6.67 and (2 + U) / 3 * 10, which rounds to
    # 10. Prefix sums are 1, 3, 3, 7, 7.5, 7.5, 10: the first two fall in entry 3 (mass
    # [3, 7)); the top one must return entry 6, the last with mass, not an empty 7..9.
    sampler = filled(kind)
    almost_one = torch.nextafter(torch.tensor(1.0, dtype=torch.float64), torch.tensor(2.0))
    rand = lambda n, dtype, device, generator: torch.full((n,), almost_one, dtype=dtype)  # noqa: E731
    monkeypatch.setattr(torch, "rand", rand)
    index, _ = sampler.sample(3)
    assert index.tolist() == [3, 3, 6]


def test_sumtree_and_cumsum_agree():
    # Same priorities (a random half of 1000 entries zero) and the same random stream:
    # the stratified points are the same, so both must return the same entries.
    g = torch.Generator().manual_seed(4)
    priority = torch.rand(1000, generator=g) * (torch.rand(1000, generator=g) < 0.5)
    tree, scan = filled("sumtree", 1000, priority), filled("cumsum", 1000, priority)

    def agree():
        for seed in range(5):
            a = tree.sample(4096, generator=torch.Generator().manual_seed(seed))
            b = scan.sample(4096, generator=torch.Generator().manual_seed(seed))
            assert torch.equal(a[0], b[0])
            torch.testing.assert_close(a[1], b[1])
            assert scan.priority[a[0]].min() > 0

    agree()
    # Then 20 learner-style updates of 64 random entries (with duplicates, some set to
    # zero): the samplers still agree, and every inner node of the tree is still the sum
    # of its two children.
    for _ in range(20):
        index = torch.randint(1000, (64,), generator=g)
        new = torch.rand(64, generator=g) * (torch.rand(64, generator=g) < 0.8)
        tree.update(index, new)
        scan.update(index, new)
    agree()
    torch.testing.assert_close(tree.tree[1 : tree.leaves], tree.pairs[1:].sum(1), rtol=0, atol=0)
    assert torch.equal(tree.tree[tree.leaves : tree.leaves + 1000], scan.priority)


def test_importance_weights_hand_computed():
    # size 4, beta .5: (4p)^-.5 for p = [.5, .25, .125, .125] is [2^-.5, 1, 2^.5, 2^.5];
    # divided by the max 2^.5: [.5, 2^-.5, 1, 1].
    probability = torch.tensor([0.5, 0.25, 0.125, 0.125])
    expected = torch.tensor([0.5, 2**-0.5, 1.0, 1.0])
    torch.testing.assert_close(importance_weights(probability, 4, 0.5), expected)
    # size and beta as device tensors (a filled-count and a schedule output).
    weights = importance_weights(probability, torch.tensor(4), torch.tensor(0.5))
    torch.testing.assert_close(weights, expected)
    # beta 0: no correction; beta 1: weights p_min / p.
    torch.testing.assert_close(importance_weights(probability, 4, 0.0), torch.ones(4))
    torch.testing.assert_close(
        importance_weights(probability, 4, 1.0), torch.tensor([0.25, 0.5, 1.0, 1.0])
    )


@pytest.mark.parametrize("kind", KINDS)
def test_update_and_sample_make_no_host_reads(kind):
    sampler = filled(kind, 1000)
    g = torch.Generator().manual_seed(5)
    index, new = torch.randint(1000, (64,)), torch.rand(64)
    beta = torch.tensor(0.4)
    with count_host_reads() as reads:
        for _ in range(3):
            sampler.update(index, new)
            index, probability = sampler.sample(64, generator=g)
            importance_weights(probability, 1000, beta)
            sampler.total()
    assert reads.count == 0, reads.report()


def test_make_priority_sampler():
    assert isinstance(make_priority_sampler("sumtree", 3, "cpu"), SumTreeSampler)
    assert isinstance(make_priority_sampler("cumsum", 3, "cpu"), CumsumSampler)
    with pytest.raises(ConfigError, match="sumtree"):
        make_priority_sampler("segment", 3, "cpu")


def test_auto_sampler_kind_follows_the_measurements():
    from gpurl.trainers.priority import CPU_SUMTREE_FROM, auto_sampler_kind

    assert auto_sampler_kind(100_000, "cpu") == "cumsum"
    assert auto_sampler_kind(CPU_SUMTREE_FROM, "cpu") == "sumtree"
    assert auto_sampler_kind(10_000_000, "cuda") == "cumsum"
