"""Sentence selection with the bundled MiniLM cross-encoder as its scorer (``[generator]
sentence_scorer = "cross-encoder"``): it keeps the sentence that answers, and the generator built
from the configuration scores with the pipeline's own cross-encoder. Selection by question words:
tests/unit/components/test_selection.py."""

from __future__ import annotations

import pytest

from preqrag.components.selection import select_sentences
from preqrag.core.text import approx_tokens
from fakes import PromptRecorder as _Recorder

FILLER = ["The museum opened its new wing to visitors last spring.",
          "Parking is available in the garage on the north side.",
          "Tickets can be bought online or at the front desk.",
          "The cafe serves sandwiches, soups and several kinds of cake.",
          "Guided tours in English start every hour from the lobby."]


def test_cross_encoder_scorer_keeps_the_sentence_that_answers_and_the_generator_uses_it():
    """``[generator] sentence_scorer = "cross-encoder"``: the bundled MiniLM cross-encoder (the
    pipeline's reranker) chooses the sentence that answers, where question-word overlap chooses one
    that only repeats the question's words; the generator built from the configuration scores with
    the pipeline's own cross-encoder, and refuses a configuration without one."""
    from preqrag.components import registry as components
    from preqrag.components.registry import Context
    from preqrag.core.config import CrossEncoderConfig, load_config
    from preqrag.models.rerankers import load_reranker

    q = "How tall is the Eiffel Tower?"
    echo = "Tall towers in Paris attract visitors who ask about the Eiffel Tower."  # the same question words
    answer = "The Eiffel Tower is 330 metres tall."
    p = " ".join(FILLER[:2] + [echo] + FILLER[2:4] + [answer] + FILLER[4:])
    budget = approx_tokens(echo) + 1  # room for one of the two
    by_words, _ = select_sentences(q, [p], max_tokens=budget, count=approx_tokens)
    assert "Tall towers" in by_words[0] and "330 metres" not in by_words[0]  # a tie: the earlier sentence
    ce = load_reranker(CrossEncoderConfig())
    by_ce, notes = select_sentences(q, [p], max_tokens=budget, count=approx_tokens,
                                    scorer=lambda q_, ss: ce.score([(q_, s) for s in ss]))
    assert "330 metres" in by_ce[0] and "Tall towers" not in by_ce[0] and notes[0].startswith("passage 1: ")

    cfg = load_config(None, {"generator": {"sentence_scorer": "cross-encoder", "context_tokens": budget}})
    ctx = Context(cfg=cfg)
    gen = components.build("generator", "preqrag", ctx)
    llm = _Recorder()
    gen.llm = llm  # the prompt is under test, not the LLM
    g = gen.generate([q], [[p]])[0]
    assert "330 metres" in g.final_prompt and "Tall towers" not in g.final_prompt
    assert g.truncations[0].startswith("generate: selected passage 1: ")
    assert g.truncations[0].endswith(", by the cross-encoder")
    # the default, "auto": the cross-encoder when the pipeline has one, else question words;
    # asking for the cross-encoder where there is none fails when the pipeline is built
    assert components.build("generator", "preqrag", Context(cfg=load_config(None))).sentence_scorer is not None
    none = {"cross_encoder": {"name": "none"}}
    assert components.build("generator", "preqrag", Context(cfg=load_config(None, none))).sentence_scorer is None
    bad = load_config(None, {"generator": {"sentence_scorer": "cross-encoder"}, **none})
    with pytest.raises(ValueError, match="sentence_scorer"):
        components.build("generator", "preqrag", Context(cfg=bad))
