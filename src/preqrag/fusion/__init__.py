"""Merging the rankings of one query (one module per method, as in ranx)."""

from __future__ import annotations

from ..config import FusionConfig
from ..stages import Fusion
from .interleave import interleave, interleave_ids
from .rrf import RRFFusion
from .union import UnionFusion


def load_fusion(cfg: FusionConfig) -> Fusion:
    """``union`` (PreQRAG authors' merge) or ``rrf`` (reciprocal rank fusion)."""
    if cfg.name == "rrf":
        return RRFFusion(k=cfg.rrf_k)
    return UnionFusion()


__all__ = ["load_fusion", "UnionFusion", "RRFFusion", "interleave", "interleave_ids"]
