"""Dense retrieval: embedder + FAISS exact inner-product search (``IndexFlatIP``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..records import Ranking
from ..stages import Encoder


def build_faiss(embeddings: np.ndarray, path: str | Path) -> None:
    """Write an exact inner-product index of ``embeddings`` (float32, shape (n, dim)).

    With unit-norm embeddings inner product equals cosine similarity.
    """
    import faiss

    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
    faiss.write_index(index, str(path))


class DenseRetriever:
    """Exact dense retrieval (PreQRAG §2.3 dense index; the paper used e5-base-v2).

    Args:
        faiss_path: the index file (``<index>/dense.faiss``), row ``i`` = passage ``i``.
        passage_ids: passage id of row ``i``.
        encoder: the embedder the index was built with (checked by Index).
        batch_size: query encoding batch size.
    """

    name = "dense"

    def __init__(self, faiss_path: str | Path, passage_ids: list[str], encoder: Encoder, batch_size: int = 32):
        self.faiss_path = Path(faiss_path)
        self.passage_ids = passage_ids
        self.encoder = encoder
        self.batch_size = batch_size
        self._index = None

    def _load(self):
        if self._index is None:
            import faiss

            self._index = faiss.read_index(str(self.faiss_path))
        return self._index

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        """Search with precomputed query embeddings, float32 ``(n, dim)``."""
        index = self._load()
        k = min(k, index.ntotal)
        scores, rows = index.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        return [Ranking(ids=[self.passage_ids[i] for i in r if i >= 0],
                        scores=[float(s) for s, i in zip(sc, r) if i >= 0])
                for sc, r in zip(scores, rows)]

    def search(self, queries: list[str], k: int) -> list[Ranking]:
        if not queries:
            return []
        vectors = self.encoder.encode(queries, is_query=True, batch_size=self.batch_size)
        return self.search_vectors(vectors, k)
