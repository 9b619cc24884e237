"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009)."""

from __future__ import annotations

from ...core.records import Ranking


class RRFFusion:
    """RRF: ``score(d) = sum_r 1 / (k + rank_r(d))`` over the rankings ``r`` that hold ``d``
    (1-based ranks; Cormack, Clarke & Büttcher, SIGIR 2009, Eq. 1).

    Used by GINGER (UiS-IAI@LiveRAG §3.1) to fuse BM25 and dense results. ``k = 60`` is the
    paper's constant. Ties (common: rank 3 of one list and rank 3 of another score alike) keep
    the order in which the passages first appear, reading the rankings in the order given, so
    the fused list is the same on every run.

    Computed here rather than with ``ranx.fuse(method="rrf")``, which ranked the same on
    scores: ranx compiles its numba kernels at the first call of every process (48 s measured
    on 2 zen4 cores in a fresh process with a benchmark running beside it, 8 ms a call after;
    more than all of a 48-question run's fusion), and its ties followed an unstable sort. ranx still computes the evaluation metrics
    (:mod:`preqrag.evaluation.retrieval`).
    """

    name = "rrf"

    def __init__(self, k: int = 60):
        self.k = k

    def fuse(self, rankings: list[Ranking]) -> Ranking:
        """One ranking per input list of the same query, best first; scores are the RRF sums
        (floats in ``(0, n / (k + 1)]`` for ``n`` lists). Empty lists are skipped; no list: an
        empty ranking."""
        scores: dict[str, float] = {}
        for r in rankings:
            for rank, pid in enumerate(r.ids, 1):
                scores[pid] = scores.get(pid, 0.0) + 1.0 / (self.k + rank)
        # the dict holds the passages in order of first appearance, and sorted() is stable
        ordered = sorted(scores, key=lambda pid: -scores[pid])
        return Ranking(ids=ordered, scores=[scores[pid] for pid in ordered])
