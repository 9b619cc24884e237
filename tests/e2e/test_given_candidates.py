"""Generation from given candidates (``[run] use_given_candidates``, on in the ``cir`` preset): a
ragnarok request's pre-ranked ``candidates`` are the context, in their order, with their docids,
and no retrieval stage runs (CIR's task: TREC 2024 RAG augmented generation). Candidates are real
smoke-corpus passages; the end-to-end run uses the bundled SmolLM2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import TEST_OVERRIDES, config_toml, run_cli
from preqrag.components.candidates import has_candidates, read_candidates
from preqrag.core.config import load_config
from preqrag.core.records import LiveRAGAnswer, Question, Trace
from fakes import FakeLLMBase

RETRIEVAL_STAGES = {"rewrite", "sparse", "dense", "fusion", "rerank", "mmr", "merge", "pairwise", "prune"}


def test_read_candidates_ragnarok_shapes():
    extra = {"candidates": [
        {"docid": "msmarco_v2.1_doc_54_319914167#4_733739871", "score": 18.29,
         "doc": {"segment": "Seg one.", "title": "T", "url": "u"}},
        {"docid": 7, "score": "3.5", "doc": {"contents": "Contents two."}},
        {"docid": "msmarco_v2.1_doc_54_319914167#4_733739871", "score": 1.0, "doc": {"segment": "dup"}},
        {"docid": "d3", "doc": "A plain string doc."},
    ]}
    assert has_candidates(extra) and not has_candidates({"candidates": []}) and not has_candidates(None)
    got, notes = read_candidates(extra)
    assert [(p.id, p.doc_id, p.text, p.score) for p in got] == [
        ("msmarco_v2.1_doc_54_319914167#4_733739871", "msmarco_v2.1_doc_54_319914167", "Seg one.", 18.29),
        ("7", "7", "Contents two.", 3.5), ("d3", "d3", "A plain string doc.", 0.0)]
    assert notes == ["candidates: 1 duplicate docid(s) dropped, the first kept"]
    for bad, where in [([{"score": 1, "doc": {"segment": "x"}}], "candidates[1].docid"),
                       ([{"docid": "a", "doc": {"segment": " "}}], "candidates[1].doc"),
                       (["just text"], "candidates[1]"),
                       ([{"docid": "a", "doc": {"segment": "x"}}, {"docid": "b", "doc": {"title": "x"}}],
                        "candidates[2].doc")]:
        with pytest.raises(ValueError, match="^" + re.escape(where)):
            read_candidates({"candidates": bad})


def _passages(small_index):
    import pyarrow.parquet as pq

    return pq.read_table(Path(small_index) / "passages.parquet").to_pylist()


def _candidates(small_index, small_corpus, n=3):
    """``n`` real passages of documents that are gold for no question, as ragnarok candidates
    (scores decreasing, the index's passage ids as docids)."""
    gold = {g for q in small_corpus[2] for g in q["gold_doc_ids"]}
    rows = [r for r in _passages(small_index) if r["doc_id"] not in gold and len(r["text"]) > 200]
    picked, docs = [], set()
    for r in rows:
        if r["doc_id"] not in docs:
            picked.append(r)
            docs.add(r["doc_id"])
        if len(picked) == n:
            break
    return [{"docid": r["id"], "score": float(10 - i), "doc": {"segment": r["text"]}} for i, r in enumerate(picked)]


class FakeLLM(FakeLLMBase):
    name = "fake"
    context_window = 4096

    def __init__(self, reply):
        self.reply = reply
        self.prompts: list[str] = []

    def chat(self, messages, *, max_tokens, temperature=0.0, **options):
        return self.chat_many([messages], max_tokens=max_tokens)[0]

    def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
        self.prompts += [r[-1]["content"] for r in requests]
        return [self.reply for _ in requests]


def test_cir_pipeline_uses_given_candidates_and_skips_retrieval(small_index, small_corpus):
    from preqrag.run.pipeline import Pipeline

    cands = _candidates(small_index, small_corpus)
    reply = json.dumps({"sentences": [{"text": "One.", "ids": [2, 1]}, {"text": "Two.", "ids": [3, 4]}]})
    llm = FakeLLM(reply)
    # whole segments (context_tokens = 0, the paper's): the prompt is checked below
    whole = {**TEST_OVERRIDES, "generator": {"sentence_scorer": "words", "max_new_tokens": 16, "context_tokens": 0}}
    cfg = load_config(None, whole, pipeline="cir")
    assert cfg.run.use_given_candidates and not load_config(None, TEST_OVERRIDES).run.use_given_candidates
    p = Pipeline.from_config(small_index, cfg, llm=llm)
    q0, q1 = small_corpus[2][0], small_corpus[2][1]
    given = Question(id="g", question=q0["question"], extra={"candidates": cands})
    plain = Question(id="p", question=q1["question"])
    bad = Question(id="b", question=q1["question"], extra={"candidates": [{"docid": "x", "doc": {}}]})
    a, b, c = p.answer([given, plain, bad])
    assert a.failure is None and b.failure is None
    t = a.trace
    assert t.candidates == "given" and t.plan.rewriter == "given"
    assert t.context_ids == [x["docid"] for x in cands]  # in their given order
    assert set(t.rankings) == {"given", "final"} and t.rankings["given"][0].scores == [10.0, 9.0, 8.0]
    assert set(t.seconds) == {"classify", "generate"}  # no retrieval stage ran
    assert [(x.passage, x.doc_IDs) for x in a.answer.passages] == [
        (x["doc"]["segment"], [x["docid"].rsplit("#", 1)[0]]) for x in cands]
    assert all(f"{i}: {x['doc']['segment'].strip()!r}" in a.answer.final_prompt for i, x in enumerate(cands, 1))
    assert [x.passage_ids for x in t.citations] == [[cands[1]["docid"], cands[0]["docid"]], [cands[2]["docid"]]]
    assert t.removed_citations == 1  # id 4: not a given passage
    assert json.loads(t.model_dump_json())["candidates"] == "given"
    # the question without candidates in the same batch was retrieved
    assert b.trace.candidates is None and "candidates" not in json.loads(b.trace.model_dump_json())
    assert {"sparse", "dense", "rerank", "mmr"} <= set(b.trace.seconds)
    # malformed candidates fail that question alone, at stage "candidates"
    assert c.failure is not None and c.failure.stage == "candidates" and "candidates[1].doc" in c.failure.error

    # the preset's context size applies to the given list; the switch off: retrieved as usual
    p2 = Pipeline.from_config(small_index, load_config(None, {**TEST_OVERRIDES, "generator": {"sentence_scorer": "words", "context_top_k": 2}},
                                                       pipeline="cir"), llm=FakeLLM(reply))
    assert p2.answer([given])[0].trace.context_ids == [x["docid"] for x in cands[:2]]
    p3 = Pipeline.from_config(small_index, load_config(None, {**TEST_OVERRIDES, "run": {"use_given_candidates": False}},
                                                       pipeline="cir"), llm=FakeLLM(reply))
    (o,) = p3.answer([given])
    assert o.trace.candidates is None and "sparse" in o.trace.rankings


def test_cir_run_from_ragnarok_requests_end_to_end(small_index, small_corpus, tmp_path):
    """`preqrag run` on a ragnarok request JSONL with the cir preset and the real SmolLM2: the
    answer's passages are exactly the given candidates, no retrieval stage ran, and the TREC RAG
    2024 export references the candidates' docids."""
    pytest.importorskip("llama_cpp")
    cands = _candidates(small_index, small_corpus)
    cands[2]["docid"] = "msmarco_v2.1_doc_00_12345#3_4567"  # any docid: the text comes with it
    q = small_corpus[2][0]
    req = tmp_path / "requests.jsonl"
    req.write_text(json.dumps({"query": {"qid": "2024-1", "text": q["question"]}, "candidates": cands}) + "\n",
                   encoding="utf-8")
    cfg = tmp_path / "cir.toml"
    cfg.write_text(config_toml({**TEST_OVERRIDES, "pipeline": "cir",
                                "generator": {"sentence_scorer": "words", "max_new_tokens": 48, "max_passage_tokens": 96}}), encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", str(req), "--index", str(small_index),
                        "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr[-3000:]
    (a,) = [LiveRAGAnswer.model_validate_json(line) for line in out.read_text().splitlines()]
    (t,) = [Trace.model_validate_json(line) for line in out.with_name("answers.traces.jsonl").read_text().splitlines()]
    assert a.id == "2024-1" and t.candidates == "given"
    assert [x.passage for x in a.passages] == [x["doc"]["segment"] for x in cands]
    assert [x.doc_IDs for x in a.passages] == [[x["docid"].rsplit("#", 1)[0]] for x in cands]
    assert t.context_ids == [x["docid"] for x in cands]
    assert not RETRIEVAL_STAGES & set(t.seconds) and set(t.rankings) == {"given", "final"}
    assert a.final_prompt.startswith("Do retrieval augmented generation with the following texts\n")
    run = tmp_path / "run.jsonl"
    r = run_cli("export", "--format", "trec-rag24", str(out),
                        "-o", str(run), "--run-id", "cir-given")
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads(run.read_text())
    assert rec["references"] == [x["docid"] for x in cands] and rec["topic_id"] == "2024-1"
