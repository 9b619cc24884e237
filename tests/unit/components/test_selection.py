"""Sentence selection (preqrag.components.selection) and its use by the PreQRAG generator: a shorter prompt from
the same passages, the answer-bearing sentences kept, every passage keeping its share, and what was
cut recorded in the trace. Sentences scored by the real cross-encoder:
tests/integration/test_selection_cross_encoder.py."""

from __future__ import annotations

import pytest

from preqrag.core.config import GeneratorConfig
from preqrag.components.generation import LLMGenerator
from preqrag.components.selection import GAP, select_sentences
from preqrag.core.text import approx_tokens
from fakes import FakeLLMBase, PromptRecorder as _Recorder

FILLER = ["The museum opened its new wing to visitors last spring.",
          "Parking is available in the garage on the north side.",
          "Tickets can be bought online or at the front desk.",
          "The cafe serves sandwiches, soups and several kinds of cake.",
          "Guided tours in English start every hour from the lobby."]


def _passage(answer_sentence: str, at: int) -> str:
    sents = list(FILLER)
    sents.insert(at, answer_sentence)
    return " ".join(sents)


def test_passages_that_fit_are_unchanged():
    ps = ["Short one.", "Another short passage."]
    assert select_sentences("anything?", ps, max_tokens=100, count=approx_tokens) == (ps, [])


def test_answer_bearing_sentences_kept_in_text_order_within_the_budget():
    q = "Which glaze did the potter Hamada use for his tea bowls?"
    p1 = _passage("Hamada glazed his tea bowls with a persimmon glaze called kaki.", 3)
    p2 = _passage("The potter Hamada worked in Mashiko for most of his life.", 1)
    p3 = " ".join(FILLER)
    budget = 90
    out, notes = select_sentences(q, [p1, p2, p3], max_tokens=budget, count=approx_tokens)
    assert len(out) == 3 and all(out)  # every passage keeps its number and some text
    assert "persimmon glaze called kaki" in out[0] and "Mashiko" in out[1]
    assert sum(approx_tokens(t) for t in out) <= budget + 2 * 3  # the gap marks may add a token or two each
    assert GAP in out[0] or out[0].startswith("… ")  # cut sentences are marked
    # kept sentences in the passage's own order
    kept = [s for s in FILLER + ["Hamada glazed his tea bowls with a persimmon glaze called kaki."] if s in out[0]]
    assert sorted(kept, key=p1.index) == sorted(kept, key=out[0].index)
    assert [n.split(":")[0] for n in notes] == ["passage 1", "passage 2", "passage 3"]
    assert all("->" in n and "sentences" in n for n in notes)


def test_unused_share_passes_to_the_next_passage():
    q = "What did the committee decide about the bridge?"
    short = "The committee met on Monday."
    long = _passage("The committee decided to close the bridge for repairs.", 4)
    out, notes = select_sentences(q, [short, long], max_tokens=60, count=approx_tokens)
    assert out[0] == short
    # passage 2 may use its 30 plus what passage 1 left (60 / 2 - 10)
    assert 30 < approx_tokens(out[1]) <= 50 + 2 and "close the bridge" in out[1]
    assert len(notes) == 1 and notes[0].startswith("passage 2: ")


def test_best_sentence_longer_than_the_share_is_cut_not_dropped():
    q = "How long is the river?"
    p = "The river is " + "very " * 60 + "long, 400 km. " + " ".join(FILLER)
    out, notes = select_sentences(q, [p], max_tokens=20, count=approx_tokens)
    assert out[0].startswith("The river is") and approx_tokens(out[0]) <= 20
    assert notes == [f"passage 1: {approx_tokens(p)} -> {approx_tokens(out[0])} tokens, its best sentence cut"]


def test_bad_budget():
    with pytest.raises(ValueError, match="max_tokens"):
        select_sentences("q", ["p"], max_tokens=0, count=approx_tokens)


def test_generator_prompt_holds_the_selected_sentences_and_the_trace_says_what_was_cut():
    q = "Which glaze did the potter Hamada use for his tea bowls?"
    ps = [_passage("Hamada glazed his tea bowls with a persimmon glaze called kaki.", 3), " ".join(FILLER)]
    whole = LLMGenerator(_Recorder(), GeneratorConfig()).generate([q], [ps])[0]
    llm = _Recorder()
    g = LLMGenerator(llm, GeneratorConfig(context_tokens=60)).generate([q], [ps])[0]
    assert g.final_prompt == llm.prompts[0] and approx_tokens(g.final_prompt) < approx_tokens(whole.final_prompt)
    assert "[1] " in g.final_prompt and "[2] " in g.final_prompt and "persimmon glaze called kaki" in g.final_prompt
    assert "Parking is available" in whole.final_prompt
    assert [t.split(":")[0] for t in g.truncations] == ["generate", "generate"]
    assert g.truncations[0].startswith("generate: selected passage 1: ") and g.n_passages == 2
    assert g.truncations[0].endswith(", by question words")
    assert whole.truncations == []


def test_an_answer_cut_by_the_token_cap_loses_its_unfinished_sentence_and_the_trace_says_so():
    """Qwen's list answers often run into ``max_new_tokens`` (32 of 200 dev answers): the reader
    gets the complete sentences, the trace records the cut; a finished answer, or a short one whose
    list item has no full stop, is kept whole."""
    from preqrag.components.answering import drop_unfinished_sentence

    cut = "Check the data. [1] It grew in 1998. 4. **Competitive Activity**: This data helps you monitor the"
    assert drop_unfinished_sentence(cut) == ("Check the data. [1] It grew in 1998.", True)
    for whole in ("Fine answer. [2]", "Ends with a question?", "He said \"yes.\"", "No sentence end at all",
                  "Use v1.5 and 3.5 mm"):
        assert drop_unfinished_sentence(whole) == (whole, False)

    class _Capped(_Recorder):
        def __init__(self, reply):
            super().__init__()
            self.reply = reply

        def chat_many(self, requests, *, max_tokens, **options):
            super().chat_many(requests, max_tokens=max_tokens, **options)
            return [self.reply for _ in requests]

    q, ps = "What data matters?", ["Room rates depend on demand. Web shopping data shows demand."]
    short_list = "Track:\n1. demand\n2. web shopping data"  # within the cap: kept as written
    g = LLMGenerator(_Capped(short_list), GeneratorConfig(max_new_tokens=64)).generate([q], [ps])[0]
    assert g.answer == short_list and not any("unfinished" in t for t in g.truncations)
    capped = "Room rates follow demand. [1] Web shopping data shows demand as it changes over the"
    g = LLMGenerator(_Capped(capped), GeneratorConfig(max_new_tokens=8)).generate([q], [ps])[0]
    assert g.answer == "Room rates follow demand. [1]"
    assert "generate: answer: its unfinished last sentence dropped (max_new_tokens or max_words reached)" in g.truncations


def test_an_answer_that_restates_its_question_gets_its_facts_in_a_follow_up_turn():
    """"Yes, <the question>." carries no fact: the generator asks for the supporting facts in the
    same chat (reply kept, follow-up appended, the trace says so); a follow-up that restates again
    is dropped; ``explain_restated = false`` sends one call, as the paper does."""
    from preqrag.components.answering import EXPLAIN_RESTATED, restates_question

    q = "Can exercise and gut health improve mood?"
    ps = ["Exercise raises serotonin. A varied gut microbiome is linked to lower anxiety."]

    class _Chat(FakeLLMBase):
        def __init__(self, follow_up):
            self.requests, self.follow_up = [], follow_up

        def chat_many(self, requests, *, max_tokens, **options):
            self.requests += requests
            return ["Yes, exercise and gut health can improve mood." if len(r) == 1 else self.follow_up
                    for r in requests]

    assert restates_question("Yes, exercise and gut health can improve mood.", q)
    assert not restates_question("Exercise raises serotonin, which lifts mood.", q)
    llm = _Chat("Exercise raises serotonin, and a varied gut microbiome is linked to lower anxiety. [1]")
    g = LLMGenerator(llm, GeneratorConfig()).generate([q], [ps])[0]
    assert g.answer == ("Yes, exercise and gut health can improve mood. Exercise raises serotonin, and a varied "
                        "gut microbiome is linked to lower anxiety. [1]")
    turns = llm.requests[1]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"] and turns[2]["content"] == EXPLAIN_RESTATED
    assert turns[0]["content"] == g.final_prompt  # the same chat: llama.cpp reuses the prompt's KV cache
    assert "generate: answer: it restated the question; the facts asked for in a follow-up turn appended" \
        in g.truncations
    again = LLMGenerator(_Chat("Yes, exercise and gut health can improve mood."), GeneratorConfig())
    assert again.generate([q], [ps])[0].answer == "Yes, exercise and gut health can improve mood."
    off = _Chat("unused")
    LLMGenerator(off, GeneratorConfig(explain_restated=False)).generate([q], [ps])
    assert len(off.requests) == 1


def test_answer_repeat_penalty_defaults_to_1_1_on_llama_cpp_only():
    """Measured for the local model (docs/bench/answers.json): degenerate answers 6 % -> 2 %. An
    OpenAI-compatible server gets no repeat_penalty unless one is set (OpenAI has no such parameter);
    a value in ``[generator]`` or ``[llm]`` wins."""
    from preqrag.components.registry import Context, build
    from preqrag.core.config import load_config

    class _Options(_Recorder):
        def chat_many(self, requests, *, max_tokens, **options):
            self.options = options
            return super().chat_many(requests, max_tokens=max_tokens, **options)

    words = {"generator": {"sentence_scorer": "words"}}
    openai = {"llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    for overrides, want in [({}, 1.1), (openai, None), ({"generator": {"repeat_penalty": 1.0}}, 1.0),
                            ({"llm": {"repeat_penalty": 1.2}}, None)]:
        cfg = load_config(None, {**overrides, "generator": {**words["generator"], **overrides.get("generator", {})}})
        llm = _Options()
        build("generator", "preqrag", Context(cfg, llm=llm)).generate(["Which glaze?"], [["Kaki glaze."]])
        assert llm.options.get("repeat_penalty") == want, overrides
