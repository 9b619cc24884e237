"""Reciprocal rank fusion, computed by ranx."""

from __future__ import annotations

from ...core.records import Ranking


class RRFFusion:
    """RRF: ``score(d) = sum_r 1 / (k + rank_r(d))`` (Cormack, Clarke & Büttcher, SIGIR 2009).

    Used by GINGER (UiS-IAI@LiveRAG) to fuse BM25 and dense results. ``k = 60`` is the
    paper's constant. Computed with ``ranx.fuse(method="rrf")``; ties keep ranx's order.
    """

    name = "rrf"

    def __init__(self, k: int = 60):
        self.k = k

    def fuse(self, rankings: list[Ranking]) -> Ranking:
        rankings = [r for r in rankings if len(r)]
        if not rankings:
            return Ranking()
        if len(rankings) == 1:
            only = rankings[0]
            return Ranking(ids=list(only.ids), scores=[1.0 / (self.k + i + 1) for i in range(len(only))])
        from ranx import Run, fuse

        runs = [Run({"q": {pid: float(len(r) - i) for i, pid in enumerate(r.ids)}}) for r in rankings]
        fused = fuse(runs=runs, method="rrf", params={"k": self.k}).to_dict()["q"]
        ordered = sorted(fused.items(), key=lambda kv: -kv[1])
        return Ranking(ids=[p for p, _ in ordered], scores=[float(s) for _, s in ordered])
