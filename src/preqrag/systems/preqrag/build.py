"""PreQRAG's own component, registered in :mod:`preqrag.components.registry`: rewriter ``preqrag``
(§2.2; ``[rewriter]``)."""

from __future__ import annotations

from ...components.registry import Context, register
from .rewriting import PreQRAGRewriter


@register("rewriter", "preqrag")
def build_rewriter(ctx: Context) -> PreQRAGRewriter:
    """BM25- and dense-optimised rewrites of a single-document question, sub-questions of a
    multi-document one (PreQRAG §2.2)."""
    return PreQRAGRewriter(ctx.get_llm(), ctx.cfg.rewriter)
