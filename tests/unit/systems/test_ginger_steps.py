"""GINGER preset (UiS-IAI@LiveRAG), its logic with fake LLMs: multi-query rewriting's parsing, plans
and fallbacks, sym-sum pairwise ordering, verbatim nuggets and numbered nugget replies. The models on
real smoke passages and an end-to-end run: tests/integration/test_ginger.py."""

from __future__ import annotations

import json

import numpy as np

from conftest import TEST_OVERRIDES
from preqrag.core.config import load_config
from preqrag.systems.ginger.nuggets import (MAX_NUGGETS_PER_PASSAGE, number_schema, numbered_passage,
                                            parse_number_reply, parse_nuggets)
from preqrag.systems.ginger.pairwise import PairwiseStep, pairwise_order, sym_sum
from preqrag.systems.ginger.rewriting import (ANSWER_SYSTEM, answer_max_tokens, REWRITE_SYSTEM, REWRITES_FORMAT,
                                              GingerRewriter, parse_rewrites)
from preqrag.core.records import Ranking

from fakes import HandlerLLM as ScriptedLLM, server_down as _fail


def _ginger_cfg(**over):
    """The ginger preset; nuggets from the (scripted) LLM unless ``nugget_detector`` is given."""
    return load_config(None, {**TEST_OVERRIDES, "ginger": {"nugget_detector": "llm", **over}}, pipeline="ginger")


# ------------------------------------------------------------------ 1. multi-query rewriting
Q = "How do coral reefs respond to rising ocean temperatures?"


def test_parse_rewrites_strict():
    reply = ("1. Coral bleaching caused by warm ocean water\n"
             "- \"Effects of marine heatwaves on coral reefs\"\n"
             "Query 3: How do coral reefs respond to rising ocean temperatures?\n"  # the question itself
             "original query: coral reefs\n"  # prompt echo
             "I'm here to help you understand coral reefs and warming.\n"  # assistant chatter
             "Bananas are yellow\n"  # unrelated
             "***\n"
             "Reef recovery after temperature stress\n"
             "Symbiotic algae loss in reefs under heat\n")
    got, rejected = parse_rewrites(reply, Q, 3, answer="Corals bleach when algae leave under heat stress.")
    assert got == ["Coral bleaching caused by warm ocean water", "Effects of marine heatwaves on coral reefs",
                   "Reef recovery after temperature stress"]
    assert rejected == ["duplicate", "echo", "chatter", "unrelated"]  # '***' is blank once stripped
    assert parse_rewrites("", Q, 3) == ([], ["empty"])
    assert parse_rewrites("coral " * 80, Q, 3) == ([], ["too long"])


def test_rewriter_plan_keeps_original_and_fuses():
    llm = ScriptedLLM({ANSWER_SYSTEM: lambda u: "Corals bleach and may die when water stays too warm.",
                       REWRITE_SYSTEM: lambda u: json.dumps({"rewrites": [
                           "coral bleaching warm water", "reef mortality heat stress", "ocean warming coral recovery"]})})
    cfg = _ginger_cfg()
    (plan,) = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan([Q], ["single"])
    (sub,) = plan.sub_queries
    assert sub.sparse == sub.dense == sub.text == Q
    assert sub.extra == ["coral bleaching warm water", "reef mortality heat stress", "ocean warming coral recovery"]
    assert plan.fallbacks == [] and plan.rewriter == "ginger"
    # App. B.1: the answer goes into the rewrite prompt, with the number of rewrites
    rewrite_user = [u for s, u, _ in llm.calls if s == REWRITE_SYSTEM][0]
    assert "Rewrite and return 3 query rewrites" in rewrite_user
    assert f"original query: {Q}\nanswer: Corals bleach and may die when water stays too warm.\n" in rewrite_user
    assert rewrite_user.endswith(REWRITES_FORMAT.format(n=3))  # the reply is constrained to 3 rewrites
    assert [m for s, _, m in llm.calls if s == ANSWER_SYSTEM] == [cfg.rewriter.max_new_tokens]  # 48 < 160
    # with the default budget (256) the answer's reply stops at what its used words take
    big = load_config(None, {**TEST_OVERRIDES, "rewriter": {"max_new_tokens": 256}}, pipeline="ginger")
    GingerRewriter(llm, big.ginger, big.rewriter).plan([Q], ["single"])
    assert [m for s, _, m in llm.calls if s == ANSWER_SYSTEM][-1] == answer_max_tokens(big.ginger.answer_words) < 256
    # answer_words: the rewrite prompt gets only the answer's first words, the reply budget shrinks with them
    short = load_config(None, {**TEST_OVERRIDES, "rewriter": {"max_new_tokens": 256}, "ginger": {"answer_words": 4}},
                        pipeline="ginger")
    GingerRewriter(llm, short.ginger, short.rewriter).plan([Q], ["single"])
    assert [m for s, _, m in llm.calls if s == ANSWER_SYSTEM][-1] == answer_max_tokens(4) < answer_max_tokens(100)
    assert "\nanswer: Corals bleach and may\n" in [u for s, u, _ in llm.calls if s == REWRITE_SYSTEM][-1]

    cfg = _ginger_cfg(query_mode="concatenate")
    (plan,) = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan([Q], ["multi"])
    (sub,) = plan.sub_queries
    assert sub.extra == [] and sub.sparse == sub.dense
    assert sub.sparse == (f"{Q} coral bleaching warm water {Q} reef mortality heat stress "
                          f"{Q} ocean warming coral recovery")


def test_rewriter_fallbacks():
    cfg = _ginger_cfg()
    # both calls fail: the original question alone, two fallbacks recorded
    (plan,) = GingerRewriter(ScriptedLLM({ANSWER_SYSTEM: _fail, REWRITE_SYSTEM: _fail}),
                             cfg.ginger, cfg.rewriter).plan([Q], ["single"])
    assert plan.sub_queries[0].extra == [] and plan.sub_queries[0].sparse == Q
    assert [f.split(":")[0] for f in plan.fallbacks] == ["answer", "rewrites"]
    # the answer fails, junk rewrites: still a plan; the rewrite prompt got an empty answer
    llm = ScriptedLLM({ANSWER_SYSTEM: _fail, REWRITE_SYSTEM: lambda u: json.dumps(
        {"rewrites": ["Sure! Here are the queries:", "!!!"]})})
    (plan,) = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan([Q], ["single"])
    assert plan.sub_queries[0].extra == []
    assert plan.fallbacks[1] == "rewrites: 0 of 3 usable (rejected: chatter, unparsable)"
    # a backend that ignored the schema: the reply does not parse, and that is recorded
    llm = ScriptedLLM({ANSWER_SYSTEM: _fail, REWRITE_SYSTEM: lambda u: "coral heat stress"})
    (plan,) = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan([Q], ["single"])
    assert plan.fallbacks[1].startswith("rewrites: 0 of 3 usable (rejected: unparsable JSON")
    # one good line of three
    llm = ScriptedLLM({ANSWER_SYSTEM: lambda u: "", REWRITE_SYSTEM: lambda u: json.dumps({"rewrites": ["coral heat stress"]})})
    plans = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan([Q, Q], ["single", "multi"])
    for plan in plans:  # GINGER treats single- and multi-document questions alike
        assert plan.sub_queries[0].extra == ["coral heat stress"]
        assert plan.fallbacks == ["answer: empty", "rewrites: 1 of 3 usable"]
    # a huge question is cut for the LLM and the cut recorded
    long_q = "coral " * 2000
    (plan,) = GingerRewriter(ScriptedLLM({}), cfg.ginger, cfg.rewriter).plan([long_q], ["single"])
    assert plan.sub_queries[0].sparse == long_q
    assert any("question cut" in f for f in plan.fallbacks)


# ------------------------------------------------------------------ 2. pairwise reranking
def test_sym_sum_and_pairwise_order():
    # p(0>1)=0.9, p(1>0)=0.2: s0 = 0.9 + (1-0.2) = 1.7, s1 = 0.2 + (1-0.9) = 0.3
    assert np.allclose(sym_sum(2, [(0, 1), (1, 0)], np.array([0.9, 0.2])), [1.7, 0.3])

    class LongerWins:
        name = "longer"

        def prefer(self, triples):
            return np.array([1.0 if len(a) > len(b) else 0.0 for _, a, b in triples])

    order, scores = pairwise_order("q", ["aa", "a", "aaaa"], LongerWins())
    assert order == [2, 0, 1] and scores == [4.0, 2.0, 0.0]
    step = PairwiseStep(LongerWins(), top_k=3)
    texts = {"p1": "x", "p2": "xxx", "p3": "xx", "p4": "xxxxxxx", "p5": "y"}
    (out,) = step.rerank(["q"], [Ranking(ids=["p1", "p2", "p3", "p4", "p5"], scores=[5, 4, 3, 2, 1])],
                         texts.__getitem__)
    assert out.ids == ["p2", "p3", "p1", "p4", "p5"]  # head of 3 reordered, tail kept in place
    assert out.scores == sorted(out.scores, reverse=True)


# ------------------------------------------------------------------ 3. nuggets
PASSAGE = ("Coral bleaching happens when water is too warm.  Corals expel the algae living in their tissues. "
           "Reefs also support fisheries.")


def test_nuggets_are_verbatim_and_junk_is_dropped():
    reply = ("<START>Coral bleaching happens when water is too warm.</END>  Corals <START>expel the algae "
             "living in\ntheir tissues</END>. <START>Corals turn purple in winter</END> <START>...</END> "
             "<START>Coral bleaching happens when water is too warm.</END>")
    got, rejected = parse_nuggets(reply, PASSAGE, 2)
    assert [n.text for n in got] == ["Coral bleaching happens when water is too warm.",
                                     "expel the algae living in their tissues"]
    for n in got:
        assert PASSAGE[n.start:n.end] == n.text and n.passage == 2  # the passage's own text
    assert rejected == ["not in passage", "unparsable", "duplicate"]
    assert parse_nuggets(PASSAGE, PASSAGE, 0) == ([], ["no tags"])
    assert parse_nuggets("  ", PASSAGE, 0) == ([], ["empty"])


def test_numbered_nugget_replies_name_verbatim_sentences():
    passage = "Rudy Perpich was governor. He served in 1976. He was born in Hibbing, Minnesota."
    shown, excerpts = numbered_passage(passage)
    assert shown.splitlines() == ["[1] Rudy Perpich was governor.", "[2] He served in 1976.",
                                  "[3] He was born in Hibbing, Minnesota."]
    schema = number_schema(len(excerpts))
    assert schema["properties"]["nuggets"]["items"]["enum"] == [1, 2, 3]
    assert schema["properties"]["nuggets"]["maxItems"] == MAX_NUGGETS_PER_PASSAGE
    found, rejected = parse_number_reply('{"nuggets": [3, 1, 3, 7, true]}', excerpts, passage, 4)
    assert [n.text for n in found] == ["He was born in Hibbing, Minnesota.", "Rudy Perpich was governor."]
    assert all(passage[n.start:n.end] == n.text and n.passage == 4 for n in found)
    assert sorted(rejected) == ["duplicate", "no such sentence", "no such sentence"]
    assert parse_number_reply("", excerpts, passage, 0) == ([], ["empty"])
    assert parse_number_reply('{"nuggets": []}', excerpts, passage, 0) == ([], ["no nuggets"])


def test_numbered_passage_offers_the_sentences_with_the_question_words():
    passage = ("The Eiffel Tower is in Paris. Many tourists visit. The tower is 330 metres tall. Food is sold "
               "nearby. Gustave Eiffel's company built the tower.")
    shown, excerpts = numbered_passage(passage, "How tall is the Eiffel tower, and who built it?", 3)
    assert excerpts == ["The Eiffel Tower is in Paris.", "The tower is 330 metres tall.",
                        "Gustave Eiffel's company built the tower."]  # passage order, renumbered
    assert shown.splitlines()[1] == "[2] The tower is 330 metres tall."
    assert numbered_passage(passage, "tower", 9) == numbered_passage(passage)  # fewer sentences than the cap
    found, _ = parse_number_reply('{"nuggets": [2]}', excerpts, passage, 0)
    assert passage[found[0].start:found[0].end] == "The tower is 330 metres tall."
