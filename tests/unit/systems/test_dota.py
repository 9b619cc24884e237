"""The ``dota`` preset (DoTA-RAG, SIGIR 2025 LiveRAG), its logic with fake LLMs: the paper's prompts,
strict ``\\boxed{}`` parsing and vote counting (§2.2), the typo-fixing rewrite's fallbacks (§2.1),
context aggregation (§2.4), the generator and the choice of parts. On the real small index:
tests/integration/test_dota_index.py; an end-to-end ``preqrag run``: tests/e2e/test_dota_run.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from preqrag.core.config import GeneratorConfig
from preqrag.systems.dota.settings import DotaConfig
from preqrag.systems.dota import DotaRewriter, NamespaceRouter, count_votes, parse_boxed
from preqrag.systems.dota.generation import PROMPT, DotaGenerator, aggregate, build_dota_prompt
from preqrag.systems.dota.planning import REWRITE_PROMPT, ROUTE_PROMPT, parse_typo_rewrite
from preqrag.systems.dota.topics import TOPIC_NAMES, TOPICS
from preqrag.core.contracts import LLMError
from fakes import FakeLLMBase, ReplyLLM as ScriptedLLM, is_route as _is_route, rewritten, vote

NS = TOPIC_NAMES


# ---------------------------------------------------------------- prompts and taxonomy
def test_prompts_are_the_papers_figures():
    assert REWRITE_PROMPT.startswith("You are a helpful assistant. Your task is to rewrite sentences by correcting typos")
    assert ROUTE_PROMPT.format(question="Q?", choices_str="A, B") == (
        "Q: Q?\nAvailable namespaces: A, B\nStep1: Identify what the question is about.\n"
        "Step2: Choose only the most relevant namespaces.\nStep3: Return final result in \\boxed{}.")
    assert build_dota_prompt("why?", ["p1 ", "p2"]) == "You are a helpful assistant.\n\nContext:\np1\n\np2\n\nQuestion:\nwhy?"
    assert "{passages}" in PROMPT and "{query}" in PROMPT
    assert len(TOPICS) == 24 and "Science, Math & Technology" in TOPICS and "Finance & Business" in TOPICS


# ---------------------------------------------------------------- \boxed{} parsing, strict
@pytest.mark.parametrize("reply, expected", [
    ("Step1: health.\nStep3: \\boxed{Health}", ["Health"]),
    ("\\boxed{Health, Politics}", ["Health", "Politics"]),
    ("\\boxed{['Health', 'Finance & Business']}", ["Health", "Finance & Business"]),
    ("\\boxed{ health ,  FINANCE  &  business }", ["Health", "Finance & Business"]),  # case, spacing
    ("\\boxed{Science, Math & Technology, Health}", ["Science, Math & Technology", "Health"]),  # comma in a name
    ("\\boxed{Health, Health}", ["Health"]),
    ("first \\boxed{Games} then final \\boxed{Religion}", ["Religion"]),  # the final result
])
def test_parse_boxed_accepts_exact_names(reply, expected):
    assert parse_boxed(reply, NS) == (expected, None)


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"),
    ("   \n", "empty"),
    ("The answer is Health.", "no boxed"),
    ("//boxed{Health}", "no boxed"),
    ("\\boxed{}", "empty boxed"),
    ("\\boxed{ , }", "empty boxed"),
    ("\\boxed{Finance}", "unknown namespace: finance"),  # no abbreviations
    ("\\boxed{Health, Cooking}", "unknown namespace: cooking"),  # one unknown item spoils the vote
    ("\\boxed{Science}", "unknown namespace: science"),  # part of a comma-holding name
    ("\\boxed{Helth}", "unknown namespace: helth"),  # no fuzzy matching
])
def test_parse_boxed_rejects(reply, reason):
    assert parse_boxed(reply, NS) == (None, reason)


def test_count_votes_top_two_ties_to_first_named():
    votes = [["Health", "Politics"], ["Politics"], ["Health", "Health", "Religion"], ["Religion", "Politics"]]
    assert count_votes(votes, 2) == ["Politics", "Health"]  # 3 votes, then 2 (Health named before Religion)
    assert count_votes([["Games"]], 2) == ["Games"]
    assert count_votes([], 2) == []


def test_router_votes_with_distinct_seeds_and_counts_them():
    votes = {0: vote("Health", "Politics"), 1: vote("Politics"), 2: vote("health"), 3: vote("Religion")}
    llm = ScriptedLLM(lambda m, t, s: votes[s])
    (names, fallbacks, raw), = NamespaceRouter(llm, DotaConfig()).route(["Is coffee healthy?"])
    assert names == ["Health", "Politics"]  # 2 votes each; Health named first
    assert fallbacks == [] and len(raw) == 4
    # one call holds every vote, each with its own seed (a batching backend prefills the prompt once)
    assert [c["seed"] for c in llm.calls] == [[0, 1, 2, 3]]
    assert all(c["temperature"] == 0.6 and c["n"] == 4 for c in llm.calls)
    # every vote declares the schema: 1-3 of the 24 namespaces
    enum = llm.calls[0]["schema"]["properties"]["namespaces"]["items"]["enum"]
    assert enum == list(TOPIC_NAMES) and llm.calls[0]["schema"]["properties"]["namespaces"]["maxItems"] == 3


def test_router_fallbacks_junk_and_llm_errors():
    def reply(m, t, s):
        return LLMError("down") if s == 0 else {1: "", 2: vote("Cooking"), 3: "\\boxed{Health}"}[s]

    (names, fallbacks, raw), = NamespaceRouter(ScriptedLLM(reply), DotaConfig()).route(["q"])
    assert names == []
    assert fallbacks == ["route vote 1: llm error: down", "route vote 2: empty",
                         "route vote 3: unknown namespace: Cooking",
                         "route vote 4: unparsable JSON: Expecting value at char 0",
                         "route: no valid vote (all namespaces searched)"]
    # one valid vote is enough; the others are recorded
    (names, fallbacks, _), = NamespaceRouter(ScriptedLLM(lambda m, t, s: vote("Games") if s == 3 else "junk"),
                                             DotaConfig()).route(["q"])
    assert names == ["Games"] and len(fallbacks) == 3


def test_router_with_a_backend_that_ignores_options_still_votes():
    class NoSeed(FakeLLMBase):
        name = "noseed"

        def __init__(self):
            self.n = 0

        def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
            self.n += 1
            return [vote("Travel & Tourism")] * len(requests)

    llm = NoSeed()
    (names, _, _), = NamespaceRouter(llm, DotaConfig()).route(["q"])
    assert names == ["Travel & Tourism"] and llm.n == 1


# ---------------------------------------------------------------- typo-fixing rewrite
@pytest.mark.parametrize("reply, question, expected", [
    ("What is the Rajun Cajun Crawfish Festival?", "wut iz rajun cajun crawfsh festivl", "What is the Rajun Cajun Crawfish Festival?"),
    ('Rewritten: "What are some side effects of nicotine gum?"\nExtra', "wut r sum side affects of nicotine gum",
     "What are some side effects of nicotine gum?"),
    ("What is HDX?", "whta is hdx", "What is HDX?"),
])
def test_typo_rewrite_accepted(reply, question, expected):
    assert parse_typo_rewrite(reply, question, 3.0) == (expected, None)


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"), ("\n  \n", "empty"), ("?!...", "unparsable"),
    (" ".join(["word"] * 40), "too long"), ("The capital of France is Paris.", "unrelated"),
])
def test_typo_rewrite_rejected(reply, reason):
    assert parse_typo_rewrite(reply, "wut r sum side affects of nicotine gum", 3.0) == (None, reason)


def test_rewriter_plan_with_fallbacks():
    q_ok, q_junk, q_err = "wut r sum side affects of nicotine gum", "how tall is mount everest", "who wrote hamlet"

    def reply(m, t, s):
        if _is_route(m):
            return vote("Health") if "nicotine" in m[-1]["content"] else vote("nonsense")
        assert m[0]["content"].startswith(REWRITE_PROMPT) and t == 0.0
        return {q_ok: rewritten("What are some side effects of nicotine gum?"), q_junk: "",
                q_err: LLMError("timeout")}[m[-1]["content"]]

    plans = DotaRewriter(ScriptedLLM(reply), DotaConfig()).plan([q_ok, q_junk, q_err], ["single"] * 3)
    p0, p1, p2 = plans
    assert p0.sub_queries[0].dense == p0.sub_queries[0].sparse == "What are some side effects of nicotine gum?"
    assert p0.sub_queries[0].filters == {"topic": ["Health"]} and p0.fallbacks == []
    assert p0.sub_queries[0].extra == [q_ok]  # the question searched beside its rewrite, in the same namespaces
    assert json.loads(p0.llm_outputs["rewrite"])["rewritten"].startswith("What") and "route 4" in p0.llm_outputs
    assert p1.sub_queries[0].dense == q_junk and p1.sub_queries[0].filters == {}
    assert p1.sub_queries[0].extra == []  # the rewrite fell back to the question: searched once
    assert p1.fallbacks[0] == "rewrite: empty" and p1.fallbacks[-1].startswith("route: no valid vote")
    assert p2.sub_queries[0].dense == q_err and p2.fallbacks[0] == "rewrite: llm error: timeout"
    # routing off: no route calls, no filters
    llm = ScriptedLLM(lambda m, t, s: vote("Health") if _is_route(m) else rewritten(m[-1]["content"]))
    (p,) = DotaRewriter(llm, DotaConfig(), route=False).plan([q_ok], ["single"])
    assert p.sub_queries[0].filters == {} and len(llm.calls) == 1
    # the paper's rewrite alone
    (p,) = DotaRewriter(ScriptedLLM(reply), DotaConfig(search_question=False)).plan([q_ok], ["single"])
    assert p.sub_queries[0].dense.startswith("What are") and p.sub_queries[0].extra == []


# ---------------------------------------------------------------- context aggregation, generation
def words(n: int, w: str = "word") -> str:
    return " ".join([w] * n)


def count(text: str) -> int:
    return len(text.split())


def test_aggregate_truncates_proportionally():
    passages = [words(300, "a"), words(100, "b"), words(50, "c")]
    text, cuts = aggregate("why?", passages, count=count, budget=90, room=10_000)
    kept = [count(p) for p in text.split("Context:\n", 1)[1].split("\n\nQuestion:")[0].split("\n\n")]
    assert kept == [60, 20, 10]  # each passage keeps 90/450 = 20 % of its tokens
    assert cuts == ["passage 1: 300 -> 60 tokens", "passage 2: 100 -> 20 tokens", "passage 3: 50 -> 10 tokens"]
    # the window caps the budget: room for the whole prompt is what limits here
    text, _ = aggregate("why?", passages, count=count, budget=8000, room=120)
    assert count(text) <= 120
    # under budget: nothing cut
    text, cuts = aggregate("why?", ["x y", "z"], count=count, budget=8000, room=10_000)
    assert cuts == [] and text == build_dota_prompt("why?", ["x y", "z"])
    with pytest.raises(ValueError):
        aggregate("q", ["p"], count=count, budget=10, room=3)


def test_generator_caps_words_and_returns_llm_errors():
    class LLM(FakeLLMBase):
        name = "fake"
        context_window = 2048
        count_tokens = staticmethod(count)

        def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
            assert temperature == 0.0 and all(len(r) == 1 and r[0]["role"] == "user" for r in requests)
            return [" ".join(f"word{i}" for i in range(500)), LLMError("boom")]  # long, not looping

    gen = DotaGenerator(LLM(), GeneratorConfig(max_new_tokens=400, max_words=300, context_tokens=0),
                        DotaConfig(context_tokens=100))
    g1, g2 = gen.generate(["q1", "q2"], [[words(200), words(200)], ["short"]])
    assert len(g1.answer.split()) == 300
    assert g1.final_prompt.startswith("You are a helpful assistant.\n\nContext:\n")
    assert g1.truncations == ["generate: passage 1: 200 -> 50 tokens", "generate: passage 2: 200 -> 50 tokens"]
    assert isinstance(g2.answer, LLMError) and g2.truncations == []
    # a looping answer is repaired (extractive from passage 1) and the fallback recorded
    (g3,) = DotaGenerator(type("Loop", (LLM,), {"chat_many": lambda self, r, **k: [words(500)]})(),
                          GeneratorConfig(context_tokens=0), DotaConfig(context_tokens=100)).generate(
        ["q1"], [["Alpha beta. Gamma."]])
    assert g3.fallbacks == ("generate: degenerate answer (repeated phrase); extractive answer from passage [1] used",)
    assert g3.answer == "Alpha beta. Gamma."


def test_generator_answers_from_the_answer_bearing_sentences():
    """With [generator] context_tokens the Fig. 5 prompt holds each passage's sentences that bear
    on the question (preqrag.components.selection), and the trace says what was kept."""
    class LLM(FakeLLMBase):
        name = "fake"
        context_window = 2048
        count_tokens = staticmethod(count)
        prompts: list[str] = []

        def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
            self.prompts += [r[0]["content"] for r in requests]
            return ["The Rhine is 1,230 km long."] * len(requests)

    filler = " ".join(f"Sentence {i} talks about weather and trains." for i in range(30))
    passages = [filler + " The Rhine river is 1,230 km long.", filler]
    llm = LLM()
    (g,) = DotaGenerator(llm, GeneratorConfig(context_tokens=40, sentence_scorer="words"),
                         DotaConfig()).generate(["How long is the Rhine river?"], [passages])
    assert "The Rhine river is 1,230 km long." in llm.prompts[0]
    assert count(llm.prompts[0]) < count(build_dota_prompt("How long is the Rhine river?", passages)) // 4
    assert g.truncations and all(t.startswith("generate: selected passage ") and t.endswith("by question words")
                                 for t in g.truncations)


def test_choose_parts_fills_the_budget_best_first():
    from preqrag.systems.dota.topics import choose_parts

    sizes = np.array([0.10, 0.30, 0.05, 0.04, 0.51])
    scores = np.array([0.9, 0.8, 0.7, 0.1, 0.95])
    assert choose_parts(scores, sizes, 0.15) == [4]  # the best part is searched even when larger
    assert choose_parts(scores, sizes, 0.7) == [4, 0, 2, 3]  # 0.30 does not fit after 0.61: skipped
    assert choose_parts(np.array([0.5, 0.9, 0.1, 0.2, 0.3]), sizes, 0.2) == [1]
    assert choose_parts(scores, np.array([0.0, 0.5, 0.0, 0.0, 0.5]), 1.0) == [4, 1]  # empty parts never
