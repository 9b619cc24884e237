"""Index backends behind one entry point: ``[index] backend`` chooses the embedded index
(bm25s + FAISS files, :class:`preqrag.index.embedded.Index`) or a Milvus collection
(:class:`preqrag.index.milvus.MilvusIndex`, same interface). Both hold ``passages``, ``text(id)``,
``sparse`` and ``dense`` retrievers (:class:`preqrag.core.contracts.Retriever`), ``encoder`` and
``manifest``; only the embedded index walks passages row by row (``passage_ids``; needed by
DoTA-RAG's topic facets and BM25 pruning) and filters by facets."""

from __future__ import annotations

from pathlib import Path

from ..core.config import PipelineConfig
from .embedded import Index, IndexOpenError


def open_index(index_dir: str | Path | None, cfg: PipelineConfig):
    """Open the index ``cfg`` names: ``index_dir`` (embedded backend) or the Milvus collection
    of ``[index] uri`` / ``collection`` (``index_dir`` not read).

    Raises:
        IndexOpenError: not an index, built with other settings, or no ``index_dir`` for the
            embedded backend.
        MilvusError: the collection cannot be opened.
    """
    if cfg.index.backend == "milvus":
        from .milvus import MilvusIndex

        return MilvusIndex.open(cfg)
    if index_dir is None:
        raise IndexOpenError('--index is required (the index directory), unless [index] backend = "milvus"')
    return Index.open(index_dir, cfg)
