"""Dense text encoders (embedders) for dense retrieval.

``load_encoder(cfg)`` picks the backend from the resolved model (:mod:`preqrag.models.files`) and
``[embedder] backend``: an ONNX directory (``model.onnx`` + ``tokenizer.json``) runs with
onnxruntime + tokenizers; a
sentence-transformers model runs either as its ONNX int8 export (:mod:`.onnx_export`; the default
for all-MiniLM-L6-v2 on a CPU, :data:`ONNX_BY_DEFAULT`) or with sentence-transformers on torch
(bundled directory or any hub name).
"""

from __future__ import annotations

from ...core.config import EmbedderConfig
from ..files import resolve
from .trained import encoder_identity
from ...core.contracts import Encoder

ONNX_BY_DEFAULT = frozenset({"sentence-transformers/all-MiniLM-L6-v2"})
"""Models that ``[embedder] backend = "auto"`` runs as an ONNX int8 export on a CPU: those measured
to keep their vectors (mean cosine >= 0.99 with torch float32; docs/results/encoder_speed.md)."""


def choose_backend(cfg: EmbedderConfig, model) -> str:
    """``"onnx"`` or ``"torch"`` for a sentence-transformers model ``model`` (a
    :class:`~preqrag.models.files.ResolvedModel`), from ``cfg.backend`` and ``cfg.device``.

    ``auto``: ``onnx`` for a :data:`ONNX_BY_DEFAULT` model when it will run on the CPU (``device``
    ``cpu``, or ``auto`` with no CUDA device: :func:`~.sentence_transformers.cuda_possible`, which
    does not import torch on a machine without an NVIDIA driver), else ``torch``.

    Raises:
        ValueError: ``backend = "onnx"`` with a CUDA device, or for a model that is not a local
            directory (a hub name: nothing to export from).
    """
    if cfg.backend == "torch":
        return "torch"
    if cfg.backend == "onnx":
        if cfg.device.startswith("cuda"):
            raise ValueError(f"[embedder] backend = 'onnx' runs on the CPU; device = {cfg.device!r} needs "
                             "backend = 'torch' (or 'auto')")
        if model.format != "sentence-transformers":
            raise ValueError(f"[embedder] backend = 'onnx': {cfg.name!r} is not a local sentence-transformers "
                             "model directory to export; use backend = 'torch' or 'auto'")
        return "onnx"
    if model.name not in ONNX_BY_DEFAULT or model.format != "sentence-transformers":
        return "torch"
    if cfg.device == "cpu":
        return "onnx"
    if cfg.device == "auto":
        from .sentence_transformers import cuda_possible

        return "torch" if cuda_possible() else "onnx"
    return "torch"


def onnx_export_encoder(cfg: EmbedderConfig, model, variant: str = "int8", *, per_text: bool = True,
                        threads: int | None = None):
    """An :class:`~.onnx.OnnxEncoder` over the ONNX export of the sentence-transformers model
    ``model``: mean or CLS pooling as the model's, its ``max_seq_length`` (256 for MiniLM), its
    tokenizer, each text run alone (``per_text``, the default; False: padded batches, as
    bench/encoder_speed.py compares). The export is made (or verified: sha256) on first use, not here.

    Raises:
        preqrag.models.encoders.onnx_export.OnnxExportError: the model's modules are not
            Transformer → Pooling(mean|CLS) [→ Normalize].
    """
    from .onnx import OnnxEncoder
    from .onnx_export import ensure_exported, read_source

    source = read_source(model.name, model.location)
    return OnnxEncoder(str(source.location), name=cfg.name, query_prefix=cfg.query_prefix,
                       passage_prefix=cfg.passage_prefix, pooling=source.pooling,
                       max_seq_length=source.max_seq_length, tokenizer_file=str(source.tokenizer_path),
                       model_loader=lambda: ensure_exported(source, variant).data, per_text=per_text,
                       backend=f"onnx-{variant}", dim=source.dim, threads=threads)


def load_encoder(cfg: EmbedderConfig, cache_dir: str | None = None) -> Encoder:
    """Build the encoder named by ``cfg.name`` (no weights are loaded until first use). A model
    directory written by ``preqrag train-encoder`` gives an encoder whose ``learned_models`` holds its
    identity (:func:`preqrag.models.encoders.trained.encoder_identity`).

    Args:
        cache_dir: when set, query embeddings are cached there (:class:`CachedEncoder`).

    Raises:
        ValueError: ``cfg.device`` names CUDA for an ONNX or WordLlama model (CPU-only backends), or
            ``cfg.backend`` does not fit the model (:func:`choose_backend`; ``torch`` for an ONNX
            model, ``onnx``/``torch`` for WordLlama).
        RuntimeError: ``cfg.device`` names CUDA and torch sees none (see ``resolve_device``).
    """
    model = resolve(cfg.name)
    encoder: Encoder
    if model.format in ("wordllama", "onnx") and cfg.device.startswith("cuda"):
        raise ValueError(f"[embedder] device = {cfg.device!r}: {cfg.name!r} is a {model.format} model, which runs on "
                         "the CPU only; use a sentence-transformers model for GPU encoding, or device = 'auto'")
    if (model.format == "wordllama" and cfg.backend != "auto") or (model.format == "onnx" and cfg.backend == "torch"):
        raise ValueError(f"[embedder] backend = {cfg.backend!r}: {cfg.name!r} is a {model.format} model, which has "
                         "one way to run; use backend = 'auto'")
    if model.format == "wordllama":
        from .wordllama import WordLlamaEncoder

        encoder = WordLlamaEncoder(model.location, name=cfg.name)
    elif model.format == "onnx":
        from .onnx import OnnxEncoder

        encoder = OnnxEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                              passage_prefix=cfg.passage_prefix)
    elif choose_backend(cfg, model) == "onnx":
        encoder = onnx_export_encoder(cfg, model)
    else:
        from .sentence_transformers import SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder(model.location, name=cfg.name, query_prefix=cfg.query_prefix,
                                             passage_prefix=cfg.passage_prefix, device=cfg.device)
    identity = encoder_identity(model.location)  # a model fine-tuned by preqrag train-encoder
    if identity is not None:
        encoder.learned_models = (identity,)
    if cache_dir:
        from .cache import CachedEncoder

        encoder = CachedEncoder(encoder, cache_dir)
    return encoder


__all__ = ["ONNX_BY_DEFAULT", "choose_backend", "load_encoder", "onnx_export_encoder"]
