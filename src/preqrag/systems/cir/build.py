"""CIR's components, registered in :mod:`preqrag.components`: rerank step ``mmr`` (§2.1) and
generator ``cir`` (§2.2)."""

from __future__ import annotations

from ...components import Context, register
from .generator import CIRGenerator
from .mmr import MMRStep, load_mmr_step


@register("generator", "cir", reads=("generator", "cir", "llm"))
def build_generator(ctx: Context) -> CIRGenerator:
    """Expertise-adapted prompt, cited JSON answer (CIR §2.2, Table 2; ``[cir]``)."""
    return CIRGenerator(ctx.get_llm(), ctx.cfg.generator, ctx.cfg.cir)


@register("rerank", "mmr", reads=("mmr", "bm25", "embedder"))
def build_mmr_step(ctx: Context) -> MMRStep:
    """MMR diversification of the ranking's head (CIR §2.1, Eq. 1; ``[mmr]``)."""
    return load_mmr_step(ctx.cfg, ctx.index)
