"""Merging the rankings of one query (one module per method, as in ranx), and the default merge
slot (round-robin interleaving of sub-queries' rankings).

Registered components: fusion ``union`` (PreQRAG §2.3) and ``rrf`` (Cormack et al., SIGIR 2009;
GINGER), merge ``interleave`` (PreQRAG §2.2.2).
"""

from __future__ import annotations

from ..registry import Context, register
from ...core.contracts import Fusion, Merger
from .interleave import InterleaveMerge, interleave, interleave_ids
from .rrf import RRFFusion
from .union import UnionFusion


@register("fusion", "union")
def _union(ctx: Context) -> Fusion:
    return UnionFusion()


@register("fusion", "rrf")
def _rrf(ctx: Context) -> Fusion:
    return RRFFusion(k=ctx.cfg.fusion.rrf_k)


@register("merge", "interleave")
def _interleave(ctx: Context) -> Merger:
    return InterleaveMerge()


__all__ = ["UnionFusion", "RRFFusion", "interleave", "interleave_ids", "InterleaveMerge"]
