"""Sparse retrieval with bm25s (Lù, 2024), Lucene-style BM25 scoring.

Building streams (:func:`build_bm25`): bm25s's own ``BM25.index`` needs every passage's
tokens in memory at once (Python lists: ~27 GB for 5 million passages), so the index is built
here in two passes over the passages and written in bm25s's on-disk format, which
``bm25s.BM25.load`` (memory-mapped) reads as usual. The scores are bm25s's own (its
``bm25s.scoring`` idf and term-frequency functions, applied to the same values in the same
floating-point order): the files equal those of ``bm25s.BM25().index(...).save(...)`` up to the
numbering of the vocabulary (tested in tests/integration/test_bm25_stream.py).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..core.config import BM25Config
from ..core.records import Ranking
from ..core.contracts import Filters
from . import prf
from .facets import Facets, group_by_filter

BATCH_PASSAGES = 16_384
"""Passages tokenised at a time in the first pass (memory: their token lists, ~40 MB)."""
BLOCK_ENTRIES = 8_000_000
"""Index entries (term, passage) scored and written at a time in the second pass (~300 MB)."""


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


def parquet_texts(path: str | Path, batch_rows: int = BATCH_PASSAGES) -> Iterator[str]:
    """The ``text`` column of a passages Parquet file, read ``batch_rows`` rows at a time."""
    from ..core.io import open_parquet

    for batch in open_parquet(path).iter_batches(batch_size=batch_rows, columns=["text"]):
        yield from batch.column(0).to_pylist()


def build_bm25(texts: Iterable[str], cfg: BM25Config, out_dir: str | Path, *,
               batch_passages: int = BATCH_PASSAGES, block_entries: int = BLOCK_ENTRIES) -> dict:
    """Index passage texts (row ``i`` = passage ``i``) and save a bm25s index to ``out_dir``,
    streaming: memory holds one batch of texts, the vocabulary, 4 bytes per passage (its
    length) and one block of index entries; never the whole corpus.

    Args:
        texts: passage texts in row order; any iterable (a list, or :func:`parquet_texts`).
        cfg: BM25 variant (``method``, ``k1``, ``b``) and tokenisation (``stopwords``, ``stemmer``).
        out_dir: the bm25s index directory to write (``data/indices/indptr.csc.index.npy``,
            ``vocab.index.json``, ``params.index.json``; BM25L/BM25+ also
            ``nonoccurrence_array.index.npy``); replaced if it exists.
        batch_passages: passages tokenised per batch (first pass).
        block_entries: index entries scored and written per block (second pass).

    Returns:
        ``{"passages", "vocabulary", "entries", "avg_doc_len"}``.

    Method (two passes; Robertson & Zaragoza 2009 for BM25, Kamphuis et al. ECIR 2020 for the
    variants, scored by bm25s.scoring): pass 1 tokenises batch by batch with
    :func:`tokenize` (bm25s tokeniser), numbers stems in a global vocabulary and writes each
    batch's (term, passage, tf) entries, sorted by term, to three temporary files (three open files whatever the corpus size), while counting
    document frequencies and passage lengths. Pass 2 knows N, the mean length and every idf, and
    fills the column-major (CSC) score matrix block of terms by block, reading each batch's
    slice for the block; blocks go to disk in order, so the files are written sequentially.
    """
    import bm25s

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    work = out_dir.with_name(out_dir.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    vocab, df, lengths, offsets = _spill_entries(texts, cfg, work, batch_passages, np.dtype(model.int_dtype))
    n_docs, n_vocab = len(lengths), len(vocab)
    avg_doc_len = np.float64(lengths.sum(dtype=np.int64)) / n_docs  # = bm25s's np.array(...).mean()
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])
    out_tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(out_tmp, ignore_errors=True)
    out_tmp.mkdir(parents=True)
    nonocc = _write_scores(out_tmp, work, model, df, indptr, offsets, lengths, avg_doc_len, block_entries)
    np.save(out_tmp / "indptr.csc.index.npy", indptr)
    if nonocc is not None:
        np.save(out_tmp / "nonoccurrence_array.index.npy", nonocc)
    vocab[""] = n_vocab  # bm25s.BM25.index(create_empty_token=True): "" last, no column
    (out_tmp / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    params = dict(k1=model.k1, b=model.b, delta=model.delta, method=model.method, idf_method=model.idf_method,
                  dtype=model.dtype, int_dtype=model.int_dtype, num_docs=n_docs, version=bm25s.__version__,
                  backend=model.backend)  # the fields bm25s.BM25.save writes
    (out_tmp / "params.index.json").write_text(json.dumps(params, indent=4))
    shutil.rmtree(work)
    os.replace(out_tmp, out_dir)
    return {"passages": n_docs, "vocabulary": n_vocab, "entries": nnz, "avg_doc_len": float(avg_doc_len)}


def _spill_entries(texts: Iterable[str], cfg: BM25Config, work: Path, batch_passages: int,
                   int_dtype: np.dtype) -> tuple[dict[str, int], np.ndarray, np.ndarray, list[int]]:
    """:func:`build_bm25`'s pass 1: tokenise batch by batch, number the stems globally, count
    document frequencies and lengths, and append each batch's (term, passage, tf) entries, sorted
    by term, to ``work``/``terms.bin``, ``docs.bin``, ``tf.bin`` (three open files whatever the
    corpus size).

    Returns:
        ``(vocab, df, lengths, offsets)``: stem → column; df per column (int64, ``len(vocab)``);
        passage lengths in tokens (int32, one per passage); entries before each batch.

    Raises:
        ValueError: no passages.
    """
    vocab: dict[str, int] = {}
    df = np.zeros(1024, dtype=np.int64)
    lengths: list[np.ndarray] = []
    offsets = [0]  # entries before each batch
    n_docs = 0
    spill = {name: open(work / f"{name}.bin", "wb") for name in ("terms", "docs", "tf")}
    try:
        it = iter(texts)
        while batch := list(itertools.islice(it, batch_passages)):
            ids, local = tokenize(batch, cfg, return_ids=True)
            to_global = np.empty(len(local), dtype=np.int64)
            for stem in sorted(local):  # bm25s numbers a batch's stems in set order (hash-seeded): sort them,
                to_global[local[stem]] = vocab.setdefault(stem, len(vocab))  # so the files are reproducible
            lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
            del ids
            docs = np.repeat(np.arange(n_docs, n_docs + len(batch), dtype=np.int64), lens)
            keys, tf = np.unique((to_global[flat] << 32) | docs, return_counts=True)  # by term, then passage
            terms = (keys >> 32).astype(np.int32)
            if len(vocab) > len(df):
                df = np.concatenate([df, np.zeros(max(len(vocab), 2 * len(df)) - len(df), dtype=np.int64)])
            df[: len(vocab)] += np.bincount(terms, minlength=len(vocab))
            terms.tofile(spill["terms"])
            (keys & 0xFFFFFFFF).astype(int_dtype).tofile(spill["docs"])
            tf.astype(np.int32).tofile(spill["tf"])
            offsets.append(offsets[-1] + len(terms))
            lengths.append(lens.astype(np.int32))
            n_docs += len(batch)
    finally:
        for fh in spill.values():
            fh.close()
    if not n_docs:
        raise ValueError("build_bm25: no passages")
    return vocab, df[:len(vocab)], np.concatenate(lengths), offsets


def _write_scores(out_tmp: Path, work: Path, model, df: np.ndarray, indptr: np.ndarray, offsets: list[int],
                  lengths: np.ndarray, avg_doc_len: np.float64, block_entries: int) -> np.ndarray | None:
    """:func:`build_bm25`'s pass 2: idf (and the BM25L/BM25+ non-occurrence scores) exactly as
    bm25s computes them, then the CSC score matrix's ``data`` and ``indices`` arrays written to
    ``out_tmp`` block of whole terms by block (about ``block_entries`` entries each), in term
    order, each block read from every batch's slice of the spilled files in ``work``.

    Returns:
        The non-occurrence array (BM25L/BM25+), else None.

    Raises:
        RuntimeError: the blocks held another number of entries than ``indptr`` says.
    """
    from bm25s import scoring
    from numpy.lib import format as npformat

    dtype, int_dtype = np.dtype(model.dtype), np.dtype(model.int_dtype)
    n_docs, n_vocab, nnz = len(lengths), len(df), int(indptr[-1])
    doc_frequencies = dict(enumerate(df.tolist()))
    idf_fn = scoring._select_idf_scorer(model.idf_method)
    tfc_fn = scoring._select_tfc_scorer(model.method)
    idf = scoring._build_idf_array(doc_frequencies, n_docs, idf_fn, dtype=model.dtype)
    nonocc = None
    if model.method in model.methods_requiring_nonoccurrence:
        nonocc = scoring._build_nonoccurrence_array(doc_frequencies, n_docs, idf_fn, tfc_fn, avg_doc_len,
                                                    avg_doc_len, model.k1, model.b, model.delta, model.dtype)
    del doc_frequencies
    cuts = [0]  # blocks of whole terms of about block_entries entries, in term order
    while cuts[-1] < n_vocab:
        t = int(np.searchsorted(indptr, indptr[cuts[-1]] + block_entries, side="right")) - 1
        cuts.append(min(n_vocab, max(t, cuts[-1] + 1)))
    # where each block starts in each batch's term-sorted run: one sequential read of the terms
    # (files are read, not memory-mapped: mapped pages would count in the build's resident memory)
    bounds = np.zeros((len(offsets) - 1, len(cuts)), dtype=np.int64)
    with open(work / "terms.bin", "rb") as fh:
        for j, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
            bounds[j] = lo + np.searchsorted(np.fromfile(fh, dtype=np.int32, count=hi - lo), cuts)
    spilled = [(open(work / f"{name}.bin", "rb"), np.dtype(dt))
               for name, dt in (("terms", np.int32), ("docs", int_dtype), ("tf", np.int32))]

    def read(f, a: int, b: int) -> np.ndarray:
        fh, dt = spilled[f]
        fh.seek(a * dt.itemsize)
        return np.fromfile(fh, dtype=dt, count=b - a)

    def blocks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for c in range(len(cuts) - 1):
            parts = [(read(0, a, b), read(1, a, b), read(2, a, b))
                     for a, b in zip(bounds[:, c], bounds[:, c + 1]) if b > a]
            if not parts:
                continue
            t_blk = np.concatenate([p[0] for p in parts])
            d_blk = np.concatenate([p[1] for p in parts])
            f_blk = np.concatenate([p[2] for p in parts]).astype(dtype)
            del parts
            # bm25s.scoring._build_scores_and_indices_for_matrix, vectorised over entries
            scores = idf[t_blk] * tfc_fn(tf_array=f_blk, l_d=lengths[d_blk].astype(np.int64),
                                         l_avg=avg_doc_len, k1=model.k1, b=model.b, delta=model.delta)
            if nonocc is not None:
                scores -= nonocc[t_blk]
            order = np.argsort(t_blk, kind="stable")  # batches are in passage order: rows stay sorted
            yield scores.astype(dtype)[order], d_blk[order]

    data_path, idx_path = out_tmp / "data.csc.index.npy", out_tmp / "indices.csc.index.npy"
    try:
        with open(data_path, "wb") as fd, open(idx_path, "wb") as fi:
            for fh, dt in ((fd, dtype), (fi, int_dtype)):
                npformat.write_array_header_1_0(fh, {"descr": npformat.dtype_to_descr(dt), "fortran_order": False,
                                                     "shape": (nnz,)})
            written = 0
            for data, rows in blocks():
                data.tofile(fd)
                rows.astype(int_dtype).tofile(fi)
                written += len(data)
    finally:
        for fh, _ in spilled:
            fh.close()
    if written != nnz:
        raise RuntimeError(f"build_bm25: wrote {written} entries, expected {nnz}")
    return nonocc


AUTO_NUMBA_PASSAGES = 1_000_000
"""``bm25_backend = "auto"`` picks numba from this many passages up (issue 24: BM25 p50 <= 100 ms
at 5M passages; numpy measured 156 ms there, numba 16 ms, docs/results/scale.md). Below it numpy's
queries take a few ms (4.1 ms p50 at 100k) and numba's one-time compilation (7-23 s) would
not pay."""


def resolve_backend(backend: str, n_passages: int) -> str:
    """The bm25s backend to use: ``"auto"`` becomes ``"numba"`` for ``n_passages >=``
    :data:`AUTO_NUMBA_PASSAGES` when numba is installed, else ``"numpy"``; other names are
    returned as given."""
    if backend != "auto":
        return backend
    import importlib.util

    big = n_passages >= AUTO_NUMBA_PASSAGES
    return "numba" if big and importlib.util.find_spec("numba") is not None else "numpy"


class BM25Retriever:
    """BM25 over the passages of an index (PreQRAG §2.3 sparse retrieval).

    Args:
        index_dir: a bm25s index directory (``<index>/bm25``).
        passage_ids: passage id of row ``i``.
        cfg: tokenisation settings; must match those used at build time (checked by Index).
        mmap: load the score matrix memory-mapped (bm25s ``mmap=True``): pages are read on
            demand and shared between processes (``[index] mmap``; default False here, True
            through :class:`~preqrag.index.embedded.Index`).
        backend: bm25s's scoring backend: ``"numpy"`` (default here: no compilation, the
            figures in docs/ were measured with it), ``"auto"`` (:func:`resolve_backend`; the
            ``[index]`` default) or ``"numba"`` (JIT-compiled scoring and top-k selection;
            ``[index] bm25_backend``). Same scores; passages with equal scores may come in another
            order. Measured by bench/scale.py (docs/results/scale.md): p50 156 → 16 ms per query at
            5M passages, 4.1 → 0.36 ms at 100k, after a one-time compilation of 7–23 s.

        texts: ``texts(rows) -> list[str]``, the passages' texts by row: RM3 (``cfg.prf = "rm3"``)
            tokenises its feedback passages with them (the score matrix keeps no term
            frequencies); :class:`~preqrag.index.embedded.Index` gives its passage store's.

    Raises:
        ValueError: ``cfg.prf = "rm3"`` without ``texts``.
        ImportError (at the first search): ``backend = "numba"`` without numba installed.

    ``search`` returns one Ranking per query of at most ``k`` passage ids with score > 0
    (a query of only stopwords matches nothing and returns an empty Ranking). With
    ``cfg.prf = "rm3"`` (:mod:`preqrag.retrieval.prf`) the first pass (top ``prf_docs``) runs on
    ``backend``, the second, weighted pass with numpy whatever the backend; its scores are
    ``Σ_t w(t) · bm25(t, d)`` with weights summing to 1, not plain BM25's sums.
    """

    name = "bm25"
    learned_models: tuple[dict[str, str], ...] = ()
    """No model trained on the user's questions (:class:`~preqrag.core.contracts.Retriever`)."""

    def __init__(self, index_dir: str | Path, passage_ids: list[str], cfg: BM25Config, mmap: bool = False,
                 backend: str = "numpy", texts: Callable[[list[int]], list[str]] | None = None):
        if cfg.prf != "none" and texts is None:
            raise ValueError(f'[bm25] prf = "{cfg.prf}" reads the feedback passages\' text: BM25Retriever needs '
                             "texts= (an Index gives its passages')")
        self.index_dir = Path(index_dir)
        self.mmap = mmap
        self.backend = resolve_backend(backend, len(passage_ids))
        self.passage_ids = passage_ids
        self.cfg = cfg
        self.texts = texts
        self._retriever = None
        self.facets = Facets(len(passage_ids))  # an Index gives its own (preqrag.retrieval.facets)

    def with_settings(self, cfg: BM25Config) -> "BM25Retriever":
        """This retriever with other query-time settings (``[bm25] prf*``), sharing its loaded
        bm25s index, facets and texts (a derived pipeline's BM25: :func:`preqrag.run.pipeline.retrievers_of`).

        Raises:
            ValueError: ``cfg`` changes the index's own settings (:meth:`BM25Config.index_settings`),
                or asks for RM3 without texts.
        """
        if cfg.index_settings() != self.cfg.index_settings():
            raise ValueError(f"[bm25] {cfg.index_settings()} differs from the index's {self.cfg.index_settings()}: "
                             "only the prf settings can change without rebuilding the index")
        other = BM25Retriever(self.index_dir, self.passage_ids, cfg, self.mmap, self.backend, self.texts)
        other._retriever, other.facets = self._load(), self.facets
        return other

    def warm_up(self) -> None:
        """Load the bm25s index now rather than at the first search (memory-mapped with ``mmap``)."""
        self._load()

    @property
    def bm25(self):
        """The loaded ``bm25s.BM25`` (loaded on first use): for code that reads its score matrix
        or vocabulary directly (DoTA-RAG's BM25 pruning)."""
        return self._load()

    def _load(self):
        if self._retriever is None:
            import bm25s

            if self.backend == "numba":
                import importlib.util

                if importlib.util.find_spec("numba") is None:
                    raise ImportError('[index] bm25_backend = "numba" needs numba: pip install numba')
            self._retriever = bm25s.BM25.load(str(self.index_dir), mmap=self.mmap, show_progress=False,
                                              backend=self.backend)
        return self._retriever

    def search(self, queries: list[str], k: int, filters: Sequence[Filters] | None = None) -> list[Ranking]:
        """Top-``k`` passages per query (score > 0, best first); ``filters[i]`` (optional,
        facet → allowed values, ``{}`` for none) restricts query ``i`` to the rows its
        facets allow (:mod:`preqrag.retrieval.facets`), applied as bm25s's ``weight_mask`` (the
        other rows score 0 and are left out). Queries with the same filter are searched together.

        Raises:
            ValueError: a filter names a facet that is not registered, or an unknown value.
        """
        if not queries:
            return []
        if not filters or not any(filters):
            return self._search(queries, k, None)
        out: list[Ranking] = [Ranking()] * len(queries)
        for members in group_by_filter(filters):
            mask = self.facets.mask(filters[members[0]], "BM25 retrieval")
            for i, r in zip(members, self._search([queries[i] for i in members], k, mask)):
                out[i] = r
        return out

    def _search(self, queries: list[str], k: int, mask: np.ndarray | None) -> list[Ranking]:
        k = min(k, len(self.passage_ids))
        if mask is not None and not mask.any():
            return [Ranking() for _ in queries]
        tokens = tokenize(queries, self.cfg, return_ids=False)
        found = self._rm3(tokens, k, mask) if self.cfg.prf == "rm3" else self._retrieve(tokens, k, mask)
        return [Ranking(ids=[self.passage_ids[i] for i in rows], scores=[float(s) for s in scores])
                for rows, scores in found]

    def _retrieve(self, tokens: list[list[str]], k: int,
                  mask: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray]]:
        """bm25s's top ``k`` (on ``self.backend``) per query: ``(rows, scores)`` with score > 0."""
        kw = {} if mask is None else {"weight_mask": mask.astype(np.float32)}
        docs, scores = self._load().retrieve(tokens, k=k, show_progress=False, n_threads=1, **kw)
        return [(d[s > 0], s[s > 0]) for d, s in zip(np.asarray(docs), np.asarray(scores))]

    def _rm3(self, tokens: list[list[str]], k: int, mask: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray]]:
        """RM3's second pass (:mod:`preqrag.retrieval.prf`): each query's :meth:`_expand` weights
        scored over the whole score matrix with numpy, top ``k`` under ``mask``."""
        bm25 = self._load()
        vocab = bm25.vocab_dict
        out = []
        for weights in self._expand(tokens, mask):
            if not weights:  # nothing matched: nothing to expand from (plain BM25 returns nothing too)
                out.append((np.zeros(0, dtype=np.int64), np.zeros(0)))
                continue
            ids = np.array([vocab[t] for t in weights], dtype=np.int64)
            scores = prf.weighted_scores(bm25.scores, ids, np.array(list(weights.values())), bm25.nonoccurrence_array)
            out.append(prf.top_k(scores, k, mask))
        return out

    def _expand(self, tokens: list[list[str]], mask: np.ndarray | None) -> list[dict[str, float]]:
        """RM3's expanded queries (``{term: weight}``, :func:`preqrag.retrieval.prf.rm3_weights`;
        ``{}`` where the first pass found nothing): the first pass's top ``prf_docs`` under
        ``mask``, tokenised as the index was (``texts``), their relevance model's ``prf_terms``
        terms (:func:`~preqrag.retrieval.prf.anserini_term_ok`) interpolated with the query's."""
        bm25, cfg = self._load(), self.cfg
        vocab, indptr, n = bm25.vocab_dict, bm25.scores["indptr"], int(bm25.scores["num_docs"])
        feedback = self._retrieve(tokens, min(cfg.prf_docs, n), mask)
        rows = sorted({int(r) for d, _ in feedback for r in d})
        doc_tokens = dict(zip(rows, tokenize(self.texts(rows), cfg, return_ids=False))) if rows else {}

        def scored(term: str) -> bool:  # the term has a score column ("", bm25s's empty token, has none)
            return vocab.get(term, len(indptr)) < len(indptr) - 1

        def keep(term: str) -> bool:
            if not scored(term):
                return False
            t = vocab[term]
            return prf.anserini_term_ok(term, int(indptr[t + 1] - indptr[t]), n)

        out: list[dict[str, float]] = []
        for query, (docs, scores) in zip(tokens, feedback):
            if not len(docs):
                out.append({})
                continue
            rm = prf.relevance_model([doc_tokens[int(r)] for r in docs], scores, cfg.prf_terms, keep)
            out.append(prf.rm3_weights([t for t in query if scored(t)], rm, cfg.prf_original_weight))
        return out
