"""The LLM judge (preqrag.evaluation.judge) against a real llama.cpp server with SmolLM2-135M, on
real smoke questions: every reply scored in range or recorded unparsable, summary and resume. The
judge's parsing, prompts and records with scripted replies: tests/unit/evaluation/test_evaluation.py."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from preqrag.evaluation.judge import METRICS, judge_answers, load_judgments, parse_score, summarise_judgments
from preqrag.evaluation.retrieval import gold_docs

from _bench import BENCH


# ---------------------------------------------------------------------------- real LLM judge

def _doc_texts(ids: set[str]) -> dict[str, str]:
    out = {}
    with gzip.open(BENCH / "smoke_corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["id"] in ids:
                out[d["id"]] = d["text"]
    return out


@pytest.mark.slow  # 10 prompts to the 135M model
def test_judge_with_real_llm_server(llama_server, tmp_path, smoke, singles):
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm import load_llm

    qs = singles[:2]  # the reference answer and a refusal (an off-topic answer parses like the reference)
    texts = _doc_texts({gold_docs(q)[0] for q in qs})
    answers = []
    for i, q in enumerate(qs):
        passage = " ".join(texts[gold_docs(q)[0]].split()[:80])
        answer = [q.extra["answer"], "I do not know."][i]
        answers.append({"id": q.id, "question": q.question, "answer": answer, "final_prompt": "p",
                        "passages": [{"passage": passage, "doc_IDs": gold_docs(q)[:1]}]})
    llm = load_llm(LLMConfig(backend="openai", base_url=f"{llama_server}/v1", model="smollm2",
                             timeout_s=120, max_retries=1, concurrency=2))
    t0 = time.monotonic()
    path = tmp_path / "judgments.jsonl"
    recs = judge_answers(answers, smoke, llm, path, max_tokens=24)  # a score is a few tokens; a cut reply is unparsable
    assert len(recs) == 2 * len(METRICS)
    for r in recs:
        spec = METRICS[r["metric"]]
        assert r["status"] in ("ok", "unparsable"), r
        if r["status"] == "ok":
            assert spec.lo <= r["score"] <= spec.hi
            assert parse_score(r["raw"], spec) == ("ok", r["score"], None)
        else:
            assert r["score"] is None and isinstance(r["raw"], str) and r["reason"]
    assert len(load_judgments(path)) == len(recs)
    summ = summarise_judgments(recs, smoke)
    for m in METRICS:
        a = summ[m]["all"]
        assert a["n_valid"] + a["n_unparsable"] == 2 and a["n_error"] == 0
    # resume: nothing left to ask
    assert judge_answers(answers, smoke, llm, path, max_tokens=24) == recs
    print(f"real-LLM judging of 10 prompts: {time.monotonic() - t0:.1f}s; "
          f"statuses: {[(r['metric'], r['status'], r['raw']) for r in recs]}")
