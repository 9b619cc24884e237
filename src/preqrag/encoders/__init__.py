"""Dense text encoders (embedders) for dense retrieval.

``load_encoder(cfg)`` picks the backend from the registry: an ONNX directory
(``model.onnx`` + ``tokenizer.json``) runs with onnxruntime + tokenizers; anything else
with sentence-transformers (bundled directory or any hub name).
"""

from __future__ import annotations

from ..config import EmbedderConfig
from ..registry import resolve
from ..stages import Encoder


def load_encoder(cfg: EmbedderConfig, cache_dir: str | None = None) -> Encoder:
    """Build the encoder named by ``cfg.name`` (no weights are loaded until first use).

    Args:
        cache_dir: when set, query embeddings are cached there (:class:`CachedEncoder`).

    Raises:
        ValueError: ``cfg.device`` names CUDA for an ONNX or WordLlama model (CPU-only backends).
        RuntimeError: ``cfg.device`` names CUDA and torch sees none (see ``resolve_device``).
    """
    model = resolve(cfg.name)
    encoder: Encoder
    if model.format in ("wordllama", "onnx") and cfg.device.startswith("cuda"):
        raise ValueError(f"[embedder] device = {cfg.device!r}: {cfg.name!r} is a {model.format} model, which runs on "
                         "the CPU only; use a sentence-transformers model for GPU encoding, or device = 'auto'")
    if model.format == "wordllama":
        from .wordllama import WordLlamaEncoder

        encoder = WordLlamaEncoder(model.location, name=cfg.name)
    elif model.format == "onnx":
        from .onnx import OnnxEncoder

        encoder = OnnxEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                              passage_prefix=cfg.passage_prefix)
    else:
        from .sentence_transformers import SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                                             passage_prefix=cfg.passage_prefix, device=cfg.device)
    if cache_dir:
        from .cache import CachedEncoder

        encoder = CachedEncoder(encoder, cache_dir)
    return encoder


__all__ = ["load_encoder"]
