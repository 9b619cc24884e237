"""CIR's components, registered in :mod:`preqrag.components.registry`: rerank step ``mmr`` (§2.1) and
generator ``cir`` (§2.2)."""

from __future__ import annotations

from ...components.registry import Context, register
from .generator import CIRGenerator
from .mmr import MMRStep, load_mmr_step


@register("generator", "cir")
def build_generator(ctx: Context) -> CIRGenerator:
    """Expertise-adapted prompt, cited JSON answer (CIR §2.2, Table 2; ``[cir]``); with
    ``[generator] context_tokens`` the segments are their answer-bearing sentences, chosen by the
    pipeline's shared cross-encoder unless ``sentence_scorer = "words"``."""
    g, scorer = ctx.cfg.generator, None
    if g.context_tokens and g.sentence_scorer != "words":
        from ...models.rerankers import shared_reranker

        scorer = shared_reranker(ctx)
    return CIRGenerator(ctx.get_llm(), g, ctx.cfg.cir, sentence_scorer=scorer)


@register("rerank", "mmr")
def build_mmr_step(ctx: Context) -> MMRStep:
    """MMR diversification of the ranking's head (CIR §2.1, Eq. 1; ``[mmr]``)."""
    return load_mmr_step(ctx.cfg, ctx.index)
