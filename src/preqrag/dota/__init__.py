"""DoTA-RAG (Ruangtanusak et al., "DoTA-RAG: Dynamic of Thought Aggregation RAG", SIGIR 2025
LiveRAG, arXiv 2506.12571) as components of the preqrag pipeline (preset ``dota``).

Stage (paper)                              component (configuration name)
-----------------------------------------  ---------------------------------------------------
1 query rewriting (§2.1, Fig. 3)           rewriter ``dota`` (:mod:`.planning`)
2 namespace routing, k=4 votes (§2.2, F.4)  rewriter ``dota``: ``SubQuery.filters = {"topic": top-2}``
  namespaces = WebOrganizer topics (App. C)  :mod:`.topics` (``<index>/topics.npz``)
3 dense k=100 in the namespaces (§2.3.1)   the dense retriever with filters (FAISS IDSelectorBitmap)
  BM25 pruning to 20 (§2.3.2)              rerank step ``bm25-prune`` (:mod:`.prune`)
  rerank to 10 (§2.3.3)                    rerank step ``cross-encoder`` (``reranker.depth = 20``)
4 context aggregation, 8k tokens (§2.4)    generator ``dota`` (:mod:`.generation`)
5 generation, Fig. 5, 300 words (§2.5)     generator ``dota``

Deviations and their reasons: docs/presets.md, section ``dota``.
"""

from __future__ import annotations

import threading

from ..components import Context, register
from ..stages import ROWS
from .planning import DotaRewriter, NamespaceRouter, count_votes, parse_boxed
from .prune import BM25PruneStep
from .topics import FACET, TOPICS, load_topics

__all__ = ["DotaRewriter", "NamespaceRouter", "BM25PruneStep", "RoutedDotaRewriter", "count_votes", "parse_boxed",
           "TOPICS", "load_topics", "build_rewriter", "build_prune_step", "build_generator"]


class RoutedDotaRewriter(DotaRewriter):
    """:class:`DotaRewriter` that, before its first plan, registers the index's topic
    assignment (:func:`load_topics`: read, or made and written, lazily) as the dense
    retriever's ``topic`` facet, so that the plan's filters can be applied."""

    def __init__(self, llm, cfg, index, **kw):
        super().__init__(llm, cfg, **kw)
        self.index = index
        self._lock = threading.Lock()

    def ensure_facet(self) -> None:
        """Register the ``topic`` facet on the index's retrievers (once; BM25 and dense share
        their facets)."""
        dense = self.index.dense
        with self._lock:
            if FACET not in dense.facets:
                a = load_topics(self.index)
                dense.add_facet(FACET, a.names, a.labels)

    def plan(self, questions, types):
        if self.route:
            self.ensure_facet()
        return super().plan(questions, types)


@register("rewriter", "dota", reads=("dota", "rewriter", "retrieval", "llm"))
def build_rewriter(ctx: Context) -> DotaRewriter:
    """Builder of rewriter ``dota``: typo fix + namespace routing (DoTA-RAG §2.1-2.2, ``[dota]``).

    Raises:
        ValueError: routing is on (``dota.route``) but the pipeline cannot apply it: no dense
            index, dense retrieval off, or BM25 retrieval on (the filters restrict dense
            retrieval only, DoTA-RAG's first stage, §2.3; set ``retrieval.use_sparse = false``).
    """
    cfg = ctx.cfg
    if cfg.dota.route:
        if ROWS not in ctx.index.capabilities:
            raise ValueError("dota.route assigns a topic to every passage of the index: it needs an embedded index "
                             "([index] backend = \"embedded\"); or set dota.route = false")
        if ctx.index.dense is None or not cfg.retrieval.use_dense:
            raise ValueError("dota.route needs dense retrieval (a dense index and retrieval.use_dense = true); "
                             "or set dota.route = false")
        if cfg.retrieval.use_sparse:
            raise ValueError("dota.route restricts dense retrieval only (DoTA-RAG §2.3: dense first stage); "
                             "set retrieval.use_sparse = false, or dota.route = false")
        return RoutedDotaRewriter(ctx.get_llm(), cfg.dota, ctx.index, route=True,
                                  max_length_ratio=cfg.rewriter.max_length_ratio)
    return DotaRewriter(ctx.get_llm(), cfg.dota, route=False, max_length_ratio=cfg.rewriter.max_length_ratio)


@register("rerank", "bm25-prune", reads=("dota",))
def build_prune_step(ctx: Context) -> BM25PruneStep:
    """Builder of rerank step ``bm25-prune``: BM25 pruning to ``dota.prune_keep`` (DoTA-RAG §2.3)."""
    if ROWS not in ctx.index.capabilities:
        raise ValueError("rerank step bm25-prune scores candidates with the embedded bm25s index; it is not "
                         "available with [index] backend = \"milvus\"")
    return BM25PruneStep(ctx.index.sparse, ctx.cfg.dota.prune_keep)


@register("generator", "dota", reads=("generator", "dota", "llm"))
def build_generator(ctx: Context):
    """Builder of generator ``dota``: 8k-token aggregation, Fig. 5 prompt (DoTA-RAG §2.4-2.5)."""
    from .generation import DotaGenerator

    return DotaGenerator(ctx.get_llm(), ctx.cfg.generator, ctx.cfg.dota)
