"""The pipeline's slot logic with fake components (no models): which query goes to which
retriever, fusion of primary and extra queries, the rerank chain, sub-query interleaving,
trace keys, failure isolation, and programming errors surfacing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from preqrag.core.config import load_config
from preqrag.components.fusion import UnionFusion
from preqrag.run.pipeline import Pipeline
from preqrag.core.records import Classification, QueryPlan, Question, Ranking, SubQuery


class FakeRetriever:
    """Returns, for query ``q``, the passages ``<prefix>:<q>:1..3``; records its calls."""

    name = "fake"
    learned_models = ()

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.calls: list[list[str]] = []

    def search(self, queries, k, filters=None):
        assert filters is None  # no plan here filters
        self.calls.append(list(queries))
        return [Ranking(ids=[f"{self.prefix}:{q}:{i}" for i in range(1, 4)], scores=[3.0, 2.0, 1.0])
                for q in queries]


class FakeClassifier:
    name = "fake"

    def classify(self, questions):
        return [Classification(question_type="multi" if "and" in q else "single", classifier="fake")
                for q in questions]


class FakeRewriter:
    """single: rewrites 'S(q)'/'D(q)' plus the original as an extra query; multi: two sub-questions."""

    name = "fake"

    def plan(self, questions, types):
        plans = []
        for q, t in zip(questions, types):
            if t == "single":
                subs = [SubQuery(text=q, sparse=f"S({q})", dense=f"D({q})", extra=[q])]
            else:
                subs = [SubQuery(text=p, sparse=p, dense=p) for p in q.split(" and ")]
            plans.append(QueryPlan(question_type=t, rewriter="fake", sub_queries=subs))
        return plans

    def retriever(self, retriever):
        return retriever


class ReverseStep:
    """A rerank step that reverses each ranking and keeps 4; fails on demand."""

    name = "reverse"
    stage = "reverse"
    trace_key = "reversed"

    def __init__(self, fail_on: str | None = None, error: type[Exception] = ValueError):
        self.fail_on, self.error = fail_on, error

    def rerank(self, queries, rankings, text_of):
        if self.fail_on is not None and self.fail_on in queries:
            raise self.error(f"cannot rerank {self.fail_on!r}")
        for r in rankings:
            for pid in r.ids:
                assert text_of(pid) == f"text of {pid}"
        return [Ranking(ids=r.ids[::-1][:4], scores=list(range(4, 0, -1))[:len(r.ids[:4])]) for r in rankings]


def _pipeline(step: ReverseStep) -> tuple[Pipeline, FakeRetriever, FakeRetriever]:
    sparse, dense = FakeRetriever("bm25"), FakeRetriever("dense")
    index = SimpleNamespace(sparse=sparse, dense=dense, encoder=None, text=lambda pid: f"text of {pid}")
    cfg = load_config(None, {"generator": {"context_top_k": 2}})
    return Pipeline(index, cfg, FakeClassifier(), FakeRewriter(), UnionFusion(), [step], generator=None), sparse, dense


def test_queries_fusion_chain_merge_and_trace():
    p, sparse, dense = _pipeline(ReverseStep())
    t_single, t_multi = p.retrieve([Question(id=1, question="q1"), Question(id=2, question="a and b")])
    # one call per retriever for the whole batch: primary query, then extra queries, per sub-query
    assert sparse.calls == [["S(q1)", "q1", "a", "b"]]
    assert dense.calls == [["D(q1)", "q1", "a", "b"]]
    # fusion: round-robin over [bm25 primary, dense primary, bm25 extra, dense extra]
    merged = t_single.rankings["merged"][0].ids
    assert merged[:4] == ["bm25:S(q1):1", "dense:D(q1):1", "bm25:q1:1", "dense:q1:1"]
    assert len(merged) == 12
    # the trace keeps each retriever's primary list, the fused list and each step's output
    assert t_single.rankings["sparse"][0].ids[0] == "bm25:S(q1):1"
    assert set(t_single.rankings) == {"sparse", "dense", "merged", "reversed", "reranked", "final"}
    assert t_single.rankings["reversed"][0].ids == merged[::-1][:4]
    # multi: each sub-question reranked on its own, then interleaved round-robin
    a, b = (r.ids for r in t_multi.rankings["reversed"])
    assert t_multi.rankings["final"][0].ids[:4] == [a[0], b[0], a[1], b[1]]
    assert t_multi.context_ids == [a[0], b[0]]
    assert set(t_multi.seconds) >= {"classify", "rewrite", "sparse", "dense", "fusion", "reverse"}


class NoPassageIn(FakeRetriever):
    """A filter on ``topic`` keeps no passage: such a query finds nothing."""

    def search(self, queries, k, filters=None):
        self.calls.append((list(queries), filters))
        return [Ranking() if f else Ranking(ids=[f"{self.prefix}:{q}:1"], scores=[1.0])
                for q, f in zip(queries, filters or [{}] * len(queries))]


class RoutingRewriter(FakeRewriter):
    """FakeRewriter whose single questions are filtered to a topic, searched as DoTA's rewriter searches."""

    def plan(self, questions, types):
        plans = super().plan(questions, types)
        for p in plans:
            if p.question_type == "single":
                p.sub_queries[0] = p.sub_queries[0].model_copy(update={"filters": {"topic": ["Cooking"]}})
        return plans

    def retriever(self, retriever):
        from preqrag.systems.dota.search import UnfilteredFallback

        return UnfilteredFallback(retriever)


def test_a_filter_that_leaves_no_passage_is_searched_without_it_and_noted_in_the_plan():
    """The rewriter's retriever (DoTA's): a filtered query that found nothing is searched again without
    its filter, and the plan records it once per retriever; the pipeline copies the note by trace key."""
    sparse, dense = NoPassageIn("bm25"), NoPassageIn("dense")
    index = SimpleNamespace(sparse=sparse, dense=dense, encoder=None, text=lambda pid: f"text of {pid}")
    cfg = load_config(None, {"generator": {"context_top_k": 2}})
    p = Pipeline(index, cfg, FakeClassifier(), RoutingRewriter(), UnionFusion(), [], generator=None)
    t_single, t_multi = p.retrieve([Question(id=1, question="q1"), Question(id=2, question="a and b")])
    topic = {"topic": ["Cooking"]}
    assert sparse.calls == [(["S(q1)", "q1", "a", "b"], [topic, topic, {}, {}]), (["S(q1)", "q1"], None)]
    assert dense.calls[1] == (["D(q1)", "q1"], None)  # both filtered queries again, in one call
    assert t_single.rankings["sparse"][0].ids == ["bm25:S(q1):1"]
    assert t_single.fallbacks == [
        "sparse: no passage matches filters {'topic': ['Cooking']}; searched without them",
        "dense: no passage matches filters {'topic': ['Cooking']}; searched without them"]
    assert t_multi.fallbacks == [] and len(sparse.calls) == 2
    assert "fallback" not in t_single.rankings["sparse"][0].model_dump()  # never in the trace's JSON


def test_traces_record_the_trained_models_the_merge_and_the_retrievers_declare():
    """``Trace.learned_models``: the merge slot's, then each retriever's (through the rewriter's
    wrapper), each model once; none with the default components."""
    from preqrag.components.fusion import InterleaveMerge

    ranker = {"kind": "ranker", "path": "/m/ranker.json", "sha256": "r"}
    encoder = {"kind": "encoder", "path": "/m/enc", "sha256": "e"}

    class RankerMerge(InterleaveMerge):
        learned_models = (ranker,)

    cfg = load_config(None)
    plain, _, _ = _pipeline(ReverseStep())
    assert plain.learned_models == [] and plain.retrieve([Question(id=1, question="q")])[0].learned_models == []
    sparse, dense = FakeRetriever("bm25"), NoPassageIn("dense")
    sparse.learned_models = dense.learned_models = (encoder,)  # one model behind both: recorded once
    index = SimpleNamespace(sparse=sparse, dense=dense, encoder=None, text=lambda pid: f"text of {pid}")
    p = Pipeline(index, cfg, FakeClassifier(), RoutingRewriter(), UnionFusion(), [], generator=None,
                 merge=RankerMerge())
    assert p.learned_models == [ranker, encoder]
    (t,) = p.retrieve([Question(id=1, question="a and b")])
    assert t.learned_models == [ranker, encoder]


def test_derive_rebuilds_a_component_when_a_table_its_builder_read_changed():
    """The record of what each builder read (:func:`preqrag.components.registry.build`) decides what
    ``derive`` rebuilds, and a derived pipeline keeps the records of what it reused."""
    from preqrag.components.registry import Context, build

    sparse, dense = FakeRetriever("bm25"), FakeRetriever("dense")
    index = SimpleNamespace(sparse=sparse, dense=dense, encoder=None, text=lambda pid: f"text of {pid}")
    cfg = load_config(None, {"classifier": {"name": "rules"}, "rewriter": {"name": "none"},
                             "fusion": {"name": "rrf"}, "generator": {"name": "extractive"}, "rerank": {"chain": []}})
    ctx = Context(cfg, index)
    parts = {slot: build(slot, getattr(cfg, slot).name, ctx)
             for slot in ("classifier", "rewriter", "fusion", "generator", "merge")}
    base = Pipeline(index, cfg, parts["classifier"], parts["rewriter"], parts["fusion"], [], parts["generator"],
                    merge=parts["merge"], ctx=ctx)
    base.rerank_names = []
    d = base.derive({"fusion": {"rrf_k": 30}})
    assert d.fusion is not base.fusion and d.fusion.k == 30
    assert (d.classifier, d.rewriter, d.generator, d.merge) == (base.classifier, base.rewriter, base.generator,
                                                                base.merge)
    d2 = d.derive({"deadline": {"extractive_sentences": 1}})  # the extractive generator reads [deadline]
    assert d2.generator is not d.generator and d2.fusion is d.fusion and d2.merge is base.merge
    assert d2.derive({"merge": {"model": "unused.json"}}).merge is base.merge  # interleave reads no setting
    hand_made = Pipeline(index, cfg, parts["classifier"], parts["rewriter"], parts["fusion"], [], parts["generator"],
                         merge=parts["merge"])
    assert hand_made.derive({}).fusion is not parts["fusion"]  # no record of what it read: rebuilt


def test_a_failing_question_is_isolated_and_named():
    p, sparse, _ = _pipeline(ReverseStep(fail_on="bad"))
    outcomes = p.prepare([Question(id=1, question="good"), Question(id=2, question="bad"),
                          Question(id=3, question="fine")])
    assert [o.failure is None for o in outcomes] == [True, False, True]
    assert outcomes[1].failure.stage == "reverse" and "cannot rerank 'bad'" in outcomes[1].failure.error
    assert len(sparse.calls) == 1 + 3  # the batch once, then one question at a time


def test_a_programming_error_surfaces_without_retries():
    p, sparse, _ = _pipeline(ReverseStep(fail_on="bad", error=TypeError))
    with pytest.raises(TypeError, match="cannot rerank"):
        p.prepare([Question(id=1, question="good"), Question(id=2, question="bad")])
    assert len(sparse.calls) == 1  # not retried question by question


def test_cross_encoder_cap_per_document_reaches_further_down_the_ranking():
    """``[cross_encoder] max_per_document``: the depth candidates hold at most that many passages of
    one document, so more documents reach the cross-encoder for the same number of pairs."""
    from preqrag.components.reranking import CrossEncoderStep

    scored: list[list[str]] = []

    class ByLength:  # a fake cross-encoder: longer passage text scores higher
        def score(self, pairs):
            scored.append([p for _, p in pairs])
            return [float(len(p)) for _, p in pairs]

    ids = ["a#1", "a#2", "a#3", "b#1", "a#4", "c#1", "b#2", "d#1"]
    ranking = Ranking(ids=ids, scores=[float(-i) for i in range(len(ids))])
    text = {pid: "x" * (i + 1) for i, pid in enumerate(ids)}.__getitem__
    plain = CrossEncoderStep(ByLength(), depth=4)
    assert plain.head(ids) == ["a#1", "a#2", "a#3", "b#1"]
    capped = CrossEncoderStep(ByLength(), depth=4, max_per_document=1)
    assert capped.head(ids) == ["a#1", "b#1", "c#1", "d#1"]
    assert CrossEncoderStep(ByLength(), depth=5, max_per_document=2).head(ids) == ["a#1", "a#2", "b#1", "c#1", "b#2"]
    out = capped.rerank(["q"], [ranking], text)
    assert scored[-1] == [text(p) for p in ["a#1", "b#1", "c#1", "d#1"]]  # only the capped head is scored
    assert out[0].ids == ["d#1", "c#1", "b#1", "a#1"]  # best (longest text) first
    cfg = load_config(None, {"cross_encoder": {"max_per_document": 2}})
    assert cfg.cross_encoder.max_per_document == 2 and load_config(None).cross_encoder.max_per_document is None
