"""Cross-encoder score cache: a (question, passage) pair is scored once across runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..cache import KVStore, content_key
from ..stages import Reranker


class CachedReranker:
    """Wraps a :class:`~preqrag.stages.Reranker`; scores are stored by content.

    Key: (reranker name, ``max_length``, question, passage text). Only cache misses are
    sent to the wrapped reranker, in one call, so its length-sorted batching still
    applies. Returns ``float32`` of shape ``(len(pairs),)``, identical to the wrapped
    reranker's output.
    """

    def __init__(self, reranker: Reranker, cache_dir: str | Path):
        self.reranker = reranker
        self.name = reranker.name
        self.max_length = getattr(reranker, "max_length", None)
        self.store = KVStore(cache_dir, "reranker_scores")

    def warm_up(self) -> None:
        """Load the wrapped model now."""
        fn = getattr(self.reranker, "warm_up", None)
        if fn is not None:
            fn()

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        keys = [content_key(self.name, self.max_length, q, p) for q, p in pairs]
        found = self.store.get_many(keys)
        todo = [i for i, v in enumerate(found) if v is None]
        out = np.array([0.0 if v is None else float(v) for v in found], dtype=np.float32)
        if todo:
            fresh = self.reranker.score([pairs[i] for i in todo])
            out[todo] = fresh
            self.store.put_many([(keys[i], float(s)) for i, s in zip(todo, fresh)])
        return out
