"""Rerank-chain steps (:class:`preqrag.stages.RerankStep`): each maps rankings to rankings.

``[rerank] chain`` names the steps in order (registered in slot ``rerank``, :mod:`preqrag.components`).

* ``cross-encoder``: pointwise scores of (question, passage) for the head of each ranking
  (PreQRAG §2.4), trace key ``reranked``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..components import Context, register
from ..records import Ranking
from ..stages import Reranker


class CrossEncoderStep:
    """Pointwise cross-encoder reranking of the ``depth`` head of each ranking.

    Each distinct (question, passage) pair of the batch is scored once, in one
    ``reranker.score`` call (length-sorted batches inside); the output holds only the
    reranked head, best first, with the cross-encoder's logits as scores.

    Args:
        reranker: the cross-encoder (:func:`preqrag.rerankers.load_reranker`).
        depth: candidates reranked per ranking (``reranker.depth``, default 30: a measured
            trade-off, docs/models.md; the paper reranks the whole merged set).
    """

    name = "cross-encoder"
    stage = "rerank"
    trace_key = "reranked"

    def __init__(self, reranker: Reranker, depth: int):
        self.reranker = reranker
        self.depth = depth

    def warm_up(self) -> None:
        fn = getattr(self.reranker, "warm_up", None)
        if fn is not None:
            fn()

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]:
        pair_index: dict[tuple[str, str], int] = {}
        pairs: list[tuple[str, str]] = []
        for q, r in zip(queries, rankings):
            for pid in r.ids[:self.depth]:
                if (q, pid) not in pair_index:
                    pair_index[(q, pid)] = len(pairs)
                    pairs.append((q, text_of(pid)))
        scores = self.reranker.score(pairs) if pairs else np.zeros(0, dtype=np.float32)
        out = []
        for q, r in zip(queries, rankings):
            head = r.ids[:self.depth]
            s = [float(scores[pair_index[(q, pid)]]) for pid in head]
            order = sorted(range(len(head)), key=lambda i: -s[i])
            out.append(Ranking(ids=[head[i] for i in order], scores=[s[i] for i in order]))
        return out


@register("rerank", "cross-encoder", reads=("reranker",))
def _cross_encoder(ctx: Context) -> CrossEncoderStep | None:
    """The ``[reranker]`` cross-encoder (one model per Context pool) cut at ``reranker.depth``;
    ``None`` (step off) when ``reranker.name = 'none'``."""
    from . import shared_reranker

    reranker = shared_reranker(ctx)
    return None if reranker is None else CrossEncoderStep(reranker, ctx.cfg.reranker.depth)
