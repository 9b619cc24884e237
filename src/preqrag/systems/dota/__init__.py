"""DoTA-RAG (Ruangtanusak et al., "DoTA-RAG: Dynamic of Thought Aggregation RAG", SIGIR 2025
LiveRAG, arXiv 2506.12571) as components of the preqrag pipeline (preset ``dota``).

Stage (paper)                              component (configuration name)
-----------------------------------------  ---------------------------------------------------
1 query rewriting (§2.1, Fig. 3)           rewriter ``dota`` (:mod:`.planning`)
2 namespace routing, k=4 votes (§2.2, F.4)  rewriter ``dota``: ``SubQuery.filters = {"namespace": parts}``
  namespaces = WebOrganizer topics (App. C)  :mod:`.topics` (``<index>/topics.npz``), split into parts
3 dense k=100 in the namespaces (§2.3.1)   the dense retriever with filters (FAISS IDSelectorBitmap);
                                           the preset adds BM25 with the same filter (a deviation)
  BM25 pruning to 20 (§2.3.2)              rerank step ``bm25-prune`` (:mod:`.prune`)
  rerank to 10 (§2.3.3)                    rerank step ``cross-encoder`` (``cross_encoder.depth = 20``)
4 context aggregation, 8k tokens (§2.4)    generator ``dota`` (:mod:`.generation`)
5 generation, Fig. 5, 300 words (§2.5)     generator ``dota``

Deviations and their reasons: docs/preset-dota.md.
"""

from __future__ import annotations

import threading

import numpy as np

from ...components.registry import Context, register
from ...core.records import QueryPlan, Routing
from ...core.contracts import ROWS
from .planning import DotaRewriter, NamespaceRouter, count_votes, parse_boxed, parse_route_reply, tally_votes
from .prune import BM25PruneStep
from .topics import PART_FACET, TOPIC_NAMES, TOPICS, choose_parts, load_topics, part_scores

__all__ = ["DotaRewriter", "NamespaceRouter", "BM25PruneStep", "RoutedDotaRewriter", "count_votes", "parse_boxed",
           "TOPICS", "load_topics", "build_rewriter", "build_prune_step", "build_generator"]


class RoutedDotaRewriter(DotaRewriter):
    """:class:`DotaRewriter` over an index: the votes of §2.2, then the parts of the topic
    namespaces the dense search (and BM25, with ``retrieval.use_sparse``) covers.

    Before its first plan it makes the index's topic assignment current (:func:`load_topics`:
    read, or made and written atomically to ``<index>/topics.npz``); the index reads its ``topic``
    and ``namespace`` facets from that file when a filter names them (:mod:`preqrag.retrieval.facets`),
    so the rewriter changes nothing the index's other users share. For each question it scores every part (:func:`preqrag.systems.dota.topics.part_scores`:
    the rewrite's similarity to the part's centroid, its BM25 top ``route_bm25_depth``
    passages, and ``route_vote_weight`` × the share of the votes that named the part's topic)
    and searches the best parts within ``route_budget`` of the passages
    (:func:`~preqrag.systems.dota.topics.choose_parts`); the plan's filter is ``{"namespace": parts}``
    and ``QueryPlan.routing`` records the votes, the parts and the share searched. A question
    without a valid vote is routed by the other two signals (fallback ``route: no valid vote``).
    Deviations from the paper (parts, budget, BM25 evidence): docs/preset-dota.md.
    """

    def __init__(self, llm, cfg, index, **kw):
        super().__init__(llm, cfg, **kw)
        self.index = index
        self._lock = threading.Lock()
        self.topics = None
        self._part_sizes = None  # share of the passages in each part, computed once with the facets

    def ensure_topics(self) -> None:
        """Load (or make and write) the index's topic assignment with ``route_parts`` parts per
        topic, once: the file the index's ``topic`` and ``namespace`` facets are read from."""
        with self._lock:
            if self.topics is None:
                self.topics = load_topics(self.index, parts_per_topic=self.cfg.route_parts)
                self._part_sizes = self.topics.part_sizes()

    def plan(self, questions, types):
        plans = super().plan(questions, types)
        return self.route_plans(plans) if self.route else plans

    def route_plans(self, plans: list[QueryPlan]) -> list[QueryPlan]:
        """Set each plan's filter to the parts it searches and its ``routing`` record, from its
        rewrite (``sub_queries[0].dense``) and the votes in its ``llm_outputs`` (none: routed
        by similarity and BM25 alone). Returns ``plans``, changed in place."""
        if not plans:
            return plans
        self.ensure_topics()
        a = self.topics
        texts = [p.sub_queries[0].dense for p in plans]
        vectors = np.asarray(self.index.encoder.encode(texts, is_query=True), dtype=np.float32)
        bm25_parts: list[list[int]] = [[] for _ in texts]
        if self.cfg.route_bm25_depth and self.index.sparse is not None:
            for i, r in enumerate(self.index.sparse.search(texts, self.cfg.route_bm25_depth)):
                bm25_parts[i] = [int(a.parts[self.index.passages.row(pid)]) for pid in r.ids]
        votes = [self._vote_shares(p) for p in plans]
        scores = part_scores(a, vectors, votes, bm25_parts, self.cfg.route_vote_weight)
        for p, s, share in zip(plans, scores, votes):
            ids = choose_parts(s, self._part_sizes, self.cfg.route_budget)
            chosen = [a.part_names[j] for j in ids]
            sub = p.sub_queries[0]
            p.sub_queries[0] = sub.model_copy(update={"filters": {PART_FACET: chosen}})
            p.fallbacks = [f.replace("(all namespaces searched)", "(parts chosen without votes)") for f in p.fallbacks]
            p.routing = Routing(voted=sorted(share, key=lambda n: -share[n]), namespaces=chosen,
                                fraction=round(min(1.0, float(self._part_sizes[ids].sum())), 6))
        return plans

    def _vote_shares(self, plan) -> dict[str, float]:
        """Topic name → share of the plan's valid votes that named it (read back from the raw
        replies in ``llm_outputs``, parsed as the router parsed them)."""
        valid = [names for key, reply in plan.llm_outputs.items() if key.startswith("route ")
                 for names, _ in [parse_route_reply(reply, TOPIC_NAMES)] if names]
        return {name: n / len(valid) for name, n in tally_votes(valid).items()}


@register("rewriter", "dota")
def build_rewriter(ctx: Context) -> DotaRewriter:
    """Builder of rewriter ``dota``: typo fix + namespace routing (DoTA-RAG §2.1-2.2, ``[dota]``).

    Raises:
        ValueError: routing is on (``dota.route``) but the pipeline cannot apply it: no dense
            index or dense retrieval off. With ``retrieval.use_sparse = true`` (not the paper's
            dense-only first stage, §2.3) the same filter restricts BM25 too: a routed hybrid.
    """
    cfg = ctx.cfg
    if cfg.dota.route:
        if ROWS not in ctx.index.capabilities:
            raise ValueError("dota.route assigns a topic to every passage of the index: it needs an embedded index "
                             "([index] backend = \"embedded\"); or set dota.route = false")
        if ctx.index.dense is None or not cfg.retrieval.use_dense:
            raise ValueError("dota.route needs dense retrieval (a dense index and retrieval.use_dense = true); "
                             "or set dota.route = false")
        if cfg.dota.route_bm25_depth and ctx.index.sparse is None:
            raise ValueError("dota.route_bm25_depth uses the index's BM25 index, which this index lacks; "
                             "set dota.route_bm25_depth = 0")
        return RoutedDotaRewriter(ctx.get_llm(), cfg.dota, ctx.index, route=True,
                                  max_length_ratio=cfg.rewriter.max_length_ratio)
    return DotaRewriter(ctx.get_llm(), cfg.dota, route=False, max_length_ratio=cfg.rewriter.max_length_ratio)


@register("rerank", "bm25-prune")
def build_prune_step(ctx: Context) -> BM25PruneStep:
    """Builder of rerank step ``bm25-prune``: BM25 pruning to ``dota.prune_keep`` (DoTA-RAG §2.3)."""
    if ROWS not in ctx.index.capabilities:
        raise ValueError("rerank step bm25-prune scores candidates with the embedded bm25s index; it is not "
                         "available with [index] backend = \"milvus\"")
    return BM25PruneStep(ctx.index.sparse, ctx.cfg.dota.prune_keep)


@register("generator", "dota")
def build_generator(ctx: Context):
    """Builder of generator ``dota``: aggregation (§2.4) of the passages, or of their answer-bearing
    sentences with ``[generator] context_tokens`` (chosen by the pipeline's shared cross-encoder
    unless ``sentence_scorer = "words"``), Fig. 5 prompt (DoTA-RAG §2.4-2.5)."""
    from .generation import DotaGenerator

    g, scorer = ctx.cfg.generator, None
    if g.context_tokens and g.sentence_scorer != "words":
        from ...models.rerankers import shared_reranker

        scorer = shared_reranker(ctx)
    return DotaGenerator(ctx.get_llm(), g, ctx.cfg.dota, sentence_scorer=scorer)
