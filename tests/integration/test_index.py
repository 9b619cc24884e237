"""Chunking, index building and first-stage retrieval on real smoke documents and the bundled embedder."""

import json
import math
import re

import numpy as np
import pytest

from preqrag.core.config import load_config
from preqrag.index.embedded import Index, IndexOpenError, build_index
from conftest import corpus_head, run_cli


@pytest.fixture(scope="module")
def index(small_index, test_config):
    return Index.open(small_index, test_config)


def test_passages_respect_token_cap_and_cover_documents(index, small_corpus):
    manifest = index.manifest
    cap = manifest["chunking"]["max_tokens"]
    assert cap == min(512, manifest["embedder"]["max_seq_length"] - 2)
    enc = index.encoder
    lengths = [enc.count_tokens(p.text) for p in index.passages.values()]
    assert max(lengths) <= cap
    docs = {json.loads(line)["id"]: json.loads(line)["text"] for line in open(small_corpus[0])}
    assert {p.doc_id for p in index.passages.values()} == set(docs)
    for doc_id, text in docs.items():
        parts = sorted((p for p in index.passages.values() if p.doc_id == doc_id), key=lambda p: p.position)
        assert [p.position for p in parts] == list(range(len(parts)))
        assert [p.id for p in parts] == [f"{doc_id}#{i}" for i in range(len(parts))]
        # every word of the document is in some passage, in order
        assert re.sub(r"\s+", "", "".join(p.text for p in parts)) == re.sub(r"\s+", "", text)


def _reference_bm25(query_tokens, docs_tokens, k1=1.5, b=0.75):
    """Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); tf saturation with length norm."""
    n = len(docs_tokens)
    avgdl = sum(len(d) for d in docs_tokens) / n
    df = {}
    for d in docs_tokens:
        for t in set(d):
            df[t] = df.get(t, 0) + 1
    scores = []
    for d in docs_tokens:
        s = 0.0
        for t in query_tokens:  # a repeated query term counts each time, as in Lucene
            if t not in df:
                continue
            tf = d.count(t)
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return np.array(scores)


def test_bm25_matches_reference_implementation(index, small_corpus):
    from preqrag.retrieval.bm25 import tokenize

    cfg = index.sparse.cfg
    texts = [index.passages[pid].text for pid in index.passage_ids]
    docs_tokens = tokenize(texts, cfg, return_ids=False)
    questions = [q["question"] for q in small_corpus[2]]
    for q, ranking in zip(questions, index.sparse.search(questions, k=10)):
        ref = _reference_bm25(tokenize([q], cfg, return_ids=False)[0], docs_tokens)
        order = np.argsort(-ref, kind="stable")[:10]
        assert np.allclose(ranking.scores, ref[order], rtol=1e-4)
        assert ranking.ids[0] == index.passage_ids[order[0]]


def test_dense_matches_brute_force_cosine(index, small_corpus):
    """The FAISS index holds the encoder's unit vectors of the passages (every 7th passage encoded
    again and compared: re-encoding all of them cost 8 s) and its search is the brute-force cosine
    top-k over them."""
    from conftest import encoder_atol

    n = len(index.passage_ids)
    stored = index.dense.faiss_index.reconstruct_n(0, n)  # the flat index's rows, in passage order
    assert stored.shape[0] == n and np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-4)
    rows = list(range(0, n, 7))
    again = index.encoder.encode([index.passages[index.passage_ids[i]].text for i in rows], is_query=False)
    assert np.allclose(again, stored[rows], atol=max(encoder_atol(index.encoder), 1e-4))
    # vectors by passage id (what CIR's MMR reads), in the order asked, repeats kept
    ids = [index.passage_ids[i] for i in (5, 0, 5)]
    assert np.array_equal(index.dense.vectors(ids), stored[[5, 0, 5]])
    with pytest.raises(KeyError):
        index.dense.vectors(["no-such-passage"])
    q = small_corpus[2][0]["question"]
    qv = index.encoder.encode([q], is_query=True)[0]
    ref = stored @ qv
    (ranking,) = index.dense.search([q], k=5)
    assert ranking.ids == [index.passage_ids[i] for i in np.argsort(-ref)[:5]]
    assert np.allclose(ranking.scores, np.sort(ref)[::-1][:5], atol=1e-3)


def test_bm25_finds_gold_documents_of_smoke_questions(index, small_corpus):
    """Sanity on real data: the raw question's BM25 top-10 holds a gold document for most questions."""
    questions = small_corpus[2]
    hits = 0
    for q, r in zip(questions, index.sparse.search([q["question"] for q in questions], k=10)):
        hits += bool({pid.rsplit("#", 1)[0] for pid in r.ids} & set(q["gold_doc_ids"]))
    assert hits >= len(questions) - 1


def test_opening_with_another_embedder_is_a_clear_error(small_index):
    cfg = load_config(None, {"embedder": {"name": "BAAI/bge-small-en-v1.5"}})
    with pytest.raises(IndexOpenError, match="built with embedder 'sentence-transformers/all-MiniLM-L6-v2'"):
        Index.open(small_index, cfg)


def test_existing_index_is_not_overwritten_by_default(small_index, small_corpus, test_config):
    with pytest.raises(FileExistsError):
        build_index(small_corpus[0], small_index, test_config)


def test_interrupted_build_resumes_from_checkpointed_shards(tmp_path, small_corpus, test_config, monkeypatch):
    """A build killed during encoding leaves <index>.partial with finished shards; the re-run reuses them."""
    import preqrag.index.embedded as ix

    monkeypatch.setattr(ix, "SHARD", 16)
    target = tmp_path / "idx"
    real_save = ix._save_shard
    calls = {"n": 0}

    def crash_after_two(path, arr):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt("simulated kill")
        real_save(path, arr)

    monkeypatch.setattr(ix, "_save_shard", crash_after_two)
    corpus = corpus_head(small_corpus[0], 8, tmp_path / "corpus.jsonl")  # 53 passages: 4 shards
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, target, test_config)
    assert not target.exists() and len(list((tmp_path / "idx.partial").glob("emb_*.npy"))) == 2

    encoded = []
    monkeypatch.setattr(ix, "_save_shard", real_save)
    from preqrag.models.encoders import load_encoder

    encoder_class = type(load_encoder(test_config.embedder))  # ONNX int8 on a CPU, torch on CUDA
    real_encode = encoder_class.encode

    def counting(self, texts, **kw):
        encoded.append(len(texts))
        return real_encode(self, texts, **kw)

    monkeypatch.setattr(encoder_class, "encode", counting)
    manifest = build_index(corpus, target, test_config)
    assert manifest["n_passages"] > 48 and sum(encoded) == manifest["n_passages"] - 32  # the two finished shards were not re-encoded
    assert (target / "manifest.json").exists() and not (tmp_path / "idx.partial").exists()


def test_damaged_or_foreign_index_files_are_named_before_the_first_question(small_index, small_corpus, test_config,
                                                                              tmp_path):
    """Each file of an index truncated, zeroed or from another index: Index.open names the file and
    the remedy; `preqrag index --verify` names it too (exit 2) and passes an intact index."""
    import json
    import shutil

    from preqrag.index.embedded import Index, IndexOpenError, build_index

    other_corpus = tmp_path / "other.jsonl"
    docs = [json.loads(line) for line in open(small_corpus[0], encoding="utf-8")][:3]
    other_corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    other = tmp_path / "other"
    build_index(other_corpus, other, test_config)
    files = json.loads((small_index / "manifest.json").read_text())["files"]
    assert {"passages.arrow", "passages.lookup.npy", "passages.parquet", "dense.faiss"} <= set(files)
    assert any(f.startswith("bm25/") for f in files)

    def damaged(rel: str, how: str):
        d = tmp_path / f"{how}-{rel.replace('/', '_')}"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(small_index, d)
        f = d / rel
        if how == "truncated":
            with open(f, "r+b") as fh:
                fh.truncate(f.stat().st_size // 2)
        elif how == "zeroed":
            f.write_bytes(b"\0" * f.stat().st_size)
        else:  # the same file of another index
            shutil.copy(other / rel, f)
        return d

    for rel in files:
        for how in ("truncated", "zeroed", "foreign"):
            if how == "foreign" and not (other / rel).exists():
                continue
            d = damaged(rel, how)
            with pytest.raises(IndexOpenError, match="rebuild the index with `preqrag index`") as e:
                Index.open(d, test_config)
            assert str(d / rel) in str(e.value), (rel, how, str(e.value))
    d = damaged("manifest.json", "truncated")
    with pytest.raises(IndexOpenError, match=r"manifest.json: unreadable .*rebuild"):
        Index.open(d, test_config)

    r = run_cli("index", "--verify", small_index)
    assert r.returncode == 0 and "every file matches" in r.stderr, r.stderr
    r = run_cli("index", "--verify", damaged("dense.faiss", "zeroed"))
    assert r.returncode == 2 and "dense.faiss: content differs" in r.stderr, r.stderr
