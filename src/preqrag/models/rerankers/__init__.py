"""Cross-encoder rerankers (one file per backend, one ``score(pairs)`` API)."""

from __future__ import annotations

from ...core.config import CrossEncoderConfig
from ..files import resolve
from ...core.contracts import Reranker


ONNX_BATCH_SIZE = 1
"""``[cross_encoder] batch_size`` unset, ONNX cross-encoder: each pair alone on every thread
(:class:`~.onnx.OnnxCrossEncoder`; measured faster than padded batches on 2 cores,
docs/results/rerank_speed.md)."""

TORCH_BATCH_SIZE = 16
"""``[cross_encoder] batch_size`` unset, sentence-transformers cross-encoder (torch, CPU or GPU)."""


def load_reranker(cfg: CrossEncoderConfig, cache_dir: str | None = None) -> Reranker | None:
    """The configured cross-encoder, or ``None`` for ``name = "none"``.

    ONNX directories run with onnxruntime; other names with sentence-transformers'
    CrossEncoder (e.g. the paper's ``BAAI/bge-reranker-v2-m3``, needs internet).
    With ``cache_dir``, scores are cached by content (:class:`CachedReranker`).
    """
    if cfg.name.lower() == "none":
        return None
    model = resolve(cfg.name)
    reranker: Reranker
    if model.format == "onnx":
        from .onnx import OnnxCrossEncoder

        reranker = OnnxCrossEncoder(model.location, cfg.name, cfg.max_length, cfg.batch_size or ONNX_BATCH_SIZE)
    else:
        from .sentence_transformers import STCrossEncoder

        reranker = STCrossEncoder(model.location, cfg.name, cfg.max_length, cfg.batch_size or TORCH_BATCH_SIZE)
    if cache_dir:
        from .cache import CachedReranker

        reranker = CachedReranker(reranker, cache_dir)
    return reranker


__all__ = ["load_reranker"]


def shared_reranker(ctx):
    """The ``[cross_encoder]`` cross-encoder of a :class:`~preqrag.components.registry.Context`, one per model
    pool (:meth:`~preqrag.components.registry.Context.shared`): the rerank chain's step and GINGER's pair
    scorer use the same model; ``None`` when ``cross_encoder.name = 'none'``. The last
    :data:`~.cache.RECENT_PAIRS` pairs' scores are kept in memory (:class:`~.cache.RecentScores`),
    so a pair that two steps score (GINGER's pairwise step re-derives the head the rerank step
    has just scored) costs one model call."""
    from .cache import RecentScores

    r = ctx.cfg.cross_encoder

    def make():
        reranker = load_reranker(r, ctx.cfg.run.cache_dir)
        return None if reranker is None else RecentScores(reranker)

    return ctx.shared(("cross-encoder", r.name, r.max_length, r.batch_size, ctx.cfg.run.cache_dir), make)
