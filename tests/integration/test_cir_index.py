"""The ``cir`` preset on the real small index: the MMR step's stored vectors and orders, and the
pipeline mapping a (scripted) CIR reply's citations and fallbacks into the trace."""

from __future__ import annotations

import json

import numpy as np

from conftest import TEST_OVERRIDES
from preqrag.core.config import load_config
from preqrag.systems.cir.generator import EXPERTISE_PROMPTS
from preqrag.core.records import Ranking, Trace
from preqrag.systems.cir.mmr import MMRStep, load_mmr_step
from fakes import QueuedLLM as FakeLLM


def test_mmr_step_on_small_index(small_index):
    """Real data: the vectors read back from FAISS are the embedder's passage vectors; both
    similarities give a permutation of the head; λ = 1 keeps the input order."""
    from preqrag.index.embedded import Index

    cfg = load_config(None, {**TEST_OVERRIDES, "mmr": {"top_j": 10}})
    index = Index.open(small_index, cfg)
    ranking = index.sparse.search(["welding positions and techniques"], 15)[0]
    assert len(ranking) >= 10
    step = load_mmr_step(cfg, index)
    ids = ranking.ids[:4]
    stored = step.passage_vectors(ids, [index.text(p) for p in ids])
    fresh = index.encoder.encode([index.text(p) for p in ids], is_query=False)
    assert np.allclose(stored, fresh, atol=1e-3)
    for sim in ("cosine", "jaccard"):
        c = load_config(None, {**TEST_OVERRIDES, "mmr": {"top_j": 10, "similarity": sim}})
        [out] = load_mmr_step(c, index).rerank(["welding"], [ranking], index.text)
        assert sorted(out.ids) == sorted(ranking.ids[:10]) and len(out.scores) == 10
        c1 = load_config(None, {**TEST_OVERRIDES, "mmr": {"top_j": 10, "similarity": sim, "lambda_": 1.0}})
        assert load_mmr_step(c1, index).rerank(["welding"], [ranking], index.text)[0].ids == ranking.ids[:10]
    # a near-duplicate pair is split apart by λ = .25 (the top passage duplicated under another id)
    dup = Ranking(ids=[ranking.ids[0], "dup", *ranking.ids[1:5]], scores=[5.0, 4.9, 4.0, 3.0, 2.0, 1.0])
    text = {"dup": index.text(ranking.ids[0])}
    step = MMRStep(0.25, "jaccard", 10, tokenize=lambda ts: [t.lower().split() for t in ts])
    [out] = step.rerank(["q"], [dup], lambda p: text.get(p) or index.text(p))
    assert out.ids[0] == ranking.ids[0] and out.ids[1] != "dup"


def test_pipeline_maps_citations_and_fallbacks_to_the_trace(small_index):
    """Through the pipeline: 1-based numbers → passage ids, removed count and generator
    fallbacks in the trace; question extras reach the generator."""
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    reply = json.dumps({"sentences": [{"text": "S1.", "ids": [2, 1, 99]}]})
    llm = FakeLLM([reply, "junk"])
    cfg = load_config(None, TEST_OVERRIDES, pipeline="cir")
    p = Pipeline.from_config(small_index, cfg, llm=llm)
    qs = [Question(id="a", question="How do welding positions compare?", extra={"user_expertise": "expert"}),
          Question(id="b", question="What data matters for hotel room rates?")]
    a, b = p.answer(qs)
    assert a.failure is None and b.failure is None
    t: Trace = a.trace
    assert [c.passage_ids for c in t.citations] == [[t.context_ids[1], t.context_ids[0]]]
    assert t.removed_citations == 1 and EXPERTISE_PROMPTS["P.2"] in a.answer.final_prompt
    assert b.trace.citations == [] and any(f.startswith("generate: unparsable JSON") for f in b.trace.fallbacks)
    assert b.answer.answer == "junk"
