"""Structured LLM output (issue 22), without a model: choice and JSON grammars, the OpenAI
``response_format`` wrapping, the call cache's keys, grouped calls, per-request seeds, and the
detection and repair of degenerate answers. With the real SmolLM2 and a real llama.cpp server:
tests/integration/test_structured.py."""

from __future__ import annotations

import json

import pytest

from preqrag.models.llm.cache import call_key
from preqrag.models.llm.structured import (chat_grouped, grammar_text, openai_schema, response_format, string_field,
                                    unwrap_reply)


# ---------------------------------------------------------------- schema plumbing (no model)
def test_choice_grammar_and_openai_wrapping():
    assert grammar_text(["single", "multi"]) == 'root ::= "single" | "multi"\n'
    assert grammar_text(['say "hi"']) == 'root ::= "say \\"hi\\""\n'
    with pytest.raises(ValueError):
        grammar_text([])
    wrapped = openai_schema(["single", "multi"])
    assert wrapped["properties"]["choice"]["enum"] == ["single", "multi"] and wrapped["required"] == ["choice"]
    assert response_format(["a"])["type"] == "json_schema"
    assert unwrap_reply('{"choice": "multi"}', ["single", "multi"]) == "multi"
    assert unwrap_reply("junk", ["single", "multi"]) == "junk"  # left for the step's parser to reject
    assert unwrap_reply('{"choice": "multi"}', {"type": "object"}) == '{"choice": "multi"}'


def test_json_grammar_is_tight_on_whitespace():
    text = grammar_text(string_field("query", max_length=20))
    assert 'space ::= | " "' in text and "\\n" not in text.split("space ::=")[1].splitlines()[0]


def test_cache_key_covers_schema_and_options_but_keeps_old_keys():
    m = [{"role": "user", "content": "hi"}]
    plain = call_key("x", m, 8, 0.0)
    assert call_key("x", m, 8, 0.0, schema=None, seed=None) == plain  # keys from before options existed
    assert call_key("x", m, 8, 0.0, schema=["a", "b"]) != plain
    assert call_key("x", m, 8, 0.0, schema=["a", "b"]) != call_key("x", m, 8, 0.0, schema=["a", "c"])
    assert call_key("x", m, 8, 0.0, repeat_penalty=1.1) != plain


def test_cache_keeps_greedy_and_seeded_calls_only(tmp_path):
    """Greedy and seeded calls are reproducible, so cached (a vote's seed is in its key); a sampled
    call without a seed reaches the model every time."""
    from preqrag.models.llm.cache import CachedLLM

    class Counting:
        name, calls = "counting", 0

        def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
            type(self).calls += len(requests)
            seeds = options.get("seed")
            seeds = seeds if isinstance(seeds, list) else [seeds] * len(requests)
            return [f"{s}:{temperature}" for s in seeds]

    llm = CachedLLM(Counting(), tmp_path)
    msgs = [{"role": "user", "content": "q"}]
    for _ in range(2):
        assert llm.chat(msgs, max_tokens=4) == "None:0.0"
        assert [llm.chat(msgs, max_tokens=4, temperature=0.6, seed=s) for s in (0, 1)] == ["0:0.6", "1:0.6"]
    assert Counting.calls == 3 and llm.hits == 3
    # one seed per request (DoTA's votes in one call): each request's seed is in its key, and only
    # the misses reach the model, with their own seeds
    assert llm.chat_many([msgs, msgs], max_tokens=4, temperature=0.6, seed=[1, 2]) == ["1:0.6", "2:0.6"]
    assert Counting.calls == 4 and llm.hits == 4
    llm.chat(msgs, max_tokens=4, temperature=0.6)
    llm.chat(msgs, max_tokens=4, temperature=0.6)
    assert Counting.calls == 6


def test_chat_grouped_restores_order():
    class Echo:
        name = "echo"
        calls = []

        def chat_many(self, requests, *, max_tokens, temperature=0.0, schema=None, **options):
            self.calls.append((max_tokens, json.dumps(schema)))
            return [f"{r[0]['content']}/{max_tokens}" for r in requests]

    llm = Echo()
    reqs = [[{"role": "user", "content": str(i)}] for i in range(4)]
    out = chat_grouped(llm, reqs, [None, ["a"], None, ["a"]], [8, 8, 16, 8])
    assert out == ["0/8", "1/8", "2/16", "3/8"] and len(llm.calls) == 3


def test_degenerate_answers_detected_and_repaired():
    from preqrag.components.answering import degenerate, repair_answer

    loop = "The oil is not only effective but also very good for the environment. " * 5
    assert degenerate(loop) == "repeated sentence x5"
    assert degenerate("1. 1. 2. 3. 4. 5.") == "no words"
    reworded = ("1. The proper way to use a MIG welder is to keep the wire pointed at the leading edge of the "
                "molten pool. This is a crucial step. 2. 3. The correct way to use a MIG welder is to keep the "
                "wire pointed at the leading edge of the molten pool.")
    assert degenerate(reworded) == "repeated sentence x2"
    assert degenerate("very good " * 40) == "repeated phrase"
    fine = "SCADA controls plants. Attacks on SCADA can stop water supply, so protecting it matters."
    assert degenerate(fine) is None and repair_answer("q", fine, ["p"]) == (fine, None)
    text, why = repair_answer("q", reworded, ["p"])
    assert text == ("The proper way to use a MIG welder is to keep the wire pointed at the leading edge of the "
                    "molten pool. This is a crucial step.") and why.endswith("repeats removed")
    text, why = repair_answer("what protects wood?", "1. 1. 2. 3.", ["Oil protects wood. Cats sleep."])
    assert text == "Oil protects wood. Cats sleep." and why.endswith("extractive answer from passage [1] used")


def test_a_seed_list_gives_each_request_its_own_seed():
    """``chat_many(..., seed=[...])``: one seed per request (chat_each, the sequential fallback of
    every backend, passes each its own); a list of the wrong length is an error, not a guess."""
    from preqrag.core.contracts import chat_each, per_request_options

    class Echo:
        def chat(self, messages, *, max_tokens, temperature=0.0, seed=None, **options):
            return f"{messages[0]['content']}/{seed}"

    reqs = [[{"role": "user", "content": c}] for c in "ab"]
    assert chat_each(Echo(), reqs, max_tokens=4, seed=[3, 5]) == ["a/3", "b/5"]
    assert chat_each(Echo(), reqs, max_tokens=4, seed=9) == ["a/9", "b/9"]
    assert per_request_options({"top_p": 0.5}, 2) == [{"top_p": 0.5}] * 2
    with pytest.raises(ValueError, match="3 seeds for 2 requests"):
        per_request_options({"seed": [1, 2, 3]}, 2)
