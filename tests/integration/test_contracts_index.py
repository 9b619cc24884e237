"""The stage contracts on the real small index (issue 23): ``Pipeline.derive`` rebuilds what its
overrides change and keeps the loaded models; BM25 filters like dense retrieval."""

from __future__ import annotations

import numpy as np
import pytest


def test_derive_rebuilds_the_components_whose_settings_changed(small_index):
    from preqrag.core.config import load_config
    from preqrag.components.fusion import RRFFusion, UnionFusion
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    cfg = load_config(None, {"pipeline": "hybrid", "cross_encoder": {"depth": 8, "max_length": 128},
                             "rerank": {"chain": ["cross-encoder", "mmr", "bm25-prune"]},
                             "mmr": {"lambda_": 0.5, "top_j": 8}, "dota": {"prune_keep": 6}})
    base = Pipeline.from_config(small_index, cfg)
    ce, mmr, prune = base.rerank_chain
    assert isinstance(base.fusion, UnionFusion) and mmr.lambda_ == 0.5 and prune.keep == 6

    same = base.derive({})
    assert same.fusion is base.fusion and same.rerank_chain == base.rerank_chain
    assert same.generator is base.generator and same.rewriter is base.rewriter

    d = base.derive({"fusion": {"name": "rrf", "rrf_k": 30}})
    assert isinstance(d.fusion, RRFFusion) and d.fusion.k == 30 and d.rerank_chain == base.rerank_chain
    q = Question(id="q", question="What do coral reefs need to grow?")
    (trace,) = d.retrieve([q])
    merged = trace.rankings["merged"][0]
    assert merged.scores[0] <= 2 / 31 + 1e-9 and merged.scores[0] > 1 / 31  # RRF with k = 30, two lists

    d = base.derive({"mmr": {"lambda_": 0.9}})
    assert d.rerank_chain[0] is ce and d.rerank_chain[2] is prune and d.rerank_chain[1].lambda_ == 0.9

    d = base.derive({"dota": {"prune_keep": 3}})
    assert d.rerank_chain[2].keep == 3 and d.rerank_chain[0] is ce
    (trace,) = d.retrieve([q])
    assert len(trace.rankings["final"][0].ids) == 3

    d = base.derive({"cross_encoder": {"depth": 4}})
    assert d.rerank_chain[0].depth == 4 and d.rerank_chain[0].reranker is ce.reranker  # one model, shared

    d = base.derive({"rerank": {"chain": ["cross-encoder"]}})
    assert len(d.rerank_chain) == 1 and d.rerank_chain[0].reranker is ce.reranker


def test_bm25_filters_keep_only_the_allowed_passages(small_index, small_corpus, test_config):
    from preqrag.index.embedded import Index

    index = Index.open(small_index, test_config)
    n = len(index.passage_ids)
    labels = np.arange(n) % 3  # three namespaces, every third passage
    index.dense.add_facet("topic", ["a", "b", "c"], labels)  # one set of facets for both retrievers
    assert "topic" in index.sparse.facets
    queries = [small_corpus[2][0]["question"], small_corpus[2][3]["question"]]
    full = index.sparse.search(queries, n)
    got = index.sparse.search(queries, 5, [{"topic": ["b"]}, {}])
    allowed = {pid for pid, lab in zip(index.passage_ids, labels) if lab == 1}
    expected = [(pid, s) for pid, s in zip(full[0].ids, full[0].scores) if pid in allowed][:5]
    assert len(expected) == 5 and full[0].ids[:5] != [pid for pid, _ in expected]  # the filter matters here
    assert set(got[0].ids) <= allowed
    assert list(got[0].ids) == [pid for pid, _ in expected]  # ids exactly, scores up to float rounding
    assert list(got[0].scores) == pytest.approx([s for _, s in expected])
    assert got[1].ids == full[1].ids[:5]  # no filter: as before
    dense = index.dense.search(queries[:1], 5, [{"topic": ["b"]}])[0]
    assert set(dense.ids) <= allowed
    with pytest.raises(ValueError, match="BM25 retrieval: unknown topic value"):
        index.sparse.search(queries[:1], 5, [{"topic": ["z"]}])
