"""Rerank-chain steps (:class:`preqrag.core.contracts.RerankStep`): each maps rankings to rankings.

``[rerank] chain`` names the steps in order (registered in slot ``rerank``, :mod:`preqrag.components.registry`).

* ``cross-encoder``: pointwise scores of (question, passage) for the head of each ranking
  (PreQRAG §2.4), trace key ``reranked``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .registry import Context, register
from ..core.records import Ranking, doc_of
from ..core.contracts import Reranker


class CrossEncoderStep:
    """Pointwise cross-encoder reranking of the ``depth`` head of each ranking.

    Each distinct (question, passage) pair of the batch is scored once, in one
    ``reranker.score`` call (length-sorted batches inside); the output holds only the
    reranked head, best first, with the cross-encoder's logits as scores.

    Args:
        reranker: the cross-encoder (:func:`preqrag.models.rerankers.load_reranker`).
        depth: candidates reranked per ranking (``cross_encoder.depth``, default 30: a measured
            trade-off, docs/models.md; the paper reranks the whole merged set).
        max_per_document: at most this many passages of one document among the ``depth``
            candidates (``cross_encoder.max_per_document``; None: no cap): a document's further
            passages are skipped and the head reaches further down the ranking.
    """

    name = "cross-encoder"
    stage = "rerank"
    trace_key = "reranked"

    def __init__(self, reranker: Reranker, depth: int, max_per_document: int | None = None):
        self.reranker = reranker
        self.depth = depth
        self.max_per_document = max_per_document

    def head(self, ids: list[str]) -> list[str]:
        """The candidates of one ranking: its first ``depth`` ids, at most ``max_per_document``
        of one document, in ranking order."""
        if self.max_per_document is None:
            return ids[:self.depth]
        out: list[str] = []
        per_doc: dict[str, int] = {}
        for pid in ids:
            d = doc_of(pid)
            if per_doc.get(d, 0) < self.max_per_document:
                per_doc[d] = per_doc.get(d, 0) + 1
                out.append(pid)
                if len(out) == self.depth:
                    break
        return out

    def warm_up(self) -> None:
        self.reranker.warm_up()

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]:
        pair_index: dict[tuple[str, str], int] = {}
        pairs: list[tuple[str, str]] = []
        heads = [self.head(r.ids) for r in rankings]
        for q, head in zip(queries, heads):
            for pid in head:
                if (q, pid) not in pair_index:
                    pair_index[(q, pid)] = len(pairs)
                    pairs.append((q, text_of(pid)))
        scores = self.reranker.score(pairs) if pairs else np.zeros(0, dtype=np.float32)
        out = []
        for q, head in zip(queries, heads):
            s = [float(scores[pair_index[(q, pid)]]) for pid in head]
            order = sorted(range(len(head)), key=lambda i: -s[i])
            out.append(Ranking(ids=[head[i] for i in order], scores=[s[i] for i in order]))
        return out


@register("rerank", "cross-encoder")
def _cross_encoder(ctx: Context) -> CrossEncoderStep | None:
    """The ``[cross_encoder]`` cross-encoder (one model per Context pool) cut at ``cross_encoder.depth``;
    ``None`` (step off) when ``cross_encoder.name = 'none'``."""
    from ..models.rerankers import shared_reranker

    reranker = shared_reranker(ctx)
    cfg = ctx.cfg.cross_encoder
    return None if reranker is None else CrossEncoderStep(reranker, cfg.depth, cfg.max_per_document)
