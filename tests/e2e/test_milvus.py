"""The milvus index backend against a real Milvus Lite (pymilvus starts it for a local .db file).

The small smoke index (gold documents of 6 smoke questions + 12 others) is loaded into Milvus Lite
through the real CLI, then answered with `preqrag run` and compared with the embedded index.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from conftest import TEST_OVERRIDES, config_toml, run_cli# noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.components.fusion.rrf import RRFFusion  # noqa: E402
from preqrag.index.backends import open_index  # noqa: E402
from preqrag.core.contracts import FilterUnsupported  # noqa: E402
from preqrag.index.embedded import Index, IndexOpenError  # noqa: E402
from preqrag.index.milvus import MilvusIndex, load_collection, rows_in  # noqa: E402


def _cli(*args, timeout=900):
    return run_cli(*args)


@pytest.fixture(scope="module")
def milvus(small_index, tmp_path_factory):
    """(config path, config, Milvus Lite uri) with the small index loaded through the CLI."""
    d = tmp_path_factory.mktemp("milvus")
    uri = str(d / "milvus.db")
    overrides = {**TEST_OVERRIDES, "index": {"backend": "milvus", "uri": uri, "collection": "smoke"},
                 "generator": {"sentence_scorer": "words", "max_new_tokens": 8}}  # the answers' text is not under test here
    toml = d / "preqrag.toml"
    toml.write_text(config_toml(overrides))
    r = _cli("index", "--backend", "milvus", "--index", small_index, "--config", toml)
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = json.loads(r.stdout)
    embedded = Index.open(small_index, load_config(None, TEST_OVERRIDES))
    assert manifest["n_passages"] == len(embedded.passage_ids)
    return toml, load_config(toml), uri


def test_retrieval_matches_the_embedded_index(milvus, small_index, small_corpus):
    _, cfg, _ = milvus
    embedded = Index.open(small_index, load_config(None, TEST_OVERRIDES))
    index = open_index(None, cfg)  # the backend chosen by [index] backend
    assert isinstance(index, MilvusIndex)
    assert rows_in(index.client, "smoke") == len(embedded.passage_ids)
    questions = [q["question"] for q in small_corpus[2]]

    # dense: the same vectors and an exact FLAT index: the same top-10 as FAISS flat
    for m, e in zip(index.dense.search(questions, 10), embedded.dense.search(questions, 10)):
        assert m.ids == e.ids
        assert m.scores == pytest.approx(e.scores, abs=1e-4)

    # BM25: Milvus's analyzer (no stemming / stop words) differs from bm25s; the gold document must still be found
    found = 0
    for q, r in zip(small_corpus[2], index.sparse.search(questions, 10)):
        assert r.scores == sorted(r.scores, reverse=True) and all(s > 0 for s in r.scores)
        docs = {index.passages[pid].doc_id for pid in r.ids}
        found += bool(docs & set(q["gold_doc_ids"]))
    assert found >= len(questions) - 1
    mixed = index.sparse.search(["   ", questions[0]], 10)  # one call for the batch; a blank query matches nothing
    assert mixed[0].ids == [] and mixed[1].ids
    assert index.sparse.search(["   "], 10)[0].ids == []

    # passages read back by id, with their text, as from the embedded store
    pid = embedded.passage_ids[3]
    assert index.passages[pid] == embedded.passages[pid]
    with pytest.raises(KeyError):
        index.passages["no-such-passage#0"]

    # hybrid (RRF inside Milvus) = RRF of the two lists computed here
    sparse = index.sparse.search(questions, 20)
    dense = index.dense.search(questions, 20)
    for h, s, d in zip(index.hybrid_search(questions, questions, 5, depth=20), sparse, dense):
        local = RRFFusion(60).fuse([s, d])
        assert h.scores == pytest.approx(local.scores[:5], abs=1e-6)
        assert set(h.ids) <= set(s.ids) | set(d.ids)

    # filters (DoTA routing) are refused, not ignored, by both retrievers
    for retriever in (index.dense, index.sparse):
        with pytest.raises(FilterUnsupported, match="filters"):
            retriever.search(questions[:1], 5, filters=[{"topic": ["Health"]}])
    vecs = index.dense.vectors(embedded.passage_ids[:3])
    assert vecs.shape == (3, 384)
    index.close()  # Milvus Lite: one process at a time holds the file


def test_run_answers_the_smoke_questions(milvus, small_corpus, tmp_path):
    toml, _, _ = milvus
    out = tmp_path / "answers.jsonl"
    r = _cli("run", small_corpus[1], "-o", out, "--config", toml)  # no --index: the collection is the index
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [json.loads(line) for line in out.read_text().splitlines()]
    assert [a["id"] for a in answers] == [q["id"] for q in small_corpus[2]]
    hits = 0
    for a, q in zip(answers, small_corpus[2]):
        assert a["answer"].strip() and a["passages"]
        assert all(p["passage"] and p["doc_IDs"] for p in a["passages"])
        hits += bool({d for p in a["passages"] for d in p["doc_IDs"]} & set(q["gold_doc_ids"]))
    assert hits >= len(answers) - 1


def test_load_resumes_without_duplicates(small_index, tmp_path):
    cfg = load_config(None, {**TEST_OVERRIDES, "index": {"backend": "milvus", "uri": str(tmp_path / "m.db"),
                                                          "collection": "resume"}})
    n = len(Index.open(small_index, load_config(None, TEST_OVERRIDES)).passage_ids)

    class Stop(Exception):
        pass

    def stop_after_two(done, total):
        if done >= 20:
            raise Stop

    with pytest.raises(Stop):
        load_collection(small_index, cfg, batch_rows=10, progress=stop_after_two)
    seen = []
    load_collection(small_index, cfg, batch_rows=10, progress=lambda d, t: seen.append(d))
    assert seen[0] == 30  # resumed after the two whole batches
    index = MilvusIndex.open(cfg)
    assert rows_in(index.client, "resume") == n
    rows = index.client.query("resume", filter="row >= 0", output_fields=["passage_id"], limit=n + 10)
    assert len({x["passage_id"] for x in rows}) == n == len(rows)
    index.close()


def test_wrong_embedder_and_missing_collection_fail_before_any_question(milvus, small_corpus, tmp_path):
    _, cfg, uri = milvus
    other = cfg.model_copy(update={"embedder": cfg.embedder.model_copy(update={"name": "BAAI/bge-small-en-v1.5"})})
    with pytest.raises(IndexOpenError, match="embedder"):
        MilvusIndex.open(other)
    toml = tmp_path / "missing.toml"
    toml.write_text(config_toml({**TEST_OVERRIDES, "index": {"backend": "milvus", "uri": str(tmp_path / "x.db"),
                                                             "collection": "nothing"}}))
    out = tmp_path / "a.jsonl"
    r = _cli("run", small_corpus[1], "-o", out, "--config", toml)
    assert r.returncode == 2
    assert "no collection 'nothing'" in r.stderr
    assert not out.exists()
