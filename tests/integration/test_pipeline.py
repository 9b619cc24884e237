"""End to end on real smoke data with the bundled models: every stage, LiveRAG output, traces."""

import json

import numpy as np
import pytest

from preqrag.run.pipeline import Pipeline
from preqrag.core.records import LiveRAGAnswer, Question


@pytest.fixture(scope="module")
def pipeline(small_index, llm_test_config):
    """The ``preqrag`` preset: classification, LLM rewriting/decomposition, every stage."""
    return Pipeline.from_config(small_index, llm_test_config)


@pytest.fixture(scope="module")
def outcomes(pipeline, small_corpus):
    """Two single- and two multi-document questions of the small corpus (of its 3 + 3: each LLM
    rewrite or decomposition costs seconds)."""
    questions = [Question(id=q["id"], question=q["question"]) for q in small_corpus[2][:2] + small_corpus[2][3:5]]
    return pipeline.answer(questions)


def test_every_question_gets_a_schema_valid_liverag_answer(outcomes, small_corpus):
    corpus_ids = {json.loads(line)["id"] for line in open(small_corpus[0])}
    assert len(outcomes) == 4
    for o in outcomes:
        assert o.failure is None, o.failure
        answer = LiveRAGAnswer.model_validate(o.answer.model_dump())  # extra fields forbidden
        assert 1 <= len(answer.passages) <= 3
        assert all(p.doc_IDs and set(p.doc_IDs) <= corpus_ids for p in answer.passages)
        assert answer.question in answer.final_prompt
        assert answer.final_prompt.startswith("You are an expert assistant.")  # prompt B, Appendix B.3
        prompt = " ".join(answer.final_prompt.split())
        assert all(" ".join(p.passage.split()[:40]) in prompt for p in answer.passages)  # cut to 128 tokens
        assert len(answer.answer.split()) <= 300


def test_trace_records_every_stage(outcomes, llm_test_config):
    for o in outcomes:
        t = o.trace
        assert set(t.rankings) == {"sparse", "dense", "merged", "reranked", "final"}
        n_sub = len(t.plan.sub_queries)
        assert all(len(t.rankings[s]) == n_sub for s in ("sparse", "dense", "merged", "reranked"))
        assert all(len(r) <= llm_test_config.cross_encoder.depth for r in t.rankings["reranked"])
        for r in t.rankings["reranked"]:
            assert r.scores == sorted(r.scores, reverse=True)
        assert t.context_ids == t.rankings["final"][0].ids[:3]
        assert set(t.seconds) >= {"classify", "rewrite", "sparse", "dense", "fusion", "rerank", "generate"}
        assert t.classification.question_type == t.plan.question_type
        if t.plan.question_type == "single":
            assert n_sub == 1
        assert all(f.split(":")[0] in {"sparse", "dense", "decompose", "classify"} for f in t.fallbacks)


def test_retrieval_quality_on_smoke_subset(outcomes, small_corpus):
    """Real behaviour: with rerank + hybrid retrieval, most questions have a gold doc in the context."""
    gold = {q["id"]: set(q["gold_doc_ids"]) for q in small_corpus[2]}
    hits = sum(bool({p.doc_IDs[0] for p in o.answer.passages} & gold[o.question.id]) for o in outcomes)
    assert hits >= len(outcomes) - 1


def test_reranker_orders_relevant_passage_first(pipeline):
    texts = ["SCADA systems control industrial processes such as power grids and water treatment.",
             "The recipe calls for two cups of flour and a pinch of salt."]
    scores = pipeline.rerank_chain[0].reranker.score([("What is SCADA?", texts[0]), ("What is SCADA?", texts[1])])
    assert scores.shape == (2,) and scores[0] > scores[1] + 3


def test_cross_encoder_scores_pairs_alone_and_agrees_with_padded_batches(pipeline):
    """The ONNX int8 cross-encoder's pair-by-pair mode (batch_size 1, the default): a pair's score does
    not depend on the other pairs of the call, and on real smoke passages it ranks as padded batches do."""
    from scipy.stats import spearmanr

    from preqrag.core.config import CrossEncoderConfig
    from preqrag.models.rerankers import load_reranker

    texts = [pipeline.index.text(pid) for pid in pipeline.index.passage_ids[:12]]
    pairs = [("How does moss spread on lawns?", t) for t in texts]
    alone = load_reranker(CrossEncoderConfig(max_length=256, batch_size=1))
    padded = load_reranker(CrossEncoderConfig(max_length=256, batch_size=8))
    a = alone.score(pairs)
    assert a.shape == (12,) and a.dtype == np.float32
    assert alone.score(pairs[3:4])[0] == a[3] and alone.score(pairs[::-1])[::-1].tolist() == a.tolist()
    b = padded.score(pairs)
    assert spearmanr(a, b).statistic > 0.9 and np.abs(a - b).max() < 1.0


def test_failing_generation_is_recorded_not_raised(small_index, llm_test_config):
    """An LLM server that is down: rewriting falls back, generation fails, the question is a recorded failure."""
    import socket

    from preqrag.core.config import LLMConfig
    from preqrag.models.llm import load_llm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = load_llm(LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="x",
                             max_retries=0, timeout_s=2))
    p = Pipeline.from_config(small_index, llm_test_config, llm=llm)
    (o,) = p.answer([Question(id=1, question="Which is better, SCADA or PLC?")])
    assert o.answer is None and o.failure.stage == "generate" and "openai backend" in o.failure.error
    assert o.trace.fallbacks and o.trace.fallbacks[0].startswith("decompose: llm error")


def test_rrf_fusion_and_no_reranker_run_end_to_end(pipeline, small_corpus):
    """The pipeline with RRF fusion and no cross-encoder: the final ranking is the RRF of the
    BM25 and dense lists, computed independently here with the paper's formula."""
    from preqrag.components.fusion import RRFFusion
    from preqrag.core.records import Ranking

    fused = RRFFusion(k=60).fuse([Ranking(ids=["a", "b", "c"], scores=[3, 2, 1]), Ranking(ids=["c", "a"], scores=[2, 1])])
    assert fused.ids == ["a", "c", "b"]
    assert fused.scores[0] == pytest.approx(1 / 61 + 1 / 62)
    p = pipeline.derive({"fusion": {"name": "rrf"}, "cross_encoder": {"name": "none"}, "rewriter": {"name": "none"}})
    assert p.rerank_chain == []
    qs = [Question(id=q["id"], question=q["question"]) for q in small_corpus[2][:2]]
    for t in p.retrieve(qs):
        scores: dict[str, float] = {}
        for r in (t.rankings["sparse"][0], t.rankings["dense"][0]):
            for rank, pid in enumerate(r.ids, 1):
                scores[pid] = scores.get(pid, 0.0) + 1 / (60 + rank)
        # the trace keeps trace_depth entries of each list; the head is fully determined by them
        head = sorted(scores, key=lambda x: -scores[x])[:3]
        assert t.rankings["final"][0].ids[:3] == head
        assert t.rankings["reranked"] == t.rankings["merged"]  # no rerank step: passes through
        assert "rerank" not in t.seconds
