"""Cross-encoder rerankers (one file per backend, one ``score(pairs)`` API)."""

from __future__ import annotations

from ..config import RerankerConfig
from ..registry import resolve
from ..stages import Reranker


def load_reranker(cfg: RerankerConfig) -> Reranker | None:
    """The configured cross-encoder, or ``None`` for ``name = "none"``.

    ONNX directories run with onnxruntime; other names with sentence-transformers'
    CrossEncoder (e.g. the paper's ``BAAI/bge-reranker-v2-m3``, needs internet).
    """
    if cfg.name.lower() == "none":
        return None
    model = resolve(cfg.name)
    if model.format == "onnx":
        from .onnx import OnnxCrossEncoder

        return OnnxCrossEncoder(model.location, cfg.name, cfg.max_length, cfg.batch_size)
    from .sentence_transformers import STCrossEncoder

    return STCrossEncoder(model.location, cfg.name, cfg.max_length, cfg.batch_size)


__all__ = ["load_reranker"]
