"""Union merge of sparse and dense candidates (PreQRAG §2.3)."""

from __future__ import annotations

from ...core.records import Ranking
from .interleave import interleave


class UnionFusion:
    """The union of the rankings, in round-robin order (sparse 1, dense 1, sparse 2, ...),
    keeping the first occurrence of each passage.

    PreQRAG merges the BM25 and dense candidates and reranks the whole merged set, so with
    an unbounded rerank depth the order is irrelevant. With a bounded depth (the default,
    ``cross_encoder.depth``) it is not: the authors' code concatenates sparse then dense, and a
    depth-30 head of that list holds BM25 candidates only. Interleaving gives both
    retrievers an equal share of any head. Scores of the result are ``1 / (rank + 1)``
    (BM25 and cosine scores are not comparable).
    """

    name = "union"

    def fuse(self, rankings: list[Ranking]) -> Ranking:
        """Merge ``rankings`` (any number, each best first) into one de-duplicated Ranking."""
        return interleave(rankings)
