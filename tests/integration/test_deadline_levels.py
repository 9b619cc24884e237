"""`preqrag run --deadline` on the small index with the bundled models: the level pipelines share the
loaded models, and a deadline already passed answers every question extractively."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from preqrag.core.text import split_sentences
from preqrag.run.deadline import ExtractiveGenerator, level_pipelines
from preqrag.core.records import LiveRAGAnswer


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


@pytest.fixture(scope="module")
def pipeline(small_index, llm_test_config):
    """One pipeline (the ``preqrag`` preset) for this module's in-process tests, its models loaded once."""
    from preqrag.run.pipeline import Pipeline

    return Pipeline.from_config(small_index, llm_test_config)


def test_level_pipelines_share_the_loaded_models(pipeline):
    """The ``preqrag`` preset, so that level 1 has an LLM rewriting step to drop."""
    base = pipeline
    levels = level_pipelines(base)
    assert len(levels) == 5 and levels[0] is base
    assert all(p.index is base.index and p.llm is base.llm and p.classifier is base.classifier for p in levels)
    assert levels[1].rewriter.name != base.rewriter.name and levels[1].generator is base.generator
    ce = base.rerank_chain[0].reranker
    assert levels[1].rerank_chain[0].reranker is ce  # same cross-encoder object ...
    assert levels[2].rerank_chain[0].reranker is ce and levels[2].rerank_chain[0].depth == min(8, 10)  # ... any depth
    assert levels[3].cfg.generator.context_top_k == 1
    assert levels[3].cfg.generator.max_new_tokens == min(base.cfg.generator.max_new_tokens, 64)  # [deadline] cap
    assert isinstance(levels[4].generator, ExtractiveGenerator)


def test_deadline_already_passed_answers_everything_extractively(tmp_path, pipeline, small_corpus):
    """No time for any LLM: every question still gets a schema-valid answer, with no LLM call."""
    from preqrag.run.deadline import Deadline
    from preqrag.run.runner import run_questions, sidecar, stats_path
    from preqrag.core.timing import model_calls

    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in small_corpus[2]) + "{bad line\n")
    out = tmp_path / "answers.jsonl"
    now = datetime.now(timezone.utc)
    due = Deadline(now - timedelta(seconds=1), "1s", now - timedelta(seconds=2))
    llm_calls = model_calls().get("llm", 0)
    summary = run_questions(pipeline, qfile, out, deadline=due)
    assert model_calls().get("llm", 0) == llm_calls
    assert (summary.answered, summary.failed, len(summary.input_errors)) == (len(small_corpus[2]), 0, 1)
    answers = _lines(out)
    assert sorted(str(a["id"]) for a in answers) == sorted(str(q["id"]) for q in small_corpus[2])
    for a in answers:  # schema-valid; the answer is sentences of the one passage given
        LiveRAGAnswer.model_validate(a)
        assert a["answer"].strip() and len(a["passages"]) == 1
        assert all(s in a["passages"][0]["passage"] for s in split_sentences(a["answer"]))
    assert {t["degradation_level"] for t in _lines(sidecar(out, "traces"))} == {4}
    stats = json.loads(stats_path(out).read_text())
    assert stats["degradation_levels"] == {"0": 0, "1": 0, "2": 0, "3": 0, "4": len(answers)}
    assert stats["deadline"]["spec"] == "1s" and stats["deadline"]["finished_before_deadline"] is False
