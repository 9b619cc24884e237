"""Dense text encoders (embedders) for dense retrieval.

``load_encoder(cfg)`` picks the backend from the registry: an ONNX directory
(``model.onnx`` + ``tokenizer.json``) runs with onnxruntime + tokenizers; anything else
with sentence-transformers (bundled directory or any hub name).
"""

from __future__ import annotations

from ..config import EmbedderConfig
from ..registry import resolve
from ..stages import Encoder


def load_encoder(cfg: EmbedderConfig) -> Encoder:
    """Build the encoder named by ``cfg.name`` (no weights are loaded until first use)."""
    model = resolve(cfg.name)
    if model.format == "onnx":
        from .onnx import OnnxEncoder

        return OnnxEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                           passage_prefix=cfg.passage_prefix)
    from .sentence_transformers import SentenceTransformerEncoder

    return SentenceTransformerEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                                      passage_prefix=cfg.passage_prefix)


__all__ = ["load_encoder"]
