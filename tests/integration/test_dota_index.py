"""The ``dota`` preset on the real small index: topic assignment, namespace-restricted dense and BM25
search, BM25 pruning against the index's own BM25 scores (§2.3), the routing's facets, and the
routing with SmolLM2's real votes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TEST_OVERRIDES
from preqrag.core.config import load_config
from preqrag.systems.dota import BM25PruneStep, load_topics
from preqrag.systems.dota.topics import FILE, TOPIC_NAMES
from preqrag.index.embedded import Index
from preqrag.core.records import Ranking
from fakes import ReplyLLM as ScriptedLLM, is_route as _is_route, rewritten, vote


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


# ---------------------------------------------------------------- configuration checks, routing
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
