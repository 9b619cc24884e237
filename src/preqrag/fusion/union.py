"""Union merge of sparse and dense candidates (PreQRAG §2.3, as the authors' code does)."""

from __future__ import annotations

from ..records import Ranking


class UnionFusion:
    """Concatenate the rankings in order (sparse first, then dense), keeping the first
    occurrence of each passage.

    PreQRAG reranks the merged set, so the order only matters when no reranker runs or the
    rerank depth is smaller than the union. Scores of the result are ``1 / (rank + 1)``
    (the input scores of BM25 and cosine similarity are not comparable).
    """

    name = "union"

    def fuse(self, rankings: list[Ranking]) -> Ranking:
        seen: set[str] = set()
        ids: list[str] = []
        for r in rankings:
            for pid in r.ids:
                if pid not in seen:
                    seen.add(pid)
                    ids.append(pid)
        return Ranking(ids=ids, scores=[1.0 / (i + 1) for i in range(len(ids))])
