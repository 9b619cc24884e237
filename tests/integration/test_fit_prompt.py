"""Fitting the generation prompt to the LLM's window (preqrag.components.generation.fit_prompt, used by the
PreQRAG and CIR generators; DoTA's aggregation): the question is never cut while passages can be
dropped or shortened; passages go from the end (lowest-ranked first) and the kept ones keep their
numbers. Real smoke passages and questions; token counts from the approximate counter and, where
llama-cpp-python is installed, from SmolLM2's own tokenizer."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from conftest import SMOKE_CORPUS, SMOKE_QUESTIONS
from preqrag.systems.dota.generation import aggregate, build_dota_prompt
from preqrag.components.generation import (CHAT_TEMPLATE_MARGIN, MIN_PASSAGE_TOKENS, approx_tokens, build_prompt,
                                fit_prompt)
from preqrag.systems.cir.generator import build_cir_prompt, parse_cir_answer


@pytest.fixture(scope="module")
def smoke():
    """(the longest smoke question, 20 long smoke-corpus texts, each its first 3,000 characters)."""
    from _bench import Path, bench_file

    bench_file(Path(SMOKE_QUESTIONS))
    bench_file(Path(SMOKE_CORPUS))
    qs = [json.loads(line) for line in open(SMOKE_QUESTIONS, encoding="utf-8")]
    question = max((q["question"] for q in qs), key=len)
    passages = []
    with gzip.open(SMOKE_CORPUS, "rt", encoding="utf-8") as fh:
        for line in fh:
            text = json.loads(line)["text"]
            if len(text) >= 3000:
                passages.append(text[:3000])
            if len(passages) == 20:
                break
    assert len(passages) == 20
    return question, passages


def _counters():
    """The approximate counter always; SmolLM2's tokenizer when llama-cpp-python and the model are there."""
    yield pytest.param(approx_tokens, id="approx")
    yield pytest.param(None, id="smollm2")


@pytest.fixture(params=list(_counters()))
def count(request):
    if request.param is not None:
        return request.param
    pytest.importorskip("llama_cpp")
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    try:
        llm = LlamaCppLLM(LLMConfig(n_ctx=1024))
        llm.count_tokens("warm up")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return llm.count_tokens


WINDOW, NEW = 2048, 200
BUDGET = WINDOW - NEW - CHAT_TEMPLATE_MARGIN


def _check_dropped_from_end(fitted, question, passages, count, numbered):
    n = fitted.n_passages
    assert 1 <= n < len(passages)
    assert count(fitted.text) <= BUDGET
    assert question in fitted.text  # the whole question
    assert not any(t.startswith("question") for t in fitted.truncations)
    # kept passages keep their numbers 1..n; passages n+1..20 are absent
    assert numbered(n) and not numbered(n + 1)
    dropped = f"passage {n + 1}" if n + 1 == len(passages) else f"passages {n + 1}-{len(passages)}"
    assert any(t.startswith(f"{dropped} dropped: the prompt was ") for t in fitted.truncations), fitted.truncations
    # every kept passage is there from its start (passage n may be shortened), in rank order
    flat = " ".join(fitted.text.split())
    starts = [flat.find(" ".join(p.split()[:30])) for p in passages[:n]]
    assert all(i >= 0 for i in starts) and starts == sorted(starts)
    return n


def test_twenty_passages_small_window_keeps_question_and_drops_from_the_end(smoke, count):
    question, passages = smoke
    fitted = fit_prompt(question, passages, prompt="B", count=count, window=WINDOW, max_new_tokens=NEW,
                        max_passage_tokens=512)
    n = _check_dropped_from_end(fitted, question, passages, count,
                                lambda k: re.search(rf"(^|\n)\[{k}\] ", fitted.text) is not None)
    assert fitted.text.endswith(f"Question: {question}\nAnswer:")
    # the space is used: the next passage would not have fit whole
    assert count(build_prompt(question, passages[:n + 1], "B")) > BUDGET
    assert count(fitted.text) >= BUDGET - 600  # less than one capped passage left unused
    # a shortened last kept passage is recorded with its size
    shortened = [t for t in fitted.truncations if t.startswith(f"passage {n}: ")]
    if shortened:
        m = re.match(rf"passage {n}: (\d+) -> (\d+) tokens", shortened[-1])
        assert m and int(m.group(2)) >= MIN_PASSAGE_TOKENS and int(m.group(2)) < int(m.group(1))


def test_cir_prompt_keeps_question_and_citations_are_checked_against_kept_passages(smoke, count):
    question, passages = smoke
    fitted = fit_prompt(question, passages, prompt="P.1", count=count, window=WINDOW, max_new_tokens=NEW,
                        max_passage_tokens=512, builder=lambda q, ps: build_cir_prompt(q, ps, "P.1"))
    n = _check_dropped_from_end(fitted, question, passages, count,
                                lambda k: re.search(rf"[{{ ]{k}: ['\"]", fitted.text) is not None)
    assert f"according to the following query: {question}\n" in fitted.text
    # CIR validates citation ids against the passages the prompt holds
    reply = json.dumps({"sentences": [{"text": "S.", "ids": [1, n, n + 1, 20]}]})
    parsed = parse_cir_answer(reply, fitted.n_passages)
    assert parsed.sentences == [("S.", [1, n])] and parsed.removed == 2


def test_question_alone_too_long_is_cut_after_every_passage_is_dropped(smoke, count):
    question, passages = smoke
    huge = " ".join([question] * 400)
    fitted = fit_prompt(huge, passages[:3], prompt="B", count=count, window=WINDOW, max_new_tokens=NEW,
                        max_passage_tokens=512)
    assert fitted.n_passages == 0
    assert "passages 1-3 dropped: the prompt was " in " | ".join(fitted.truncations)
    assert any(t.startswith(f"question: {count(huge)} -> ") for t in fitted.truncations)
    n = count(fitted.text)
    assert 0.9 * BUDGET <= n <= BUDGET  # the space is used
    assert "[1]" not in fitted.text
    # the same through CIR's prompt
    fitted = fit_prompt(huge, passages[:3], prompt="P.0", count=count, window=WINDOW, max_new_tokens=NEW,
                        max_passage_tokens=512, builder=lambda q, ps: build_cir_prompt(q, ps, "P.0"))
    assert fitted.n_passages == 0 and "{}" in fitted.text and count(fitted.text) <= BUDGET


def test_a_prompt_that_fits_is_unchanged(smoke, count):
    question, passages = smoke
    fitted = fit_prompt(question, passages[:2], prompt="B", count=count, window=4096, max_new_tokens=NEW,
                        max_passage_tokens=2000)
    assert fitted.text == build_prompt(question, passages[:2], "B")
    assert fitted.truncations == [] and fitted.n_passages == 2
    with pytest.raises(ValueError, match="cannot hold the instruction"):
        fit_prompt(question, passages[:2], prompt="B", count=count, window=220, max_new_tokens=200,
                   max_passage_tokens=512)


def test_dota_aggregation_cuts_passages_not_the_question(smoke, count):
    """DoTA §2.4 truncates passages proportionally; a question that takes over a quarter of the
    room (the old rule cut it to 25 %) is kept whole while the passages give up tokens."""
    question, passages = smoke
    long_q = " ".join([question] * 8)  # ~320-550 tokens
    room = 1200
    fixed = count(build_dota_prompt("", ["" for _ in passages[:10]]))
    assert count(long_q) > 0.25 * (room - fixed)
    text, cuts = aggregate(long_q, passages[:10], count=count, budget=8000, room=room)
    assert text.endswith(f"Question:\n{long_q}") and count(text) <= room
    assert not any(c.startswith("question") for c in cuts)
    assert sum(c.startswith("passage ") for c in cuts) == 10  # every passage gave up tokens
    # a question that alone fills the room is cut, and no passage text is left
    text, cuts = aggregate(" ".join([question] * 200), passages[:3], count=count, budget=8000, room=room)
    assert count(text) <= room and any(c.startswith("question: ") for c in cuts)
