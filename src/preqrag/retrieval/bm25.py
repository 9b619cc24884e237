"""Sparse retrieval with bm25s (Lù, 2024), Lucene-style BM25 scoring."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import BM25Config
from ..records import Ranking


def _stemmer(cfg: BM25Config):
    if not cfg.stemmer:
        return None
    import Stemmer

    return Stemmer.Stemmer(cfg.stemmer)


def tokenize(texts: list[str], cfg: BM25Config, return_ids: bool = True):
    """bm25s tokenisation with ``cfg.stopwords`` and the PyStemmer ``cfg.stemmer``."""
    import bm25s

    return bm25s.tokenize(texts, stopwords=cfg.stopwords, stemmer=_stemmer(cfg),
                          return_ids=return_ids, show_progress=False)


def build_bm25(texts: list[str], cfg: BM25Config, out_dir: str | Path) -> None:
    """Index passage texts (row ``i`` = passage ``i``) and save the index to ``out_dir``."""
    import bm25s

    retriever = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    retriever.index(tokenize(texts, cfg), show_progress=False)
    retriever.save(str(out_dir), show_progress=False)


class BM25Retriever:
    """BM25 over the passages of an index (PreQRAG §2.3 sparse retrieval).

    Args:
        index_dir: a bm25s index directory (``<index>/bm25``).
        passage_ids: passage id of row ``i``.
        cfg: tokenisation settings; must match those used at build time (checked by Index).
        mmap: load the score matrix memory-mapped (bm25s ``mmap=True``): pages are read on
            demand and shared between processes (``[index] mmap``; default False here, True
            through :class:`~preqrag.index.Index`).

    ``search`` returns one Ranking per query of at most ``k`` passage ids with score > 0
    (a query of only stopwords matches nothing and returns an empty Ranking).
    """

    name = "bm25"

    def __init__(self, index_dir: str | Path, passage_ids: list[str], cfg: BM25Config, mmap: bool = False):
        self.index_dir = Path(index_dir)
        self.mmap = mmap
        self.passage_ids = passage_ids
        self.cfg = cfg
        self._retriever = None

    def _load(self):
        if self._retriever is None:
            import bm25s

            self._retriever = bm25s.BM25.load(str(self.index_dir), mmap=self.mmap, show_progress=False)
        return self._retriever

    def search(self, queries: list[str], k: int) -> list[Ranking]:
        if not queries:
            return []
        retriever = self._load()
        k = min(k, len(self.passage_ids))
        tokens = tokenize(queries, self.cfg, return_ids=False)
        docs, scores = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        out = []
        for row_docs, row_scores in zip(np.asarray(docs), np.asarray(scores)):
            keep = row_scores > 0
            out.append(Ranking(ids=[self.passage_ids[i] for i in row_docs[keep]],
                               scores=[float(s) for s in row_scores[keep]]))
        return out
