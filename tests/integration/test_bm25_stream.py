"""The streaming BM25 build (issue 11 §4) against bm25s's own in-memory build (reference).

Same passages, same settings: every column of the score matrix (the passages containing a
term and their scores) must be bit-identical to what ``bm25s.BM25().index(...)`` writes, for
every BM25 variant, and retrieval through :class:`BM25Retriever` must return the same top-k.
Small batches and blocks force many of each, so batch and block boundaries are exercised.
"""

from __future__ import annotations

import gzip
import json
import os

import bm25s
import numpy as np
import pytest

from _bench import BENCH
from preqrag.core.config import BM25Config
from preqrag.retrieval.bm25 import BM25Retriever, build_bm25, parquet_texts, tokenize


@pytest.fixture(scope="module")
def passages():
    """Paragraphs of the smoke corpus (several thousand), plus an empty and a stopword-only one."""
    out = []
    with gzip.open(os.path.join(BENCH, "smoke_corpus.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            out += [p for p in json.loads(line)["text"].split("\n") if p.strip()]
    return out[:2500] + ["", "the of and to"] + out[2500:4000]


def _load(d):
    arrays = {k: np.load(d / f"{k}.csc.index.npy") for k in ("data", "indices", "indptr")}
    vocab = json.loads((d / "vocab.index.json").read_text(encoding="utf-8"))
    params = json.loads((d / "params.index.json").read_text())
    nn = d / "nonoccurrence_array.index.npy"
    return arrays, vocab, params, (np.load(nn) if nn.exists() else None)


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_stream_build_equals_bm25s(passages, tmp_path, method):
    cfg = BM25Config(method=method)
    ref = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    ref.index(tokenize(passages, cfg), show_progress=False)
    ref.save(str(tmp_path / "ref"), show_progress=False)
    info = build_bm25(iter(passages), cfg, tmp_path / "new", batch_passages=97, block_entries=5000)
    assert info["passages"] == len(passages)

    (ra, rv, rp, rn), (na, nv, np_, nn) = _load(tmp_path / "ref"), _load(tmp_path / "new")
    assert set(rv) == set(nv) and rv[""] == len(rv) - 1 and nv[""] == len(nv) - 1
    assert {k: v for k, v in rp.items()} == np_
    assert len(ra["data"]) == len(na["data"]) == info["entries"]
    assert ra["data"].dtype == na["data"].dtype and ra["indices"].dtype == na["indices"].dtype
    for term, i in rv.items():
        if term == "":
            continue
        j = nv[term]
        a0, a1 = ra["indptr"][i], ra["indptr"][i + 1]
        b0, b1 = na["indptr"][j], na["indptr"][j + 1]
        assert np.array_equal(ra["indices"][a0:a1], na["indices"][b0:b1]), term
        assert np.array_equal(ra["data"][a0:a1], na["data"][b0:b1]), term  # bit-identical scores
        if rn is not None:
            assert rn[i] == nn[j]
    assert (rn is None) == (nn is None)


def test_stream_build_retrieves_as_bm25s(passages, tmp_path):
    cfg = BM25Config()
    ids = [f"p{i}" for i in range(len(passages))]
    ref = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    ref.index(tokenize(passages, cfg), show_progress=False)
    ref.save(str(tmp_path / "ref"), show_progress=False)
    build_bm25(passages, cfg, tmp_path / "new", batch_passages=1000, block_entries=20000)
    with open(os.path.join(BENCH, "smoke.jsonl"), encoding="utf-8") as fh:
        questions = [json.loads(line)["question"] for line in fh] + ["the", "zzzz unknown"]
    a = BM25Retriever(tmp_path / "ref", ids, cfg).search(questions, 20)
    b = BM25Retriever(tmp_path / "new", ids, cfg, mmap=True).search(questions, 20)
    assert sum(len(r.ids) for r in a) > 500
    for ra, rb in zip(a, b):
        assert ra.ids == rb.ids and ra.scores == rb.scores


def test_stream_build_from_parquet_replaces_and_refuses_empty(passages, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": passages[:300]}), tmp_path / "p.parquet", row_group_size=64)
    assert list(parquet_texts(tmp_path / "p.parquet", batch_rows=50)) == passages[:300]
    out = tmp_path / "bm25"
    build_bm25(passages[:10], BM25Config(), out)
    info = build_bm25(parquet_texts(tmp_path / "p.parquet"), BM25Config(), out)  # replaces the old index
    assert info["passages"] == 300 and json.loads((out / "params.index.json").read_text())["num_docs"] == 300
    assert not (tmp_path / "bm25.work").exists() and not (tmp_path / "bm25.tmp").exists()
    with pytest.raises(ValueError, match="no passages"):
        build_bm25([], BM25Config(), tmp_path / "empty")


def test_numba_backend_same_scores(passages, tmp_path):
    """``[index] bm25_backend = "numba"``: bm25s's JIT backend over the streamed index returns the
    same score lists as the numpy backend (passages with equal scores may swap places)."""
    pytest.importorskip("numba")
    cfg = BM25Config()
    ids = [f"p{i}" for i in range(len(passages))]
    build_bm25(passages, cfg, tmp_path / "bm25")
    with open(os.path.join(BENCH, "smoke.jsonl"), encoding="utf-8") as fh:
        questions = [json.loads(line)["question"] for line in fh][:20]
    a = BM25Retriever(tmp_path / "bm25", ids, cfg, mmap=True).search(questions, 10)
    b = BM25Retriever(tmp_path / "bm25", ids, cfg, mmap=True, backend="numba").search(questions, 10)
    for ra, rb in zip(a, b):
        assert np.allclose(ra.scores, rb.scores, rtol=1e-6) and len(ra.ids) == len(rb.ids) > 0
        strict = [p for p, s in zip(ra.ids, ra.scores) if s > ra.scores[-1] * (1 + 1e-6)]
        assert set(strict) <= set(rb.ids)


def test_auto_backend_numba_from_a_million_passages(passages, tmp_path):
    """``bm25_backend = "auto"`` (the ``[index]`` default): numpy for the small indexes the docs'
    figures were measured on, numba from :data:`AUTO_NUMBA_PASSAGES` up (issue 24's BM25 latency
    target at 5M), and ``[index]``'s default is ``auto``."""
    pytest.importorskip("numba")
    from preqrag.core.config import IndexConfig
    from preqrag.retrieval.bm25 import AUTO_NUMBA_PASSAGES, resolve_backend

    assert IndexConfig().bm25_backend == "auto"
    assert resolve_backend("auto", AUTO_NUMBA_PASSAGES - 1) == "numpy"
    assert resolve_backend("auto", AUTO_NUMBA_PASSAGES) == "numba"
    assert resolve_backend("numpy", 10 * AUTO_NUMBA_PASSAGES) == "numpy"
    build_bm25(passages, BM25Config(), tmp_path / "bm25")
    small = BM25Retriever(tmp_path / "bm25", [f"p{i}" for i in range(len(passages))], BM25Config(), backend="auto")
    assert small.backend == "numpy" and small.search(["moss on lawns"], 5)[0].ids


def test_stream_build_is_reproducible_across_processes(tmp_path):
    """Same passages, two processes with different string-hash seeds: byte-identical files
    (bm25s numbers stems in set order, which the build does not inherit)."""
    import subprocess
    import sys

    code = ("import sys, gzip, json; from preqrag.core.config import BM25Config; "
            "from preqrag.retrieval.bm25 import build_bm25; "
            "t = [json.loads(l)['text'] for l in gzip.open(sys.argv[1], 'rt')][:150]; "
            "build_bm25(t, BM25Config(), sys.argv[2], batch_passages=40)")
    for seed in ("1", "2"):
        r = subprocess.run([sys.executable, "-c", code, os.path.join(BENCH, "smoke_corpus.jsonl.gz"),
                            str(tmp_path / seed)], env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "2").iterdir()) and "vocab.index.json" in names
    for name in names:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
