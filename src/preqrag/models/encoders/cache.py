"""Query-embedding cache: repeated queries (re-runs, ablation rows) skip the embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...core.cache import KVStore, content_key
from ...core.contracts import Encoder


class CachedEncoder:
    """Wraps an :class:`~preqrag.core.contracts.Encoder`; query embeddings are stored by content.

    Key: (encoder name, ``"query"``, text) — the encoder's own query prefix is part of its
    configuration and is applied inside the wrapped encoder, so it is also part of the
    key via ``query_prefix``. An encoder with a ``cache_name`` (the ONNX int8 export of a
    sentence-transformers model: name + backend) is keyed by that instead of its name, so vectors
    cached by the torch backend of the same model are not served as the int8 backend's. Passage
    encoding (``is_query=False``, done once per index build) passes straight through. Values are
    the ``float32`` vector bytes; the output is identical to the wrapped encoder's, shape
    ``(len(texts), dim)``.
    """

    def __init__(self, encoder: Encoder, cache_dir: str | Path):
        self.encoder = encoder
        self.name = encoder.name
        self.store = KVStore(cache_dir, "query_embeddings")

    def warm_up(self) -> None:
        """Load the wrapped model now."""
        self.encoder.warm_up()

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def learned_models(self) -> tuple[dict[str, str], ...]:
        """The wrapped encoder's."""
        return self.encoder.learned_models

    @property
    def max_seq_length(self) -> int:
        return self.encoder.max_seq_length

    @property
    def tokenizer(self):
        return self.encoder.tokenizer  # type: ignore[attr-defined]

    def count_tokens(self, text: str) -> int:
        return self.encoder.count_tokens(text)

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        if not is_query:
            return self.encoder.encode(texts, is_query=False, batch_size=batch_size, show_progress=show_progress)
        prefix = getattr(self.encoder, "query_prefix", "")
        keys = [content_key(getattr(self.encoder, "cache_name", self.name), "query", prefix, t) for t in texts]
        rows = [None if v is None else np.frombuffer(v, dtype=np.float32) for v in self.store.get_many(keys)]
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            fresh = self.encoder.encode([texts[i] for i in todo], is_query=True, batch_size=batch_size)
            self.store.put_many([(keys[i], fresh[j].astype(np.float32).tobytes()) for j, i in enumerate(todo)])
            for j, i in enumerate(todo):
                rows[i] = fresh[j]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack(rows).astype(np.float32, copy=False)
