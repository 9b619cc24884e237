"""Cross-encoder score caches: on disk across runs (:class:`CachedReranker`), in memory within a
run (:class:`RecentScores`)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np

from ...core.cache import KVStore, content_key
from ...core.contracts import Reranker


class CachedReranker:
    """Wraps a :class:`~preqrag.core.contracts.Reranker`; scores are stored by content.

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
        self.reranker.warm_up()

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


RECENT_PAIRS = 4096
"""Pairs :class:`RecentScores` keeps: a batch of 32 questions' cross-encoder depth (30) is 960
pairs, so a batch's scores are all still there when a later step of the same batch asks again."""


class RecentScores:
    """Wraps a :class:`~preqrag.core.contracts.Reranker`; keeps the scores of the last ``size`` distinct
    (question, passage) pairs in memory, so a later step that scores the same pair again (GINGER's
    pairwise step and cluster ranking re-derive the cross-encoder scores of the head the rerank
    step has just scored) reads them instead of running the model. Misses go to the wrapped
    reranker in one call (its batching applies); the output is ``float32`` of shape
    ``(len(pairs),)``, identical to the wrapped reranker's.

    Args:
        reranker: the cross-encoder (or a :class:`CachedReranker`).
        size: pairs kept (least recently used dropped first); :data:`RECENT_PAIRS` by default.
    """

    def __init__(self, reranker: Reranker, size: int = RECENT_PAIRS):
        self.reranker = reranker
        self.name = reranker.name
        self.max_length = getattr(reranker, "max_length", None)
        self.size = size
        self._recent: OrderedDict[tuple[str, str], float] = OrderedDict()

    def warm_up(self) -> None:
        """Load the wrapped model now."""
        self.reranker.warm_up()

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float32)
        todo: dict[tuple[str, str], list[int]] = {}
        for i, pair in enumerate(pairs):
            pair = (pair[0], pair[1])
            hit = self._recent.get(pair)
            if hit is None:
                todo.setdefault(pair, []).append(i)
            else:
                self._recent.move_to_end(pair)
                out[i] = hit
        if todo:
            fresh = np.asarray(self.reranker.score(list(todo)), dtype=np.float32)
            for (pair, where), s in zip(todo.items(), fresh):
                out[where] = s
                self._recent[pair] = float(s)
            while len(self._recent) > self.size:
                self._recent.popitem(last=False)
        return out
