"""Cross-encoder rerankers (one file per backend, one ``score(pairs)`` API)."""

from __future__ import annotations

from collections.abc import Callable

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


__all__ = ["load_reranker", "pooled_reranker", "shared_reranker"]


def shared_reranker(ctx):
    """The ``[cross_encoder]`` cross-encoder of a :class:`~preqrag.components.registry.Context`, one per model
    pool (:meth:`~preqrag.components.registry.Context.shared`): the rerank chain's step and GINGER's pair
    scorer use the same model; ``None`` when ``cross_encoder.name = 'none'``. The last
    :data:`~.cache.RECENT_PAIRS` pairs' scores are kept in memory (:class:`~.cache.RecentScores`),
    so a pair that two steps score (GINGER's pairwise step re-derives the head the rerank step
    has just scored) costs one model call."""
    return pooled_reranker(ctx)()


def pooled_reranker(ctx) -> Callable[[], Reranker | None]:
    """:func:`shared_reranker` in two steps: its settings (``[cross_encoder]``, ``[run] cache_dir``)
    are read now, as a builder reads every setting while it builds
    (:func:`preqrag.components.registry.build`), and the model is made, or found in the pool,
    when the returned function is called (GINGER's generator: on first use)."""
    from .cache import RecentScores

    r, cache_dir = ctx.cfg.cross_encoder, ctx.cfg.run.cache_dir

    def make():
        reranker = load_reranker(r, cache_dir)
        return None if reranker is None else RecentScores(reranker)

    key = ("cross-encoder", r.name, r.max_length, r.batch_size, cache_dir)
    return lambda: ctx.shared(key, make)
