"""Fusion (components/fusion): reciprocal rank fusion by its formula, and its tie order."""

import pytest

from preqrag.components.fusion import RRFFusion
from preqrag.core.records import Ranking


def _r(*ids):
    return Ranking(ids=list(ids), scores=[float(len(ids) - i) for i in range(len(ids))])


def test_rrf_sums_reciprocal_ranks_and_breaks_ties_by_first_appearance():
    fused = RRFFusion(k=60).fuse([_r("a", "b", "c"), _r("d", "c", "a"), _r()])
    assert fused.scores == pytest.approx(sorted(fused.scores, reverse=True))
    expected = {"a": 1 / 61 + 1 / 63, "b": 1 / 62, "c": 1 / 63 + 1 / 62, "d": 1 / 61}
    assert dict(zip(fused.ids, fused.scores)) == pytest.approx(expected)
    # a: ranks 1 and 3; c: ranks 3 and 2; d: rank 1 of one list; b: rank 2 of one
    assert fused.ids == ["a", "c", "d", "b"]
    # exact ties keep the order of first appearance, list by list: "x" (list 1) before "y" (list 2)
    tie = RRFFusion(k=10).fuse([_r("x", "p"), _r("y", "p")])
    assert tie.ids == ["p", "x", "y"] and tie.scores[1] == tie.scores[2]
    assert RRFFusion(k=10).fuse([_r("y", "p"), _r("x", "p")]).ids == ["p", "y", "x"]
    one = RRFFusion(k=60).fuse([_r("a", "b")])
    assert one.ids == ["a", "b"] and one.scores == pytest.approx([1 / 61, 1 / 62])
    assert RRFFusion().fuse([]).ids == [] and RRFFusion().fuse([_r()]).ids == []
