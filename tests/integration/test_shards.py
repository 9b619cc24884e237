"""Sharded builds (issue 11 §5): N shard builds + merge = the one-shot index, row for row."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import corpus_head, encoder_atol, same_top, run_cli
from preqrag.index.embedded import Index
from preqrag.index.shards import build_shard, merge_shards, parse_shard


@pytest.fixture(scope="module")
def shard_config():
    """The test settings with the WordLlama embedder: the shards and their one-shot reference encode
    the small corpus twice more, in a second instead of ~10 s with the default encoder (whose
    sharded build is compared with its one-shot build in tests/stress/test_ray.py)."""
    from _bench import unavailable
    from conftest import TEST_OVERRIDES
    from preqrag.core.config import load_config

    if importlib.util.find_spec("wordllama") is None:
        unavailable('the shard tests\' embedder needs wordllama: pip install "wordllama==0.4.0.post1"')
    return load_config(None, {**TEST_OVERRIDES, "embedder": {"name": "wordllama"}})


@pytest.fixture(scope="module")
def one_shot(small_corpus, shard_config, tmp_path_factory):
    """The small corpus indexed in one build with :func:`shard_config`."""
    from conftest import build_index_in

    return build_index_in(tmp_path_factory, "one_shot", small_corpus[0], shard_config)


@pytest.fixture(scope="module")
def merged(small_corpus, shard_config, tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    dirs = []
    for i in range(3):
        m = build_shard(small_corpus[0], d / f"s{i}", shard_config, i, 3)
        assert m["shard"] == [i, 3] and m["n_passages"] > 0
        dirs.append(d / f"s{i}")
    manifest = merge_shards(list(reversed(dirs)), d / "index", shard_config)  # any order
    return d / "index", dirs, manifest


def test_merged_index_equals_one_shot_build(merged, one_shot, small_corpus, shard_config):
    small_index, test_config = one_shot, shard_config
    out, _, manifest = merged
    one = json.loads((small_index / "manifest.json").read_text())
    assert manifest["shards"] == 3 and manifest["n_passages"] == one["n_passages"]
    assert manifest["corpus"]["sha256"] == one["corpus"]["sha256"]
    a = pq.read_table(small_index / "passages.parquet").to_pydict()
    b = pq.read_table(out / "passages.parquet").to_pydict()
    assert a == b  # same passages, same row order
    x, y = Index.open(small_index, test_config), Index.open(out, test_config)
    questions = [q["question"] for q in small_corpus[2]] + ["the", "solar panels efficiency"]
    for ra, rb in zip(x.sparse.search(questions, 10), y.sparse.search(questions, 10)):
        assert ra.ids == rb.ids and np.allclose(ra.scores, rb.scores)  # global BM25 statistics
    tol = encoder_atol(x.encoder)  # the shards encoded the passages in other batches than the one-shot build
    for ra, rb in zip(x.dense.search(questions, 10), y.dense.search(questions, 10)):
        assert same_top(ra, rb, tol) and (tol > 1e-5 or ra.ids == rb.ids)


def test_one_shard_of_one_merges_to_the_one_shot_build(one_shot, small_corpus, shard_config, tmp_path):
    """``preqrag index --ray --shards 1`` (or a 1-CPU Ray): a single shard records its documents'
    ordinals like any shard, and merges to the one-shot index."""
    build_shard(small_corpus[0], tmp_path / "s0", shard_config, 0, 1)
    assert "doc_ordinal" in pq.read_schema(tmp_path / "s0" / "passages.parquet").names
    manifest = merge_shards([tmp_path / "s0"], tmp_path / "index", shard_config)
    assert manifest["shards"] == 1
    a = pq.read_table(one_shot / "passages.parquet").to_pydict()
    assert pq.read_table(tmp_path / "index" / "passages.parquet").to_pydict() == a


def test_per_shard_bm25_would_differ(merged, one_shot, small_corpus, shard_config, tmp_path):
    """The reason for merging BM25 globally: an index of one shard's passages scores the same
    passage differently (other document frequencies and mean length)."""
    from preqrag.retrieval.bm25 import BM25Retriever, build_bm25

    _, dirs, _ = merged
    t = pq.read_table(dirs[0] / "passages.parquet").to_pydict()
    build_bm25(t["text"], shard_config.bm25, tmp_path / "bm25")
    local = BM25Retriever(tmp_path / "bm25", t["id"], shard_config.bm25)
    full = Index.open(one_shot, shard_config).sparse
    q = small_corpus[2][0]["question"]
    lr, fr = local.search([q], 5)[0], full.search([q], 200)[0]
    common = [pid for pid in lr.ids if pid in fr.ids]
    assert common
    assert any(abs(lr.scores[lr.ids.index(p)] - fr.scores[fr.ids.index(p)]) > 1e-6 for p in common)


def test_merge_refuses_incomplete_or_mixed_sets(merged, small_corpus, shard_config, tmp_path):
    test_config = shard_config
    _, dirs, _ = merged
    with pytest.raises(ValueError, match="2/3 missing"):
        merge_shards(dirs[:2], tmp_path / "a", test_config)
    with pytest.raises(ValueError, match="given twice"):
        merge_shards([dirs[0], dirs[0], dirs[1], dirs[2]], tmp_path / "b", test_config)
    with pytest.raises(ValueError, match="not a finished shard"):
        merge_shards([tmp_path], tmp_path / "c", test_config)
    other = test_config.model_copy(update={"bm25": test_config.bm25.model_copy(update={"k1": 0.9})})
    with pytest.raises(ValueError, match="BM25"):
        merge_shards(dirs, tmp_path / "d", other)
    for bad in ("3/3", "1", "a/b", "0/0"):
        with pytest.raises(ValueError, match="i/N"):
            parse_shard(bad)
    assert parse_shard(" 2/8 ") == (2, 8)


def test_cli_shard_and_merge(small_corpus, tmp_path):
    corpus = corpus_head(small_corpus[0], 4, tmp_path / "corpus.jsonl")  # the commands, not the passages
    for i in range(2):
        r = run_cli("index", "--corpus", corpus, "--index", tmp_path / f"s{i}", "--shard", f"{i}/2")
        assert r.returncode == 0, r.stderr
    r = run_cli("index", "merge", tmp_path / "s0", tmp_path / "s1", "--index", tmp_path / "idx")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["shards"] == 2
    r = run_cli("index", "merge", tmp_path / "s0", "--index", tmp_path / "idx2")
    assert r.returncode == 2 and "1/2 missing" in r.stderr


def test_streamed_chunking_and_encoding_cut_exact_shards(small_corpus, test_config, tmp_path, monkeypatch):
    """Row groups (here 10 passages) and vector files (here 7) need not align: every vector
    file but the last holds exactly SHARD rows, in passage order, so an interrupted build
    resumes with the right vectors."""
    import preqrag.index.embedded as index_mod
    from preqrag.index.chunking import Chunker
    from preqrag.models.encoders import load_encoder

    monkeypatch.setattr(index_mod, "SHARD", 7)
    monkeypatch.setattr(index_mod, "PASSAGE_ROW_GROUP", 10)
    enc = load_encoder(test_config.embedder)
    chunker = Chunker(enc.tokenizer, 254, 0)
    corpus = corpus_head(small_corpus[0], 6, tmp_path / "corpus.jsonl")  # > 40 passages of 254 tokens
    n_total, n_kept, n = index_mod.write_passages(corpus, tmp_path / "p.parquet", chunker)
    assert n_total == n_kept and pq.ParquetFile(tmp_path / "p.parquet").metadata.num_row_groups > 1
    files = index_mod.encode_passages(tmp_path / "p.parquet", tmp_path, enc, 16)
    sizes = [len(np.load(f)) for f in files]
    assert sum(sizes) == n and all(s == 7 for s in sizes[:-1])
    texts = pq.read_table(tmp_path / "p.parquet").column("text").to_pylist()
    assert np.allclose(np.concatenate([np.load(f) for f in files]), enc.encode(texts, is_query=False),
                       atol=encoder_atol(enc))
