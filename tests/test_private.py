"""gpurl.core.private: each wrapped private call and its public fallback give the same
tensors, so a torch release without the private call is slower, never wrong."""

import pytest
import torch

from gpurl.core import private


def pairs():
    g = torch.Generator().manual_seed(0)
    targets = [torch.randn(3, generator=g), torch.randn((), generator=g)]
    sources = [torch.randn(3, generator=g), torch.randn((), generator=g)]
    return targets, sources


@pytest.mark.parametrize(
    "name, expected",
    [("foreach_copy_", lambda t, s: s), ("foreach_add_", lambda t, s: t + s)],
)
def test_foreach_pairs_match_their_fallback(monkeypatch, name, expected):
    targets, sources = pairs()
    want = [expected(t, s) for t, s in zip(targets, sources, strict=True)]
    getattr(private, name)(targets, sources)
    assert all(torch.equal(t, w) for t, w in zip(targets, want, strict=True))
    # the same call with torch's private op gone takes the pair-by-pair path
    monkeypatch.delattr(torch, f"_{name}")
    targets, sources = pairs()
    getattr(private, name)(targets, sources)
    assert all(torch.equal(t, w) for t, w in zip(targets, want, strict=True))


def test_foreach_lerp_matches_its_fallback(monkeypatch):
    targets, sources = pairs()
    want = [t + 0.25 * (s - t) for t, s in zip(targets, sources, strict=True)]
    private.foreach_lerp_(targets, sources, 0.25)
    torch.testing.assert_close(targets, want)
    monkeypatch.delattr(torch, "_foreach_lerp_")
    targets, sources = pairs()
    private.foreach_lerp_(targets, sources, 0.25)
    torch.testing.assert_close(targets, want)


def test_per_run_adam_matches_its_fallback(monkeypatch):
    """Three runs' stacked tensors, each run with its own rate and step count: the
    foreach path and the tensor-by-tensor fallback give the same update."""

    def state():
        g = torch.Generator().manual_seed(1)
        shapes = [(3, 4, 2), (3, 4)]
        params = [torch.randn(s, generator=g) for s in shapes]
        grads = [torch.randn(s, generator=g) for s in shapes]
        m = [torch.randn(s, generator=g) * 0.1 for s in shapes]
        v = [torch.rand(s, generator=g) * 0.1 for s in shapes]
        steps = [torch.tensor([1.0, 5.0, 2.0]) for _ in shapes]
        return params, grads, m, v, steps

    lr = torch.tensor([1e-2, 1e-3, 3e-4])
    want = state()
    private.per_run_adam_(*want, lr, 0.9, 0.999, 1e-8)
    monkeypatch.delattr(torch, "_foreach_lerp_")
    got = state()
    private.per_run_adam_(*got, lr, 0.9, 0.999, 1e-8)
    for a, b in zip(want, got, strict=True):
        torch.testing.assert_close(a, b)
    assert got[4][0].tolist() == [2.0, 6.0, 3.0]
