"""RM3 pseudo-relevance feedback for BM25 (``[bm25] prf = "rm3"``, preqrag.retrieval.prf): the
relevance model on hand-made documents, and the retriever on the shared smoke index."""

import numpy as np
import pytest

from preqrag.core.config import ConfigError, load_config
from preqrag.index.embedded import Index
from preqrag.core.records import Ranking
from preqrag.retrieval import prf
from preqrag.retrieval.bm25 import BM25Retriever, tokenize
from conftest import same_top


@pytest.fixture(scope="module")
def index(small_index, test_config):
    return Index.open(small_index, test_config)


@pytest.fixture(scope="module")
def questions(small_corpus):
    return [q["question"] for q in small_corpus[2]]


def _retriever(index, small_index, **settings) -> BM25Retriever:
    """A BM25 retriever over the smoke index with ``[bm25]`` settings, its own facets."""
    cfg = index.sparse.cfg.model_copy(update=settings)
    return BM25Retriever(small_index / "bm25", index.passage_ids, cfg, texts=index.passages.texts_at)


def test_relevance_model_weights_by_hand():
    # P(q|d): 3/4 and 1/4; P(w|d) = tf/|d|: a = .75*2/4 = .375, b = .75/4 + .25/2 = .3125, c = .1875, d = .125
    docs = [["a", "b", "a", "c"], ["b", "d"]]
    rm = prf.relevance_model(docs, [3.0, 1.0], n_terms=3)
    assert list(rm) == ["a", "b", "c"]  # the 3 heaviest, renormalised over .875
    assert rm == pytest.approx({"a": 0.375 / 0.875, "b": 0.3125 / 0.875, "c": 0.1875 / 0.875})
    # a term left out still counts in |d|: b and d only, .3125 and .125
    rm = prf.relevance_model(docs, [3.0, 1.0], n_terms=10, keep=lambda t: t in ("b", "d"))
    assert rm == pytest.approx({"b": 0.3125 / 0.4375, "d": 0.125 / 0.4375})
    assert prf.relevance_model(docs, [0.0, 0.0], 3) == {}
    with pytest.raises(ValueError, match="scores"):
        prf.relevance_model(docs, [1.0], 3)


def test_rm3_interpolates_with_the_query():
    # q: x twice, y once (counts / 3); rm: x .5, z .5; alpha .5
    w = prf.rm3_weights(["x", "y", "x"], {"x": 0.5, "z": 0.5}, 0.5)
    assert w == pytest.approx({"x": 0.5 * 2 / 3 + 0.25, "y": 0.5 / 3, "z": 0.25})
    assert sum(w.values()) == pytest.approx(1.0)
    assert prf.rm3_weights(["x", "y"], {"z": 1.0}, 1.0) == {"x": 0.5, "y": 0.5, "z": 0.0}
    with pytest.raises(ValueError, match="original_weight"):
        prf.rm3_weights(["x"], {}, 1.5)


def test_weighted_scores_are_bm25s_sums(index, questions):
    """With weight 1 per query token, the numpy pass equals bm25s's own query scores."""
    bm25 = index.sparse.bm25
    for tokens in tokenize(questions, index.sparse.cfg, return_ids=False):
        ids = np.array(bm25.get_tokens_ids(tokens))
        ours = prf.weighted_scores(bm25.scores, ids, np.ones(len(ids)), bm25.nonoccurrence_array)
        assert np.allclose(ours, bm25.get_scores(tokens), rtol=1e-5, atol=1e-6)


def test_prf_none_is_plain_bm25s(index, questions):
    assert index.sparse.cfg.prf == "none"
    bm25 = index.sparse.bm25
    docs, scores = bm25.retrieve(tokenize(questions, index.sparse.cfg, return_ids=False), k=10,
                                 show_progress=False, n_threads=1)
    for r, d, s in zip(index.sparse.search(questions, 10), np.asarray(docs), np.asarray(scores)):
        assert r.ids == [index.passage_ids[i] for i in d[s > 0]] and r.scores == [float(x) for x in s[s > 0]]


def test_rm3_expands_from_feedback_passages_and_ranks(index, small_index, questions):
    rm3 = _retriever(index, small_index, prf="rm3", prf_docs=3, prf_terms=5)
    tokens = tokenize(questions, rm3.cfg, return_ids=False)
    plain = index.sparse.search(questions, 3)
    for q, weights, fb in zip(tokens, rm3._expand(tokens, None), plain):
        fb_tokens = {t for pid in fb.ids for t in tokenize([index.text(pid)], rm3.cfg, return_ids=False)[0]}
        new = set(weights) - set(q)
        assert new and new <= fb_tokens  # expansion terms come from the 3 feedback passages
        assert len(set(weights) - set(q)) <= 5 and sum(weights.values()) == pytest.approx(1.0)
        assert min(weights[t] for t in q if t in weights) > 0
    bm25 = index.sparse.bm25
    for weights, r in zip(rm3._expand(tokens, None), rm3.search(questions, 7)):
        assert len(r) == 7 and r.scores == sorted(r.scores, reverse=True) and r.scores[-1] > 0
        ref = sum(w * bm25.get_scores([t]).astype(np.float64) for t, w in weights.items())
        rows = [index.passages.row(pid) for pid in r.ids]
        assert np.allclose(r.scores, ref[rows], rtol=1e-5)
        assert r.scores[0] == pytest.approx(ref.max(), rel=1e-5)


def test_rm3_respects_filters(index, small_index, questions):
    rm3 = _retriever(index, small_index, prf="rm3")
    n = len(index.passage_ids)
    rm3.facets.add("parity", ["even", "odd"], np.arange(n) % 2)
    mask = np.arange(n) % 2 == 0
    out = rm3.search(questions, 10, filters=[{"parity": ["even"]}] * len(questions))
    assert all(len(r) for r in out)
    assert all(index.passages.row(pid) % 2 == 0 for r in out for pid in r.ids)
    tokens = tokenize(questions, rm3.cfg, return_ids=False)
    for q, weights, fb in zip(tokens, rm3._expand(tokens, mask), rm3._retrieve(tokens, rm3.cfg.prf_docs, mask)):
        assert len(fb[0]) and all(r % 2 == 0 for r in fb[0])  # the feedback passages obey the filter too
        fb_tokens = set(sum(tokenize(index.passages.texts_at(fb[0]), rm3.cfg, return_ids=False), []))
        assert set(weights) - set(q) <= fb_tokens
    unfiltered = rm3.search(questions[:1], 10, filters=[{}])
    assert unfiltered[0].ids == rm3.search(questions[:1], 10)[0].ids


def test_original_weight_one_is_plain_bm25_ranking(index, small_index, questions):
    rm3 = _retriever(index, small_index, prf="rm3", prf_original_weight=1.0)
    vocab = index.sparse.bm25.vocab_dict
    for q, a, b in zip(tokenize(questions, rm3.cfg, return_ids=False), rm3.search(questions, 10),
                       index.sparse.search(questions, 10)):
        n_terms = sum(t in vocab for t in q)  # query weights are counts / n_terms: scores are BM25's / n_terms
        scaled = Ranking(ids=a.ids, scores=[s * n_terms for s in a.scores])
        assert same_top(scaled, b, 1e-4)


def test_settings_that_cannot_work_fail_early(index, small_index, test_config):
    with pytest.raises(ConfigError, match="prf_docs"):
        load_config(None, {"bm25": {"prf": "rm3", "prf_docs": 0}})
    with pytest.raises(ConfigError, match="prf_original_weight"):
        load_config(None, {"bm25": {"prf_original_weight": 1.5}})
    with pytest.raises(ConfigError, match="prf"):
        load_config(None, {"bm25": {"prf": "rm4"}})
    cfg = index.sparse.cfg.model_copy(update={"prf": "rm3"})
    with pytest.raises(ValueError, match="texts="):
        BM25Retriever(small_index / "bm25", index.passage_ids, cfg)
    with pytest.raises(ValueError, match="rebuilding"):
        index.sparse.with_settings(cfg.model_copy(update={"k1": 1.2}))
    from preqrag.index.milvus import MilvusError, MilvusIndex

    with pytest.raises(MilvusError, match="prf"):
        MilvusIndex.open(load_config(None, {"bm25": {"prf": "rm3"}, "index": {"backend": "milvus", "uri": "x.db"}}))


def test_prf_is_a_query_time_setting(index, small_index, test_config, questions):
    """An index opens under any prf settings (the manifest records the index's own), and a
    pipeline whose [bm25] prf differs from the opened index's searches with its own."""
    from preqrag.components.registry import Context
    from preqrag.run.pipeline import retrievers_of

    assert index.manifest["bm25"] == test_config.bm25.index_settings()
    assert "prf" not in index.manifest["bm25"]
    cfg = test_config.model_copy(update={"bm25": test_config.bm25.model_copy(update={"prf": "rm3"})})
    (sparse,) = [r for key, r, _, _ in retrievers_of(cfg, index, Context(cfg, index)) if key == "sparse"]
    assert sparse.cfg.prf == "rm3" and sparse.bm25 is index.sparse.bm25 and sparse.facets is index.sparse.facets
    assert sparse.search(questions[:2], 5) == _retriever(index, small_index, prf="rm3").search(questions[:2], 5)
    opened = Index.open(small_index, cfg)
    assert opened.sparse.cfg.prf == "rm3" and opened.sparse.search(questions[:1], 5)[0].ids
