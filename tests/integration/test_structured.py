"""Structured LLM output (issue 22) on the real SmolLM2: every step that parses LLM output declares a
schema that the llama.cpp backend turns into a grammar, the OpenAI-compatible backend sends it as
``response_format`` to a real llama.cpp server, and a server that refuses it is one clear error.
The schema plumbing without a model: tests/unit/models/test_structured_output.py."""

from __future__ import annotations

import json

import pytest

from preqrag.core.config import GeneratorConfig, LLMConfig, RewriterConfig
from preqrag.systems.dota.settings import DotaConfig
from preqrag.systems.cir import CIRConfig
from preqrag.models.llm.structured import grammar_text, response_format
from preqrag.core.contracts import UnsupportedFeature

MULTI = "How do welding positions and hand techniques compare for optimal welding results?"
SINGLE = "What is the boiling point of water at sea level?"


# ---------------------------------------------------------------- every schema with the real SmolLM2
@pytest.fixture(scope="module")
def smollm2():
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    llm = LlamaCppLLM(LLMConfig())
    llm.warm_up()
    return llm


def test_every_schema_parses_with_real_smollm2(smollm2, small_index, small_corpus, test_config):
    """PreQRAG rewrites and sub-questions, the LLM classifier, DoTA's routing votes and rewrite,
    GINGER's rewrites and nugget tags and CIR's cited answer: no parse fallback with the 135M model."""
    from preqrag.components.classifiers.llm import LLMClassifier
    from preqrag.systems.dota.planning import DotaRewriter
    from preqrag.systems.cir.generator import CIRGenerator, parse_cir_answer
    from preqrag.systems.ginger.nuggets import parse_nugget_reply
    from preqrag.systems.ginger.rewriting import GingerRewriter
    from preqrag.index.embedded import Index
    from preqrag.systems.preqrag.rewriting import PreQRAGRewriter

    def parse_failures(fallbacks):
        return [f for f in fallbacks if "unparsable" in f or f.endswith(": empty") or "llm error" in f]

    plans = PreQRAGRewriter(smollm2, RewriterConfig()).plan([SINGLE, MULTI], ["single", "multi"])
    assert not [f for p in plans for f in parse_failures(p.fallbacks)], [p.fallbacks for p in plans]
    assert [c.fallback for c in LLMClassifier(smollm2).classify([SINGLE, MULTI])] == [None, None]

    (dota,) = DotaRewriter(smollm2, DotaConfig(route_votes=2)).plan([SINGLE], ["single"])
    assert not parse_failures(dota.fallbacks), dota.fallbacks
    assert dota.sub_queries[0].filters["topic"]  # two parsable votes: a route

    cfg = test_config.ginger.model_copy(update={"n_rewrites": 2})
    (gplan,) = GingerRewriter(smollm2, cfg, RewriterConfig(max_new_tokens=64)).plan([SINGLE], ["single"])
    assert not [f for f in gplan.fallbacks if "unparsable" in f], gplan.fallbacks

    index = Index.open(small_index, test_config)
    q = small_corpus[2][0]["question"]
    (r,) = index.sparse.search([q], 3)
    passages = [index.text(p) for p in r.ids]
    from preqrag.systems.ginger.nuggets import NUGGET_FORMAT, NUGGET_SYSTEM, NUGGET_USER, nugget_schema

    schema, budget = nugget_schema(passages[0][:1200], smollm2.count_tokens, 256)
    reply = smollm2.chat([{"role": "system", "content": NUGGET_SYSTEM},
                          {"role": "user", "content": NUGGET_USER.format(query=q, passage=passages[0][:1200])
                           + NUGGET_FORMAT}], max_tokens=budget, schema=schema)
    nuggets, rejected = parse_nugget_reply(reply, passages[0], 0)
    assert nuggets and rejected == [] and all(passages[0][n.start:n.end] == n.text for n in nuggets)

    gen = CIRGenerator(smollm2, GeneratorConfig(max_new_tokens=160, max_passage_tokens=96), CIRConfig())
    (g,) = gen.generate([q], [passages])
    assert not [f for f in g.fallbacks if "unparsable" in f], g.fallbacks
    assert g.citations and g.removed_citations == 0
    parsed = parse_cir_answer(smollm2.chat([{"role": "user", "content": g.final_prompt}], max_tokens=160,
                                           schema=_cir_schema(len(passages), 160)), len(passages))
    assert parsed.fallback is None and parsed.removed == 0


def _cir_schema(n, tokens):
    from preqrag.systems.cir.generator import cir_answer_schema

    return cir_answer_schema(n, tokens)


# ---------------------------------------------------------------- OpenAI-compatible backend, real server
class Recorder:
    """An httpx request hook: keeps the JSON body of every chat request the client sends."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def __call__(self, request):
        if request.url.path.endswith("/chat/completions"):
            self.bodies.append(json.loads(request.content))


def _recording_llm(url: str, monkeypatch, **cfg):
    import openai

    from preqrag.models.llm.openai_backend import OpenAICompatibleLLM

    rec = Recorder()
    llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"{url}/v1", model="smollm2", **cfg))

    def new_client():
        return openai.AsyncOpenAI(base_url=llm.cfg.base_url, api_key="sk-no-key", timeout=llm.cfg.timeout_s,
                                  max_retries=0,
                                  http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [rec]}))

    monkeypatch.setattr(llm, "_new_client", new_client)
    return llm, rec


def test_openai_backend_sends_response_format_to_real_llama_server(llama_server, monkeypatch):
    from preqrag.components.classifiers.llm import CHOICES, messages_for
    from preqrag.systems.preqrag.rewriting import DECOMPOSE_PROMPT, decompose_schema, parse_sub_questions_reply

    # llama-cpp-python's server reads the json_object form (with the schema); it refuses json_schema
    llm, rec = _recording_llm(llama_server, monkeypatch, structured_output="json_object")
    try:
        choices = llm.chat_many([messages_for(SINGLE), messages_for(MULTI)], max_tokens=8, schema=list(CHOICES))
        assert all(c in CHOICES for c in choices), choices  # unwrapped from {"choice": ...}
        reply = llm.chat([{"role": "user", "content": DECOMPOSE_PROMPT.format(question=MULTI, n=2)}],
                         max_tokens=256, schema=decompose_schema(2))
        value = json.loads(reply)  # the server enforced the schema
        assert isinstance(value["sub_questions"], list) and len(value["sub_questions"]) == 2
        items, why = parse_sub_questions_reply(reply, MULTI, 2, 3.0)
        assert items is not None or why in {"repeated sub-questions", "unrelated", "too long"}
    finally:
        llm.close()
    assert len(rec.bodies) == 3
    for body in rec.bodies:
        assert body["response_format"]["type"] == "json_object"
        assert body["seed"] == 0 and body["temperature"] == 0.0
    assert rec.bodies[0]["response_format"]["schema"]["properties"]["choice"]["enum"] == list(CHOICES)
    assert rec.bodies[2]["response_format"]["schema"] == decompose_schema(2)
    # the OpenAI form, for vLLM / SGLang / llama-server / OpenAI
    assert response_format(["a"])["json_schema"]["schema"]["properties"]["choice"]["enum"] == ["a"]


def test_dota_votes_carry_distinct_seeds_over_http(llama_server, monkeypatch):
    from preqrag.systems.dota.planning import NamespaceRouter

    llm, rec = _recording_llm(llama_server, monkeypatch, top_k=20, structured_output="json_object")
    try:
        (names, fallbacks, raw), = NamespaceRouter(llm, DotaConfig(route_votes=4, route_seed=7)).route([MULTI])
    finally:
        llm.close()
    assert sorted(b["seed"] for b in rec.bodies) == [7, 8, 9, 10]  # one call, one seed per request
    # top_k is no OpenAI parameter: sent in the body for servers that read it (llama.cpp, vLLM)
    assert all(b["temperature"] == 0.6 and b["top_k"] == 20 for b in rec.bodies)
    assert not [f for f in fallbacks if "unparsable" in f], fallbacks
    assert names and len(raw) == 4


def test_server_refusing_response_format_is_one_clear_error(llama_server):
    """llama-cpp-python's server refuses OpenAI's ``json_schema`` form (HTTP 422): the step
    stops with one UnsupportedFeature (the pipeline lets it surface) naming the setting to
    change, instead of a parse fallback on every question."""
    from preqrag.models.llm.openai_backend import OpenAICompatibleLLM
    from preqrag.systems.preqrag.rewriting import PreQRAGRewriter

    llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"{llama_server}/v1", model="smollm2",
                                        structured_output="json_schema", max_retries=0))
    try:
        with pytest.raises(UnsupportedFeature, match="refused structured output.*structured_output = 'json_object'"):
            PreQRAGRewriter(llm, RewriterConfig()).plan([MULTI], ["multi"])
    finally:
        llm.close()


RUDY = ("Chairman and Presidents of all Major Labels have been quoted saying: “Rudy’s got this bicultural "
        "understanding of the music” ” It’s not about language, it’s about culture, and Rudy seems to understand "
        "that very, very well”. He has his thumb on the pulse of the Latin movement. Mauricio Abaroa former SVP and "
        "Executive Director of the Latin Academy of Recording Arts and Sciences, says: “If we analyze the work he’s "
        "done in the past years, we find the songs and productions that are the most representative of the "
        "contemporary Latin music movement” Music Executive and Producer Ron Fair, former President of A&M Geffen "
        "Records says about Rudy’s work with Christina Aguilera: “From a creative standpoint and from a musical "
        "standpoint, Rudy Perez was the best possible Songwriter/Producer to bring Christina into the Spanish "
        "language world”. Music Moguls like Simon Cowell call upon Rudy to work with his biggest artists like IL Divo.")


def test_nugget_reply_with_typographic_quotes_closes_inside_its_budget(smollm2):
    """A bench corpus passage full of curly quotes (dev question on Rudy Pérez): its nugget reply
    ran out of budget mid-excerpt when the grammar spelled “ as a \\u201c escape (3 of 50 GINGER
    questions, issue 22). The grammar now keeps non-ASCII raw and the budget bounds odd token
    choices, so the constrained reply closes (parses) and every kept excerpt is verbatim."""
    from preqrag.systems.ginger.nuggets import NUGGET_FORMAT, NUGGET_SYSTEM, NUGGET_USER, nugget_schema, parse_nugget_reply

    q = "Which Latin music figure has more Grammy awards - Intocable or Rudy Pérez?"
    schema, budget = nugget_schema(RUDY, smollm2.count_tokens, 512)  # [ginger] nugget_max_new_tokens
    grammar = grammar_text(schema)
    assert "“" in grammar and "\\u201c" not in grammar
    reply = smollm2.chat([{"role": "system", "content": NUGGET_SYSTEM},
                          {"role": "user", "content": NUGGET_USER.format(query=q, passage=RUDY) + NUGGET_FORMAT}],
                         max_tokens=budget, schema=schema)
    assert isinstance(json.loads(reply)["nuggets"], list), reply  # closed: no parse fallback
    nuggets, rejected = parse_nugget_reply(reply, RUDY, 0)
    # what parses may still make little sense (a repeated excerpt is dropped as a duplicate)
    assert nuggets and set(rejected) <= {"duplicate"}, (reply, rejected)
    assert all(RUDY[n.start:n.end] == n.text for n in nuggets)


def test_numbered_nugget_reply_parses_on_the_real_model(smollm2):
    """GINGER's default nugget call (``nugget_reply = "numbers"``): the passage as numbered
    sentences, the reply their numbers under an integer-enum grammar; it closes inside its 32-token
    budget and names sentences of the passage (verbatim spans)."""
    from preqrag.systems.ginger.nuggets import (MAX_NUGGETS_PER_PASSAGE, NUGGET_SYSTEM, NUGGET_USER,
                                                NUMBER_REPLY_TOKENS, NUMBERED_FORMAT, number_schema,
                                                numbered_passage, parse_number_reply)

    q = "Which Latin music figure has more Grammy awards - Intocable or Rudy Pérez?"
    shown, excerpts = numbered_passage(RUDY)
    reply = smollm2.chat([{"role": "system", "content": NUGGET_SYSTEM},
                          {"role": "user", "content": NUGGET_USER.format(query=q, passage=shown)
                           + NUMBERED_FORMAT.format(k=MAX_NUGGETS_PER_PASSAGE)}],
                         max_tokens=NUMBER_REPLY_TOKENS, schema=number_schema(len(excerpts)))
    numbers = json.loads(reply)["nuggets"]
    assert numbers and all(isinstance(n, int) and 1 <= n <= len(excerpts) for n in numbers), reply
    nuggets, rejected = parse_number_reply(reply, excerpts, RUDY, 0)
    assert nuggets and set(rejected) <= {"duplicate"}, (reply, rejected)
    assert all(RUDY[n.start:n.end] == n.text for n in nuggets)


def test_nugget_budget_holds_the_longest_reply_the_grammar_allows(smollm2):
    """The grammar cannot forbid a repeated excerpt, and SmolLM2 repeats a long one: on the bench the
    same Rudy Pérez passage was listed twice and cut at the budget, which covered the k longest
    *distinct* excerpts (1 of 50 GINGER questions after the quote mend). The budget now holds k copies
    of the longest excerpt, as the grammar spells it, however many excerpts the passage has."""
    from preqrag.systems.ginger.nuggets import NUGGETS_KEY, nugget_schema
    from preqrag.models.llm.structured import _enum_spelling

    long_first = RUDY[RUDY.index("Mauricio"):RUDY.index("Records says")] + "Records says so. He sings. IL Divo agrees."
    for passage, limit in ((long_first, 512), (RUDY, 512), (RUDY, 256)):
        schema, budget = nugget_schema(passage, smollm2.count_tokens, limit)
        assert budget <= limit
        items = schema["properties"][NUGGETS_KEY]
        enum = items["items"]["enum"]
        longest = max(enum, key=lambda e: smollm2.count_tokens(_enum_spelling(e)))
        worst = '{"%s": [%s]}' % (NUGGETS_KEY, ", ".join([_enum_spelling(longest)] * items["maxItems"]))
        assert smollm2.count_tokens(worst) <= budget, (limit, items["maxItems"], budget)
        json.loads(worst)
