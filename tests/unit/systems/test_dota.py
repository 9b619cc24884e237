"""The ``dota`` preset (DoTA-RAG, SIGIR 2025 LiveRAG): strict ``\\boxed{}`` parsing and vote
counting with a fake LLM (§2.2), the typo-fixing rewrite's fallbacks (§2.1), topic assignment
and namespace-restricted dense search on the real small index, BM25 pruning against the
index's own BM25 scores (§2.3), context aggregation (§2.4) and an end-to-end ``preqrag run``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TEST_OVERRIDES, config_toml, run_cli
from preqrag.core.config import GeneratorConfig, load_config
from preqrag.systems.dota.settings import DotaConfig
from preqrag.systems.dota import BM25PruneStep, DotaRewriter, NamespaceRouter, count_votes, load_topics, parse_boxed
from preqrag.systems.dota.generation import PROMPT, DotaGenerator, aggregate, build_dota_prompt
from preqrag.systems.dota.planning import REWRITE_PROMPT, ROUTE_PROMPT, parse_typo_rewrite
from preqrag.systems.dota.topics import FILE, TOPIC_NAMES, TOPICS
from preqrag.index.embedded import Index
from preqrag.core.records import LiveRAGAnswer, Ranking, Trace
from preqrag.core.contracts import LLMError

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


class ScriptedLLM:
    """A fake LLM: ``reply(messages, temperature, seed)`` gives each reply; records calls."""

    name = "fake"

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[dict] = []

    def chat_many(self, requests, *, max_tokens, temperature=0.0, seed=None, schema=None, **options):
        self.calls.append({"n": len(requests), "temperature": temperature, "seed": seed, "max_tokens": max_tokens,
                           "schema": schema, **options})
        seeds = seed if isinstance(seed, list) else [seed] * len(requests)
        return [self.reply(m, temperature, s) for m, s in zip(requests, seeds)]


def _is_route(messages):
    return messages[-1]["content"].startswith("Q: ")


def vote(*names):
    """A structured routing vote (the JSON the schema allows)."""
    return json.dumps({"about": "the question", "namespaces": list(names)})


def rewritten(text):
    return json.dumps({"rewritten": text})


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
    class NoSeed:
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


# ---------------------------------------------------------------- real small index
@pytest.fixture(scope="module")
def dota_cfg():
    return load_config(None, TEST_OVERRIDES, pipeline="dota")


@pytest.fixture(scope="module")
def index(small_index, dota_cfg):
    return Index.open(small_index, dota_cfg)


def test_topics_assigned_per_document_and_stored(index):
    path = index.path / FILE
    path.unlink(missing_ok=True)
    a = load_topics(index)
    assert path.exists() and len(a.labels) == len(index.passage_ids) and a.names == TOPIC_NAMES
    by_doc: dict[str, set[int]] = {}
    for pid, label in zip(index.passage_ids, a.labels):
        by_doc.setdefault(index.passages[pid].doc_id, set()).add(int(label))
    assert all(len(v) == 1 for v in by_doc.values())  # a document lives in one namespace
    assert sum(a.counts().values()) == len(index.passage_ids)
    mtime = path.stat().st_mtime_ns
    again = load_topics(index)  # read back, not recomputed
    assert path.stat().st_mtime_ns == mtime and (again.labels == a.labels).all()
    assert len({int(x) for x in a.labels}) >= 3  # 18 varied web documents: several topics


def test_topics_command(small_index):
    import typer
    from typer.testing import CliRunner

    from preqrag.systems.dota.commands import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer's subcommand form
    r = CliRunner().invoke(app, ["topics", "--index", str(small_index)])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["file"].endswith(FILE) and sum(out["passages_per_topic"].values()) == out["n_passages"]
    assert CliRunner().invoke(app, ["topics", "--index", str(small_index / "missing")]).exit_code == 2


def test_routed_dense_search_stays_inside_the_namespaces(index):
    a = load_topics(index)  # topics.npz: the index reads its topic facet from it when a filter names it
    dense = index.dense
    counts = a.counts()
    routed = sorted((n for n in counts if counts[n]), key=lambda n: counts[n])[:2]  # two smallest non-empty
    allowed = {pid for pid, lab in zip(index.passage_ids, a.labels) if a.names[lab] in routed}
    query = "what are the health effects"
    (filtered, unfiltered) = dense.search([query, query], 100, filters=[{"topic": routed}, {}])
    assert filtered.ids and set(filtered.ids) <= allowed
    assert len(filtered) == min(100, len(allowed))
    # exactly the best of the allowed passages, in order (exact search over them only)
    full = dense.search([query], len(index.passage_ids))[0]
    assert filtered.ids == [pid for pid in full.ids if pid in allowed][:len(filtered)]
    expected = [s for pid, s in zip(full.ids, full.scores) if pid in allowed][:len(filtered)]
    assert filtered.scores == pytest.approx(expected, rel=1e-5)
    assert set(unfiltered.ids) - allowed  # the unfiltered query does leave the namespaces
    assert a.fraction(routed) == pytest.approx(len(allowed) / len(index.passage_ids)) and a.fraction(routed) < 1
    with pytest.raises(ValueError, match="unknown topic"):
        dense.search([query], 5, filters=[{"topic": ["Cooking"]}])
    with pytest.raises(ValueError, match="no facet"):
        dense.search([query], 5, filters=[{"format": ["FAQ"]}])


def test_bm25_prune_scores_equal_the_index_bm25(index, small_corpus):
    step = BM25PruneStep(index.sparse, keep=20)
    for q in [x["question"] for x in small_corpus[2]]:
        candidates = index.dense.search([q], 100)[0]
        pruned = step.rerank([q], [candidates], index.text)[0]
        assert len(pruned) == min(20, len(candidates)) and set(pruned.ids) <= set(candidates.ids)
        assert pruned.scores == sorted(pruned.scores, reverse=True)
        everything = index.sparse.search([q], len(index.passage_ids))[0]  # the index's BM25, all matches
        bm25 = dict(zip(everything.ids, everything.scores))
        for pid, s in zip(pruned.ids, pruned.scores):
            assert s == pytest.approx(bm25.get(pid, 0.0), rel=1e-5)
        best = sorted((bm25.get(pid, 0.0) for pid in candidates.ids), reverse=True)[:20]
        assert pruned.scores == pytest.approx(best, rel=1e-5)


def test_bm25_prune_query_without_indexed_terms_keeps_dense_order(index):
    step = BM25PruneStep(index.sparse, keep=3)
    ranking = Ranking(ids=index.passage_ids[:5], scores=[5, 4, 3, 2, 1])
    for q in ["the of and", "zzqxj vvkkw"]:  # only stopwords / unknown terms
        (out,) = step.rerank([q], [ranking], index.text)
        assert out.ids == index.passage_ids[:3] and out.scores == [0.0, 0.0, 0.0]
    assert step.rerank(["anything"], [Ranking()], index.text) == [Ranking()]


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
    class LLM:
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
    class LLM:
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


# ---------------------------------------------------------------- configuration checks, end to end
def test_preset_settings_and_routing_needs_dense_retrieval(small_index):
    from preqrag.run.pipeline import Pipeline

    cfg = load_config(None, pipeline="dota")
    assert cfg.rewriter.name == "dota" and cfg.generator.name == "dota"
    assert cfg.retrieval.use_sparse  # routed hybrid: BM25 inside the routed parts too (a deviation from §2.3)
    assert cfg.retrieval.dense_top_k == 100 and cfg.rerank.chain == ["bm25-prune", "cross-encoder"]
    assert cfg.dota.prune_keep == 20 and cfg.cross_encoder.depth == 20 and cfg.generator.context_top_k == 10
    assert cfg.dota.route_votes == 4 and cfg.dota.route_top_n == 2 and cfg.dota.route_temperature > 0
    assert cfg.dota.search_question  # the question beside the rewrite (a deviation, docs/preset-dota.md)
    no_dense = load_config(None, {"retrieval": {"use_dense": False}}, pipeline="dota")
    with pytest.raises(ValueError, match="dense retrieval"):
        Pipeline.from_config(small_index, no_dense, llm=ScriptedLLM(lambda m, t, s: ""))


def test_routed_hybrid_restricts_bm25_and_dense_to_the_chosen_parts(small_index, small_corpus):
    """The preset's ``retrieval.use_sparse = true`` with routing (a deviation from the paper's
    dense-only first stage): the plan's namespace filter restricts the BM25 list as well as the
    dense one."""
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    cfg = load_config(None, TEST_OVERRIDES, pipeline="dota")
    llm = ScriptedLLM(lambda m, t, s: vote("Health") if _is_route(m) else rewritten(m[-1]["content"].split("\n")[-1]))
    pipeline = Pipeline.from_config(small_index, cfg, llm=llm)
    q = small_corpus[2][3]
    (trace,) = pipeline.retrieve([Question(id=q["id"], question=q["question"])])
    parts = trace.plan.sub_queries[0].filters["namespace"]
    with np.load(small_index / FILE) as z:
        part_of, part_names = z["parts"], [str(n) for n in z["part_names"]]
    allowed = {pid for pid, p in zip(pipeline.index.passage_ids, part_of) if part_names[int(p)] in parts}
    sparse, dense = trace.rankings["sparse"][0].ids, trace.rankings["dense"][0].ids
    assert sparse and dense and set(sparse) | set(dense) <= allowed
    assert len(allowed) < len(pipeline.index.passage_ids)  # the routing did leave passages out


def test_routing_reads_the_facets_from_the_index_files_and_changes_no_shared_index(small_index, small_corpus):
    """The routed rewriter changes nothing the index's users share: it writes the topic assignment
    file, and the index reads its facets from that file, again when the file changes (another
    ``route_parts``, as a derived pipeline may ask)."""
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    cfg = load_config(None, TEST_OVERRIDES, pipeline="dota")
    llm = ScriptedLLM(lambda m, t, s: vote("Health") if _is_route(m) else rewritten(m[-1]["content"].split("\n")[-1]))
    pipeline = Pipeline.from_config(small_index, cfg, llm=llm)
    facets = pipeline.index.sparse.facets
    assert pipeline.index.dense.facets is facets
    q = Question(id="q", question=small_corpus[2][3]["question"])
    pipeline.rewriter.plan([q.question], ["single"])
    assert "namespace" not in facets  # planning touched no facet of the shared index
    (trace,) = pipeline.retrieve([q])
    first = facets.facets["namespace"]
    assert set(trace.plan.sub_queries[0].filters["namespace"]) <= set(first[0])
    pipeline.retrieve([q])
    assert facets.facets["namespace"] is first  # read once while the file stays as it is
    fewer = pipeline.derive({"dota": {"route_parts": 1}})  # one part per topic: the file is rewritten
    (trace,) = fewer.retrieve([q])
    assert facets.facets["namespace"] is not first  # re-read from the new file
    parts = trace.plan.sub_queries[0].filters["namespace"]
    with np.load(small_index / FILE) as z:
        part_of, part_names = z["parts"], [str(n) for n in z["part_names"]]
        assert int(z["parts_per_topic"]) == 1 and facets.facets["namespace"][0] == part_names
    allowed = {pid for pid, p in zip(fewer.index.passage_ids, part_of) if part_names[int(p)] in parts}
    assert set(trace.rankings["dense"][0].ids) <= allowed
    load_topics(pipeline.index, parts_per_topic=cfg.dota.route_parts)  # leave the default file for the others


def test_dota_preset_end_to_end(small_index, small_corpus, tmp_path):
    """``preqrag run`` with ``pipeline = "dota"`` and the bundled models: schema-valid LiveRAG
    answers, traces with every slot (routing may fall back with a 135M LLM: recorded)."""
    questions = small_corpus[2][3:4]  # a multi-document question (DoTA plans every question alike)
    qpath = tmp_path / "q.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    cfg = tmp_path / "dota.toml"
    cfg.write_text(config_toml({
        **TEST_OVERRIDES, "pipeline": "dota", "cross_encoder": {"depth": 20, "max_length": 128}, "generator": {"max_new_tokens": 24},
        "dota": {"route_max_new_tokens": 48, "rewrite_max_new_tokens": 48, "context_tokens": 600}}),
        encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", str(qpath), "--index", str(small_index),
                        "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [LiveRAGAnswer.model_validate_json(line) for line in out.read_text().splitlines()]
    traces = {str(t.id): t for t in (Trace.model_validate_json(line) for line in
                                     out.with_name("answers.traces.jsonl").read_text().splitlines())}
    assert len(answers) == 1 and len(traces) == 1
    with np.load(small_index / FILE) as z:
        topics, part_of, part_names = z["labels"], z["parts"], [str(n) for n in z["part_names"]]
    ids = Index.open(small_index, load_config(cfg)).passage_ids
    row = {pid: i for i, pid in enumerate(ids)}
    assert len(topics) == len(ids)
    for a in answers:
        t = traces[str(a.id)]
        assert a.final_prompt.startswith("You are a helpful assistant.\n\nContext:\n")
        assert a.final_prompt.endswith(f"\n\nQuestion:\n{a.question}")
        assert 1 <= len(a.passages) <= 10 and len(a.answer.split()) <= 300
        assert set(t.rankings) == {"sparse", "dense", "merged", "pruned", "reranked", "final"}
        assert all(len(r) <= 100 for r in t.rankings["dense"])
        assert all(len(r) <= 20 for r in t.rankings["pruned"] + t.rankings["reranked"])
        assert t.context_ids == t.rankings["final"][0].ids[:10]
        assert set(t.seconds) >= {"classify", "rewrite", "sparse", "dense", "fusion", "bm25-prune", "rerank",
                                  "generate"}
        assert t.plan.rewriter == "dota" and len(t.plan.sub_queries) == 1
        assert all(f.split(":")[0].split(" vote")[0] in {"rewrite", "route", "classify", "dense", "generate"} for f in t.fallbacks)
        # the votes are constrained to the 24 names: they parse (no 'no valid vote' fallback)
        assert not [f for f in t.fallbacks if "unparsable" in f or "no valid vote" in f], t.fallbacks
        parts = t.plan.sub_queries[0].filters["namespace"]
        routing = t.plan.routing
        assert parts and routing is not None and routing.namespaces == parts
        assert routing.voted and set(routing.voted) <= set(TOPIC_NAMES)  # the votes are kept in the trace
        assert {p.rsplit(" #", 1)[0] for p in parts} <= set(TOPIC_NAMES)
        sizes = np.bincount(part_of, minlength=len(part_names)) / len(part_of)
        assert 0 < routing.fraction <= max(0.15, sizes.max()) + 1e-6  # route_budget, or the one best part
        unfiltered = [f for f in t.fallbacks if f.startswith("dense: no passage matches filters")]
        if not unfiltered:  # the BM25 and dense candidates come from the routed parts only
            allowed = {part_names.index(n) for n in parts}
            assert all(int(part_of[row[pid]]) in allowed
                       for key in ("sparse", "dense") for pid in t.rankings[key][0].ids)


def test_choose_parts_fills_the_budget_best_first():
    from preqrag.systems.dota.topics import choose_parts

    sizes = np.array([0.10, 0.30, 0.05, 0.04, 0.51])
    scores = np.array([0.9, 0.8, 0.7, 0.1, 0.95])
    assert choose_parts(scores, sizes, 0.15) == [4]  # the best part is searched even when larger
    assert choose_parts(scores, sizes, 0.7) == [4, 0, 2, 3]  # 0.30 does not fit after 0.61: skipped
    assert choose_parts(np.array([0.5, 0.9, 0.1, 0.2, 0.3]), sizes, 0.2) == [1]
    assert choose_parts(scores, np.array([0.0, 0.5, 0.0, 0.0, 0.5]), 1.0) == [4, 1]  # empty parts never


def test_routing_with_real_llm_votes_keeps_the_gold_documents(index, dota_cfg, small_corpus):
    """The DoTA plan with SmolLM2's schema-constrained votes on the small index: each of 3 smoke
    questions' gold documents have passages in the parts it searches, within route_budget; the
    passages' topics, the parts and the votes' choices are the one list of 24 names."""
    from preqrag.systems.dota import RoutedDotaRewriter
    from preqrag.systems.dota.planning import route_schema
    from preqrag.systems.dota.topics import PART_FACET
    from preqrag.models.llm import load_llm

    cfg = dota_cfg.dota.model_copy(update={"route_votes": 2, "route_max_new_tokens": 48,
                                           "rewrite_max_new_tokens": 48, "route_budget": 0.3})
    rewriter = RoutedDotaRewriter(load_llm(dota_cfg.llm), cfg, index, route=True)
    from preqrag.core.records import QueryPlan, SubQuery

    qs = small_corpus[2][:1] + small_corpus[2][3:5]  # 1 single- and 2 multi-document questions
    texts = [q["question"] for q in qs]
    routes = rewriter.router.route(texts)  # the real votes (the typo-fixing rewrite is tested end to end)
    assert all(names for names, _, _ in routes), routes
    plans = rewriter.route_plans([QueryPlan(question_type="single", rewriter="dota", llm_outputs=raw,
                                            sub_queries=[SubQuery(text=t, sparse=t, dense=t)])
                                  for t, (_, _, raw) in zip(texts, routes)])
    a = rewriter.topics
    assert a.names == TOPIC_NAMES == route_schema(TOPIC_NAMES)["properties"]["namespaces"]["items"]["enum"]
    assert [a.names[t] for t in a.part_topic] == [n.rsplit(" #", 1)[0] for n in a.part_names]
    for q, p, (names, _, _) in zip(qs, plans, routes):
        assert set(names) <= set(p.routing.voted)  # the votes, read back from the raw replies
        chosen = p.sub_queries[0].filters[PART_FACET]
        assert p.routing.namespaces == chosen and p.routing.fraction <= 0.3 + 1e-6
        searched = {a.part_names.index(n) for n in chosen}
        for gold in q["gold_doc_ids"]:
            rows = [i for i, pid in enumerate(index.passage_ids) if index.passages[pid].doc_id == gold]
            assert {int(a.parts[i]) for i in rows} & searched, (q["question"], gold, p.routing)
