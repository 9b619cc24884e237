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

    Filters (metadata facets, e.g. DoTA-RAG's topic namespaces, §2.2): :meth:`add_facet`
    registers a label per passage row; ``search(..., filters=...)`` then restricts each query
    to the rows whose labels are allowed, with a FAISS ``IDSelectorBitmap`` (exact search
    over those rows only: distances are computed for them alone).
    """

    name = "dense"

    def __init__(self, faiss_path: str | Path, passage_ids: list[str], encoder: Encoder, batch_size: int = 32):
        self.faiss_path = Path(faiss_path)
        self.passage_ids = passage_ids
        self.encoder = encoder
        self.batch_size = batch_size
        self._index = None
        self.facets: dict[str, tuple[list[str], np.ndarray]] = {}

    def add_facet(self, name: str, values: list[str], labels: np.ndarray) -> None:
        """Register facet ``name``: passage row ``i`` has value ``values[labels[i]]``.

        Raises:
            ValueError: ``labels`` is not one label per passage row.
        """
        labels = np.asarray(labels)
        if labels.shape != (len(self.passage_ids),):
            raise ValueError(f"facet {name!r}: {labels.shape[0] if labels.ndim else 0} labels for "
                             f"{len(self.passage_ids)} passages")
        self.facets[name] = (list(values), labels)

    def filter_mask(self, filters: dict[str, list[str]]) -> np.ndarray | None:
        """Boolean mask over passage rows allowed by ``filters`` (facet → allowed values: any
        value of a facet, every facet), or None for no filter (``{}``).

        Raises:
            ValueError: an unregistered facet or an unknown value.
        """
        mask = None
        for facet, allowed in filters.items():
            if facet not in self.facets:
                raise ValueError(f"dense retrieval: no facet {facet!r} registered (known: {sorted(self.facets)})")
            values, labels = self.facets[facet]
            unknown = [v for v in allowed if v not in values]
            if unknown:
                raise ValueError(f"dense retrieval: unknown {facet} value(s) {unknown}")
            m = np.isin(labels, [values.index(v) for v in allowed])
            mask = m if mask is None else mask & m
        return mask

    def _load(self):
        if self._index is None:
            import faiss

            self._index = faiss.read_index(str(self.faiss_path))
        return self._index

    def search_vectors(self, vectors: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[Ranking]:
        """Search with precomputed query embeddings, float32 ``(n, dim)``; ``mask`` (bool per
        passage row) restricts the search to those rows (FAISS ``IDSelectorBitmap``)."""
        index = self._load()
        params = None
        if mask is None:
            k = min(k, index.ntotal)
        else:
            import faiss

            k = min(k, int(mask.sum()))
            if k == 0:
                return [Ranking() for _ in range(len(vectors))]
            bitmap = np.packbits(mask.astype(bool), bitorder="little")  # must outlive the search
            params = faiss.SearchParameters(sel=faiss.IDSelectorBitmap(bitmap))
        scores, rows = index.search(np.ascontiguousarray(vectors, dtype=np.float32), k, params=params)
        return [Ranking(ids=[self.passage_ids[i] for i in r if i >= 0],
                        scores=[float(s) for s, i in zip(sc, r) if i >= 0])
                for sc, r in zip(scores, rows)]

    def search(self, queries: list[str], k: int, filters: list[dict[str, list[str]]] | None = None) -> list[Ranking]:
        """Top-``k`` passages per query; ``filters[i]`` (optional, facet → allowed values, ``{}``
        for none) restricts query ``i`` (see :meth:`filter_mask`). Queries with the same filter
        are searched together."""
        if not queries:
            return []
        vectors = self.encoder.encode(queries, is_query=True, batch_size=self.batch_size)
        if not filters or not any(filters):
            return self.search_vectors(vectors, k)
        groups: dict[str, list[int]] = {}
        for i, f in enumerate(filters):
            groups.setdefault(repr(sorted((name, sorted(v)) for name, v in f.items())), []).append(i)
        out: list[Ranking] = [Ranking()] * len(queries)
        for members in groups.values():
            found = self.search_vectors(vectors[members], k, self.filter_mask(filters[members[0]]))
            for i, r in zip(members, found):
                out[i] = r
        return out
