"""Builders of the GINGER components from the shared :class:`preqrag.components.Context`
(registered in :mod:`preqrag.components`: rewriter ``ginger``, rerank step ``pairwise``,
generator ``ginger``)."""

from __future__ import annotations

from .generator import GingerGenerator
from .pairwise import PairScorer, PairwiseStep, load_pair_scorer
from .rewriting import GingerRewriter

_SCORER_ATTR = "_ginger_pair_scorer"


def shared_pair_scorer(ctx) -> PairScorer:
    """The pair scorer of ``[ginger] pairwise_model``, built once per Context and shared by the
    pairwise rerank step and the generator's cluster ranking (one model in memory). The offline
    ``cross-encoder`` scorer uses the ``[reranker]`` cross-encoder (its score cache included)."""
    scorer = getattr(ctx, _SCORER_ATTR, None)
    if scorer is None:
        reranker = None
        if ctx.cfg.ginger.pairwise_model == "cross-encoder":
            from ..rerankers import load_reranker

            reranker = load_reranker(ctx.cfg.reranker, ctx.cfg.run.cache_dir)
        scorer = load_pair_scorer(ctx.cfg.ginger.pairwise_model, reranker, ctx.cfg.ginger.pairwise_batch_size)
        setattr(ctx, _SCORER_ATTR, scorer)
    return scorer


def build_rewriter(ctx) -> GingerRewriter:
    return GingerRewriter(ctx.llm, ctx.cfg.ginger, ctx.cfg.rewriter)


def build_pairwise_step(ctx) -> PairwiseStep:
    return PairwiseStep(shared_pair_scorer(ctx), ctx.cfg.ginger.pairwise_top_k)


def build_generator(ctx) -> GingerGenerator:
    encoder = getattr(ctx.index, "encoder", None)
    return GingerGenerator(ctx.llm, ctx.cfg.ginger, ctx.cfg.generator, encoder, lambda: shared_pair_scorer(ctx))
