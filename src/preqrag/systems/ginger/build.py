"""The GINGER components (Łajewska et al., SIGIR 2025 LiveRAG, arXiv 2506.22210), registered
in :mod:`preqrag.components.registry`: rewriter ``ginger`` (§3.1), rerank step ``pairwise`` (§3.1),
generator ``ginger`` (§3.2-3.3)."""

from __future__ import annotations

from collections.abc import Callable

from ...components.registry import Context, register
from ...core.config import ConfigError
from ...models.rerankers import pooled_reranker
from .generator import GingerGenerator
from .pairwise import PairScorer, PairwiseStep, load_pair_scorer
from .rewriting import GingerRewriter


def shared_pair_scorer(ctx: Context) -> PairScorer:
    """The pair scorer of ``[ginger] pairwise_model``, one per Context model pool, shared by the
    pairwise rerank step and the generator's cluster ranking. The offline ``cross-encoder``
    scorer uses the ``[cross_encoder]`` cross-encoder of the pool: the rerank chain's model (and
    its score cache), not a second copy."""
    return pooled_pair_scorer(ctx)()


def pooled_pair_scorer(ctx: Context) -> Callable[[], PairScorer]:
    """:func:`shared_pair_scorer` in two steps: the settings are read now (a builder reads every
    setting while it builds, :func:`preqrag.components.registry.build`), the scorer is made, or
    found in the pool, when the returned function is called (the generator: on first use)."""
    g = ctx.cfg.ginger
    reranker = pooled_reranker(ctx) if g.pairwise_model == "cross-encoder" else None

    def make() -> PairScorer:
        return load_pair_scorer(g.pairwise_model, reranker() if reranker is not None else None, g.pairwise_batch_size)

    r = ctx.cfg.cross_encoder
    key = ("ginger-pair-scorer", g.pairwise_model, g.pairwise_batch_size,
           (r.name, r.max_length, r.batch_size, ctx.cfg.run.cache_dir) if g.pairwise_model == "cross-encoder" else None)
    return lambda: ctx.shared(key, make)


@register("rewriter", "ginger")
def build_rewriter(ctx: Context) -> GingerRewriter:
    """Original + n rewrites (GINGER §3.1, App. B.1; ``[ginger]``)."""
    return GingerRewriter(ctx.get_llm(), ctx.cfg.ginger, ctx.cfg.rewriter)


@register("rerank", "pairwise")
def build_pairwise_step(ctx: Context) -> PairwiseStep:
    """duoT5-style pairwise reranking of the ``ginger.pairwise_top_k`` head, sym-sum (GINGER §3.1)."""
    return PairwiseStep(shared_pair_scorer(ctx), ctx.cfg.ginger.pairwise_top_k)


@register("generator", "ginger")
def build_generator(ctx: Context) -> GingerGenerator:
    """Nuggets, clusters, cluster summaries, fluency pass (GINGER §3.2-3.3, App. B.2-B.3)."""
    encoder = ctx.index.encoder
    if ctx.cfg.ginger.nugget_detector == "cross-encoder" and ctx.cfg.cross_encoder.name == "none":
        raise ConfigError("[ginger] nugget_detector = 'cross-encoder' needs a cross-encoder: [cross_encoder] name is "
                          "'none' (set nugget_detector = 'llm')")
    return GingerGenerator(ctx.get_llm(), ctx.cfg.ginger, ctx.cfg.generator, encoder, pooled_pair_scorer(ctx),
                           pooled_reranker(ctx))
