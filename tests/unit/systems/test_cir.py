"""The ``cir`` preset (CIR at TREC 2024 RAG), its logic with fakes: the MMR rerank step (§2.1)
against hand-computed examples, the CIR generator's JSON parsing, citation removal, expertise
prompts, fallbacks and copy rewrites (§2.2, Table 2) with a scripted LLM. The MMR step on the real
small index: tests/integration/test_cir_index.py; an end-to-end ``preqrag run``:
tests/e2e/test_cir_run.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preqrag.core.config import GeneratorConfig, load_config
from preqrag.systems.cir import CIRConfig
from preqrag.systems.cir.generator import (EXPERTISE_PROMPTS, CIRGenerator, build_cir_prompt, parse_cir_answer,
                                    resolve_expertise)
from preqrag.core.records import Ranking
from preqrag.systems.cir.mmr import MMRStep, jaccard, minmax, mmr_order
from preqrag.core.contracts import LLMError
from fakes import QueuedLLM as FakeLLM


# ---------------------------------------------------------------- MMR, hand-computed
def test_mmr_order_hand_computed():
    """rel = (1, .8, .5); Sim2(0,1) = .9 (near-duplicates), Sim2(0,2) = .1, Sim2(1,2) = .2.
    λ = .5: pick 0 (.5·1 = .5); then 1: .4 − .45 = −.05, 2: .25 − .05 = .20 → 2; then 1: −.05."""
    sim = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    order, values = mmr_order([1.0, 0.8, 0.5], sim, 0.5)
    assert order == [0, 2, 1]
    assert values == pytest.approx([0.5, 0.2, -0.05])
    assert mmr_order([1.0, 0.8, 0.5], sim, 1.0)[0] == [0, 1, 2]  # λ = 1: relevance order
    assert mmr_order([1.0, 0.8, 0.5], sim, 0.0)[0] == [0, 2, 1]  # λ = 0: diversity only, tie → first
    with pytest.raises(ValueError):
        mmr_order([1.0], np.ones((1, 1)), 1.5)


def test_minmax_and_jaccard():
    assert minmax([3.0, 2.0, 1.0]).tolist() == [1.0, 0.5, 0.0]
    assert minmax([2.0, 2.0]).tolist() == [1.0, 1.0]  # no spread: all fully relevant
    assert jaccard({"a", "b", "c"}, {"a", "b", "c", "d"}) == 0.75
    assert jaccard(set(), set()) == 0.0


TEXTS = {"a": "apple banana cherry", "b": "Apple banana cherry date", "c": "zebra yak"}
RANKING = Ranking(ids=["a", "b", "c"], scores=[3.0, 2.0, 1.0])  # relevance after min-max: 1, .5, 0


def test_mmr_step_jaccard_hand_computed():
    """Jaccard over lower-cased words: J(a,b) = 3/4, J(a,c) = J(b,c) = 0.
    λ = .5: a (.5); then b: .25 − .5·.75 = −.125, c: 0 − 0 = 0 → c; then b: −.125."""
    def words(texts):
        return [t.lower().split() for t in texts]

    step = MMRStep(0.5, "jaccard", 20, tokenize=words)
    [out] = step.rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert out.ids == ["a", "c", "b"]
    assert out.scores == pytest.approx([0.5, 0.0, -0.125])
    [same] = MMRStep(1.0, "jaccard", 20, tokenize=words).rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert same.ids == RANKING.ids  # λ = 1: the input order
    [cut] = MMRStep(0.5, "jaccard", 2, tokenize=words).rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert cut.ids == ["a", "b"]  # only the top_j head is diversified and kept
    # the paper's Sim1: Jaccard(query, passage) as relevance; query "zebra" → c first
    [by_sim] = MMRStep(1.0, "jaccard", 20, "similarity", tokenize=words).rerank(
        ["zebra"], [RANKING], TEXTS.__getitem__)
    assert by_sim.ids[0] == "c"


VECS = {"a": [1.0, 0.0], "b": [0.8, 0.6], "c": [0.0, 1.0]}


def _vectors(ids, texts):
    return np.array([VECS[i] for i in ids], dtype=np.float32)


def test_mmr_step_cosine_hand_computed():
    """cos(a,b) = .8 → Sim2 = (1+.8)/2 = .9; cos(a,c) = 0 → .5; cos(b,c) = .6 → .8.
    λ = .25: a (.25); then b: .125 − .75·.9 = −.55, c: 0 − .75·.5 = −.375 → c; then b:
    .125 − .75·max(.9, .8) = −.55."""
    step = MMRStep(0.25, "cosine", 20, passage_vectors=_vectors)
    [out] = step.rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert out.ids == ["a", "c", "b"]
    assert out.scores == pytest.approx([0.25, -0.375, -0.55])
    # λ = .5 keeps relevance ahead here: b: .25 − .45 = −.2 beats c: 0 − .25 = −.25
    assert MMRStep(0.5, "cosine", 20, passage_vectors=_vectors).rerank(["q"], [RANKING], TEXTS.__getitem__)[0].ids \
        == ["a", "b", "c"]
    [same] = MMRStep(1.0, "cosine", 20, passage_vectors=_vectors).rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert same.ids == RANKING.ids
    empty, one = MMRStep(0.5, "cosine", 20, passage_vectors=_vectors).rerank(
        ["q", "q"], [Ranking(), Ranking(ids=["a"], scores=[2.0])], TEXTS.__getitem__)
    assert empty.ids == [] and one.ids == ["a"]  # nothing retrieved, or one passage: no crash
    # the paper's Sim1 = cosine(query, passage): q = (.6, .8) → a .8, b .98, c .9 (after (1+cos)/2).
    # λ = .5: b (.49); then a: .4 − .45 = −.05, c: .45 − .4 = .05 → c; then a.
    step = MMRStep(0.5, "cosine", 20, "similarity", passage_vectors=_vectors,
                   query_vectors=lambda qs: np.array([[0.6, 0.8]] * len(qs), dtype=np.float32))
    [out] = step.rerank(["q"], [RANKING], TEXTS.__getitem__)
    assert out.ids == ["b", "c", "a"]
    assert out.scores == pytest.approx([0.49, 0.05, -0.05])


def test_mmr_step_rejects_bad_settings():
    with pytest.raises(ValueError, match="lambda"):
        MMRStep(1.5, "cosine", 20, passage_vectors=_vectors)
    with pytest.raises(ValueError, match="similarity"):
        MMRStep(0.5, "dice", 20)
    with pytest.raises(ValueError, match="tokenizer"):
        MMRStep(0.5, "jaccard", 20)
    with pytest.raises(ValueError, match="mmr.lambda_"):
        load_config(None, {"mmr": {"lambda_": 2}})  # the config validates too
    from preqrag.core.config import ConfigError

    with pytest.raises(ConfigError):
        load_config(None, {"mmr": {"similarity": "dice"}})


# ---------------------------------------------------------------- CIR generator
def test_prompt_is_table_2_with_expertise():
    p = build_cir_prompt("What is MIG welding?", ["one", "two"], "P.2")
    assert p.startswith("Do retrieval augmented generation with the following texts\n"
                        "Please bear in mind that I am an expert in this field and have substantial prior "
                        "knowledge.\naccording to the following query: What is MIG welding?\n")
    assert "these are the texts, ordered by relevance with their ids:\n{1: 'one', 2: 'two'}\n" in p
    assert "give the output as a json, where all sentences are seperate" in p
    # Table 2 has a second P.x slot after the output method: the sentence again, after the segments
    assert ("where the information appears\nPlease bear in mind that I am an expert in this field and have "
            "substantial prior knowledge.\nReply with this JSON only") in p
    assert p.count(EXPERTISE_PROMPTS["P.2"]) == 2
    assert "Please bear in mind" not in build_cir_prompt("q", ["x"], "P.0")
    assert "where the information appears\nReply with this JSON only" in build_cir_prompt("q", ["x"], "P.0")
    assert resolve_expertise("novice") == "P.1" and resolve_expertise("Expert") == "P.2"
    assert resolve_expertise("P.3") == "P.3" and resolve_expertise("guru") is None and resolve_expertise(3) is None


def test_parse_valid_and_invalid_citations():
    reply = ('{"sentences": [{"text": "MIG  welding uses a wire.", "ids": [1, "2", 2, 9, 0, "x", null]},'
             ' {"text": "Flat positions are best.", "ids": 3}]}')
    p = parse_cir_answer(reply, 3)
    assert p.fallback is None
    assert p.sentences == [("MIG welding uses a wire.", [1, 2]), ("Flat positions are best.", [3])]
    assert p.removed == 4  # 9 and 0 are not input ids; "x" and null are not ids
    fenced = '```json\n[{"sentence": "One.", "citations": ["[2]"]}, "junk", {"text": ""}]\n```'
    p = parse_cir_answer(fenced, 2)
    assert p.sentences == [("One.", [2])] and p.skipped == 2 and p.removed == 0
    p = parse_cir_answer('Here is the answer: {"sentences": [{"text": "A.", "ids": []}]} Hope it helps.', 1)
    assert p.sentences == [("A.", [])] and p.fallback is None


@pytest.mark.parametrize("junk", ["", "I think the answer is 42.", '{"sentences": [{"text": "cut', "[1, 2, 3]",
                                  '{"answer": "a plain string"}', "null", '{"sentences": [{"ids": [1]}]}'])
def test_parse_junk_falls_back(junk):
    p = parse_cir_answer(junk, 3)
    assert p.fallback is not None and p.fallback.startswith("unparsable JSON") and p.sentences == []


def _gen(replies, **cir):
    llm = FakeLLM(replies)
    return CIRGenerator(llm, GeneratorConfig(max_words=300), CIRConfig(**cir)), llm


def test_generator_citations_fallbacks_and_expertise():
    ok = json.dumps({"sentences": [{"text": "Wire feeds the weld.", "ids": [2, 5]},
                                   {"text": "Flat is easiest.", "ids": [1]}]})
    # replies in call order: one call per answer schema (the number of passages), q1 and q4 first
    gen, llm = _gen([ok, ok, "no json here", LLMError("server down")])
    out = gen.generate(["q1", "q2", "q3", "q4"], [["p1", "p2"], ["p1"], ["p1"], ["p1", "p2"]],
                       extras=[{"user_expertise": "expert"}, {}, {"user_expertise": "novice"},
                               {"user_expertise": "guru"}])
    g = out[0]
    assert g.answer == "Wire feeds the weld. Flat is easiest."
    assert g.citations == [("Wire feeds the weld.", [2]), ("Flat is easiest.", [1])]
    assert g.removed_citations == 1 and g.fallbacks == ()
    assert EXPERTISE_PROMPTS["P.2"] in llm.prompts[0] and g.final_prompt == llm.prompts[0]
    g = out[1]  # unparsable: raw text, no citations, fallback recorded; no expertise field → [cir] prompt (P.1)
    assert g.answer == "no json here" and g.citations == [] and g.removed_citations == 0
    assert g.fallbacks[0].startswith("generate: unparsable JSON")
    assert EXPERTISE_PROMPTS["P.1"] in g.final_prompt and g.final_prompt == llm.prompts[2]
    assert isinstance(out[2].answer, LLMError) and out[2].citations is None
    assert out[3].fallbacks == ("generate: unknown user_expertise 'guru', used P.1",)
    gen, llm = _gen([ok], prompt="P.3", use_question_expertise=False)
    gen.generate(["q"], [["p"]], extras=[{"user_expertise": "expert"}])
    assert EXPERTISE_PROMPTS["P.3"] in llm.prompts[0] and EXPERTISE_PROMPTS["P.2"] not in llm.prompts[0]


def test_generator_caps_answer_at_max_words():
    long = json.dumps({"sentences": [{"text": " ".join(["w"] * 200), "ids": [1]},
                                     {"text": " ".join(["v"] * 200), "ids": [1]},
                                     {"text": "never reached", "ids": [1]}]})
    gen, _ = _gen([long])
    [g] = gen.generate(["q"], [["p"]])
    assert len(g.answer.split()) == 300
    assert len(g.citations) == 2 and len(g.citations[1][0].split()) == 100


def test_copied_sentences_counts_twelve_shared_words():
    from preqrag.components.answering import copied_sentences

    passage = ("Consider intermittent instead of continuous fillets - not all fillet welds need to be continuous, "
               "especially when welding stiffeners.")
    answers = ["Not all fillet welds need to be continuous, especially when welding stiffeners, it says.",  # 12 words
               "Fillet welds on stiffeners can be intermittent rather than continuous.",  # paraphrase
               "Consider intermittent instead of continuous fillets."]  # shorter than 12 words
    assert copied_sentences(answers, [passage]) == [True, False, False]
    assert copied_sentences(answers, ["unrelated text"]) == [False, False, False]
    assert copied_sentences([], [passage]) == []


def test_segments_are_their_answer_bearing_sentences_within_context_tokens():
    ok = json.dumps({"sentences": [{"text": "Moss spreads by spores.", "ids": [1]}]})
    llm = FakeLLM([ok])
    long = ("Moss spreads by spores carried on the wind. " + "The lawn was mown on Tuesday afternoon. " * 30)
    gen = CIRGenerator(llm, GeneratorConfig(context_tokens=24), CIRConfig())
    (g,) = gen.generate(["How does moss spread?"], [[long, "Unrelated text about cars. " * 20]])
    assert "Moss spreads by spores" in llm.prompts[0] and llm.prompts[0].count("mown on Tuesday") <= 1
    assert any(t.startswith("generate: selected passage 1:") for t in g.truncations), g.truncations
    assert g.citations == [("Moss spreads by spores.", [1])]
    whole = FakeLLM([ok])
    CIRGenerator(whole, GeneratorConfig(context_tokens=0), CIRConfig()).generate(["How does moss spread?"], [[long]])
    assert whole.prompts[0].count("mown on Tuesday") == 30  # 0 = whole segments, as the paper


def test_an_answer_that_copies_a_segment_is_rewritten_in_one_more_turn():
    segment = ("Not all fillet welds need to be continuous, especially when welding stiffeners with full-length "
               "fillet welds.")
    copy = json.dumps({"sentences": [{"text": segment, "ids": [1]}]})
    own = json.dumps({"sentences": [{"text": "Stiffener fillets can be intermittent.", "ids": [1, 9]}]})
    fresh = json.dumps({"sentences": [{"text": "Flat welding is easiest.", "ids": [2]}]})
    # first call: both questions; second call: only the copying one, with its draft and not the segments
    gen, llm = _gen([copy, fresh, own])
    a, b = gen.generate(["Must fillet welds be continuous?", "Which position is easiest?"],
                        [[segment, "Flat is easy."], [segment, "Flat welding is the easiest position."]])
    assert len(llm.prompts) == 3 and "Must fillet welds be continuous?" in llm.prompts[2]
    assert segment in llm.prompts[2] and "Flat is easy." not in llm.prompts[2]
    assert "keeping every fact of the draft that answers the query" in llm.prompts[2]  # not a vaguer summary
    assert a.citations == [("Stiffener fillets can be intermittent.", [1])] and a.removed_citations == 1
    assert a.fallbacks == ("generate: 1 copied sentence(s): answer rewritten",)
    assert b.answer == "Flat welding is easiest." and b.fallbacks == ()
    # a rewrite that fails keeps the first answer, and says so; rewrite_copies = false sends no second turn
    gen, llm = _gen([copy, LLMError("server down")], paraphrase_copies=False)
    (a,) = gen.generate(["Must fillet welds be continuous?"], [[segment, "Flat is easy."]])
    assert a.answer == segment and "the rewrite failed" in a.fallbacks[0]
    gen, llm = _gen([copy], rewrite_copies=False, paraphrase_copies=False)
    (a,) = gen.generate(["Must fillet welds be continuous?"], [[segment, "Flat is easy."]])
    assert a.answer == segment and len(llm.prompts) == 1


def test_the_rewrite_turn_has_its_own_sentence_floor():
    """[cir] rewrite_min_sentences: the rewrite turn's schema has its own minItems, so a sentence
    that does not answer the query can go, as REWRITE_PROMPT asks; null keeps the first answer's
    min_sentences (then the rewrite must keep two sentences)."""
    segment = ("Not all fillet welds need to be continuous, especially when welding stiffeners with full-length "
               "fillet welds.")
    first = json.dumps({"sentences": [{"text": segment, "ids": [1]}, {"text": "Bananas are yellow.", "ids": [2]}]})
    again = json.dumps({"sentences": [{"text": "Fillet welds on stiffeners need not be continuous.", "ids": [1]}]})

    class SchemaRecorder(FakeLLM):
        def __init__(self, replies):
            super().__init__(replies)
            self.schemas: list = []

        def chat_many(self, requests, *, max_tokens, temperature=0.0, schema=None, **options):
            self.schemas.append(schema)
            return super().chat_many(requests, max_tokens=max_tokens)

    for floor, want in ((1, 1), (None, 2)):
        llm = SchemaRecorder([first, again])
        cir = CIRConfig(min_sentences=2, max_sentences=2, rewrite_min_sentences=floor, paraphrase_copies=False)
        (a,) = CIRGenerator(llm, GeneratorConfig(max_words=300, max_new_tokens=1024), cir).generate(
            ["Must fillet welds be continuous?"], [[segment, "Bananas are yellow."]])
        assert [s["properties"]["sentences"]["minItems"] for s in llm.schemas] == [2, want]
        assert a.citations == [("Fillet welds on stiffeners need not be continuous.", [1])]


def test_a_sentence_still_copied_after_the_rewrite_is_paraphrased_alone():
    """[cir] paraphrase_copies: each sentence that still copies a segment goes alone to one more
    short turn (the sentence, not the segments or the question) and keeps its citations; a
    paraphrase that fails or says something else leaves the sentence as it was."""
    from preqrag.systems.cir.generator import PARAPHRASE_PROMPT

    segment = ("Not all fillet welds need to be continuous, especially when welding stiffeners with full-length "
               "fillet welds.")
    other = "Overhead welding is the hardest position because the molten metal tends to fall out of the joint."
    copy = json.dumps({"sentences": [{"text": segment, "ids": [1]}, {"text": "Flat is easiest.", "ids": [2]}]})
    still = json.dumps({"sentences": [{"text": segment, "ids": [1]}, {"text": other, "ids": [2]}]})
    own = "Rewritten sentence: Fillet welds on stiffeners do not have to be continuous."
    # calls: first answer, rewrite turn (still copying both), one paraphrase call for the two sentences
    gen, llm = _gen([copy, still, own, "Bananas are yellow."])
    (a,) = gen.generate(["Must fillet welds be continuous?"], [[segment, other]])
    assert len(llm.prompts) == 4
    assert llm.prompts[2] == PARAPHRASE_PROMPT.format(sentence=segment) and "continuous?" not in llm.prompts[2]
    assert a.citations == [("Fillet welds on stiffeners do not have to be continuous.", [1]), (other, [2])]
    assert a.fallbacks[-1] == ("generate: 2 sentence(s) still copied a segment: 1 paraphrased, 1 kept "
                               "(the paraphrase failed or changed it)")
    # a failed paraphrase call keeps the sentence; no copy, no paraphrase call
    gen, llm = _gen([copy, still, LLMError("server down"), LLMError("server down")])
    (a,) = gen.generate(["Must fillet welds be continuous?"], [[segment, other]])
    assert a.answer == f"{segment} {other}"
    fresh = json.dumps({"sentences": [{"text": "Flat welding is easiest.", "ids": [2]}]})
    gen, llm = _gen([fresh])
    (b,) = gen.generate(["Which position is easiest?"], [[segment, other]])
    assert len(llm.prompts) == 1 and b.fallbacks == ()


def test_answer_schema_floor_of_sentences_is_capped_by_the_budget():
    """[cir] min_sentences is the schema's minItems, never above what max_new_tokens holds (a
    sentence is budgeted at its 300 characters, one token each, + 24 tokens of JSON and ids)."""
    from preqrag.systems.cir.generator import cir_answer_schema

    def bounds(*args):
        items = cir_answer_schema(*args)["properties"]["sentences"]
        return items["minItems"], items["maxItems"]

    assert bounds(8, 1024, 2) == (2, 3)
    assert bounds(8, 1024) == (1, 3)
    assert bounds(8, 512, 3) == (1, 1)
    # [cir] max_sentences caps the most (the cir preset: 2); the same schema as a budget holding two
    assert bounds(8, 1024, 2, 2) == (2, 2)
    assert cir_answer_schema(8, 1024, 2, 2) == cir_answer_schema(8, 700, 2)
    assert bounds(8, 512, 1, 2) == (1, 1)  # the budget's cap still applies


def test_repeats_are_dropped_sentence_by_sentence():
    """A looping CIR reply repeats a sentence inside a later JSON item: each sentence is said once,
    and an item left empty goes with its citations."""
    from preqrag.systems.cir.generator import drop_repeats

    items = [("Fish are dried. They are also canned.", [1]), ("They are also canned. Salt keeps them.", [2]),
             ("Fish are dried.", [3])]
    assert drop_repeats(items) == [("Fish are dried. They are also canned.", [1]), ("Salt keeps them.", [2])]


def test_text_answer_format_parses_bracketed_ids_per_sentence():
    """[cir] answer_format = "text": the text before each citation group is one cited item,
    out-of-range ids are removed and counted (§2.2), a full stop after the group ends the item."""
    from preqrag.systems.cir.generator import parse_cir_text, text_draft

    p = parse_cir_text("Answer: The tower is 330 m tall [1][3]. It opened in 1889 [2, 9]. It is iron.", 3)
    assert p.sentences == [("The tower is 330 m tall.", [1, 3]), ("It opened in 1889.", [2]), ("It is iron.", [])]
    assert p.removed == 1 and p.fallback is None
    assert text_draft(p.sentences) == "The tower is 330 m tall [1][3]. It opened in 1889 [2]. It is iron."
    assert parse_cir_text(" [1] ", 3).fallback == "no sentence"
    # the generator: unconstrained call (no schema), the text prompt, the copy rewrite in the same format
    segment = ("Not all fillet welds need to be continuous, especially when welding stiffeners with full-length "
               "fillet welds.")
    gen, llm = _gen([f"{segment} [1]", "Stiffener fillets can be intermittent [1]."], answer_format="text")
    (a,) = gen.generate(["Must fillet welds be continuous?"], [[segment, "Flat is easy."]])
    assert "in brackets" in llm.prompts[0] and '"sentences"' not in llm.prompts[0]
    assert f"{segment[:-1]} [1]." in llm.prompts[1]  # the draft, as bracketed text
    assert a.citations == [("Stiffener fillets can be intermittent.", [1])]
    assert a.fallbacks == ("generate: 1 copied sentence(s): answer rewritten",)
