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
