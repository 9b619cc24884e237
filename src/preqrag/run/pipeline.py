"""The pipeline: a fixed sequence of slots, each filled by components chosen by name.

Slots, in order (PreQRAG §2; other presets fill them differently, see
:mod:`preqrag.core.presets`):

1. **plan**: classify (single/multi, §2.1) and rewrite/decompose (§2.2) into a
   :class:`~preqrag.core.records.QueryPlan` of sub-queries;
2. **retrieve**: every retriever (BM25, dense) on every query of every sub-query
   (``sparse``/``dense`` texts, plus ``extra`` queries), one batched call per retriever;
3. **fuse**: each sub-query's lists into one ranking (union or RRF);
4. **rerank chain**: the steps of ``[rerank] chain`` in order
   (:class:`~preqrag.core.contracts.RerankStep`, e.g. the cross-encoder);
5. **merge** (``[merge] name``): a multi-sub-query question's rankings interleaved round-robin
   (``interleave``), or candidate documents ranked by a trained model (``learned``);
6. **context**: the ``generator.context_top_k`` head;
7. **generate**: the grounded answer (prompt fitted to the LLM's window).

A question that carries its own pre-ranked ``candidates`` (a ragnarok request) is only
classified, skipping the rewrite and slots 2-6, when ``[run] use_given_candidates`` is on
(the ``cir`` preset): its context is the top ``generator.context_top_k`` candidates in their
given order (:mod:`preqrag.components.candidates`), and its trace says ``candidates = "given"``.

Every slot's output is in the :class:`~preqrag.core.records.Trace` (``rankings`` under the
component's trace key: ``sparse``, ``dense``, ``merged``, ``reranked``, ``final``), so
``preqrag eval`` measures any slot. A :class:`Pipeline` answers a batch at a time, so every
slot batches across questions. Failures: a stage that fails on data or a model call
raises :class:`~preqrag.core.contracts.StageError`; the batch is then retried question by question
so that one bad question never loses the others. Programming errors
(:data:`~preqrag.core.contracts.PROGRAMMING_ERRORS`) are not retried: they surface at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..components.candidates import has_candidates, read_candidates
from ..components.citations import numbers_to_ids
from ..components.registry import Context, build, tables_of
from ..core.config import PipelineConfig, renamed_tables
from ..core.records import (Citation, Classification, Failure, LiveRAGAnswer, LiveRAGPassage, QueryPlan, Question,
                      Ranking, StageBatch, SubQuery, Trace)
from ..core.contracts import (LLM, PROGRAMMING_ERRORS, Classifier, Fusion, Generated, Generator, LLMError, Merger,
                     RerankStep, Retriever, Rewriter, StageError)
from ..retrieval.bm25 import BM25Retriever


def _isolated(items: list, run_batch: Callable[[list], list["Outcome"]],
              question_of: Callable[[Any], Question]) -> list["Outcome"]:
    """``run_batch(items)``; if a stage fails (:class:`StageError`), retry item by item so
    that one bad question never loses the others. A single item that fails becomes a
    failure Outcome naming the error and the stage. Other exceptions (bugs) propagate."""
    try:
        return run_batch(items)
    except StageError as e:
        if len(items) > 1:
            return [o for x in items for o in _isolated([x], run_batch, question_of)]
        q = question_of(items[0])
        return [Outcome(q, failure=Failure(id=q.id, question=q.question, error=str(e), stage=e.stage))]


def _run_stage(stage: str, fn: Callable[[], Any], seconds: dict[str, float] | None = None) -> Any:
    """``fn()``, timed into ``seconds[stage]``; a data or model-call error becomes a
    :class:`StageError` naming ``stage``; programming errors propagate unchanged."""
    t = time.perf_counter()
    try:
        return fn()
    except PROGRAMMING_ERRORS:
        raise
    except StageError:
        raise
    except Exception as e:
        raise StageError(stage, e) from e
    finally:
        if seconds is not None:
            seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t


@dataclass
class Outcome:
    """Result for one question: an answer and its trace, or a failure."""

    question: Question
    answer: LiveRAGAnswer | None = None
    trace: Trace | None = None
    failure: Failure | None = None


def _named_chain(ctx: Context, reuse: list[tuple[str, RerankStep]] | None = None,
                 unchanged: Callable[[str], bool] | None = None) -> list[tuple[str, RerankStep]]:
    """``(name, step)`` of ``[rerank] chain`` (steps that are off left out); a step in ``reuse``
    with the same name whose settings are ``unchanged`` is kept instead of being rebuilt."""
    pool = list(reuse or [])
    out = []
    for name in ctx.cfg.rerank.chain:
        old = next((i for i, (n, _) in enumerate(pool) if n == name), None)
        if old is not None and unchanged is not None and unchanged(name):
            out.append(pool.pop(old))
            continue
        step = build("rerank", name, ctx)
        if step is not None:
            out.append((name, step))
    return out


def retrievers_of(cfg: PipelineConfig, index, ctx: Context) -> list[tuple[str, Retriever, int, str]]:
    """The first-stage retrievers of a pipeline, the one place they come from: ``(trace key,
    retriever, top-k, the sub-query field it searches)`` for BM25 (``retrieval.use_sparse``: the
    index's ``sparse``, ``sparse_top_k``, the BM25 rewrite), dense retrieval (``use_dense`` and an
    index with vectors: ``dense``, ``dense_top_k``, the dense rewrite) and each registered
    ``retrieval.extra`` retriever (``dense_top_k``, the dense rewrite), in that order. A BM25
    retriever opened with other ``[bm25]`` query-time settings than ``cfg``'s (a derived
    pipeline's ``prf``) is used with ``cfg``'s (``BM25Retriever.with_settings``)."""
    r = cfg.retrieval
    out: list[tuple[str, Retriever, int, str]] = []
    if r.use_sparse:
        sparse = index.sparse
        if isinstance(sparse, BM25Retriever) and sparse.cfg != cfg.bm25:
            sparse = sparse.with_settings(cfg.bm25)
        out.append(("sparse", sparse, r.sparse_top_k, "sparse"))
    if r.use_dense and index.dense is not None:
        out.append(("dense", index.dense, r.dense_top_k, "dense"))
    out += [(name, build("retriever", name, ctx), r.dense_top_k, "dense") for name in r.extra]
    return out


class Pipeline:
    """The slot sequence over an opened index (:class:`~preqrag.index.embedded.Index`, or a
    :class:`~preqrag.index.milvus.MilvusIndex`).

    Args:
        index: the index to retrieve from.
        cfg: the configuration.
        classifier, rewriter, fusion, rerank_chain (possibly empty), generator: the
            components; :meth:`from_config` builds them from ``cfg`` through the registry
            (:mod:`preqrag.components.registry`).
        llm: the LLM shared by the components that need one (loaded once, at
            :meth:`warm_up` or first use).
        merge: the merge slot (:class:`~preqrag.core.contracts.Merger`; default ``interleave``).
        ctx: the builders' :class:`~preqrag.components.registry.Context` (its model pool is shared by
            :meth:`derive`); default: a new one over ``index``, ``cfg`` and ``llm``.

    ``learned_models`` (recorded in every trace): the identities of the models trained on the
    user's questions that the merge slot and the retrievers declare (their ``learned_models``), in
    that order, each once.
    """

    def __init__(self, index, cfg: PipelineConfig, classifier: Classifier, rewriter: Rewriter,
                 fusion: Fusion, rerank_chain: list[RerankStep], generator: Generator,
                 llm: LLM | None = None, merge: Merger | None = None, *, ctx: Context | None = None):
        self.index = index
        self.cfg = cfg
        self.classifier = classifier
        self.rewriter = rewriter
        self.fusion = fusion
        self.rerank_chain = list(rerank_chain)
        self.generator = generator
        self.llm = llm
        self.ctx = ctx if ctx is not None else Context(cfg, index, llm)
        self.retrievers = [(key, rewriter.retriever(r), k, field)  # searched as the plans' rewriter says
                           for key, r, k, field in retrievers_of(cfg, index, self.ctx)]
        self.rerank_names: list[str] | None = None  # registry names of rerank_chain's steps (None: unknown)
        self.merge = merge if merge is not None else build("merge", "interleave", self.ctx)
        self.learned_models: list[dict[str, str]] = []  # recorded in traces (preqrag.learned.guard)
        for component in (self.merge, *(r for _, r, _, _ in self.retrievers)):
            self.learned_models += [m for m in component.learned_models if m not in self.learned_models]

    @classmethod
    def from_config(cls, index_dir: str | Path | None, cfg: PipelineConfig, llm: LLM | None = None) -> "Pipeline":
        """Open the index and build every component named in ``cfg`` (no weights load yet).

        Args:
            llm: an LLM to use instead of the configured one (shared by all LLM stages).

        Raises:
            IndexOpenError: index missing or built with another embedder.
            ValueError: an unknown component name (naming the field and the valid names), or
                components that cannot work with this index or configuration.
        """
        from ..index.backends import open_index

        index = open_index(index_dir, cfg)
        ctx = Context(cfg, index, llm)
        ctx.get_llm()
        parts = {slot: build(slot, getattr(getattr(cfg, slot), "name"), ctx)
                 for slot in ("classifier", "rewriter", "fusion", "generator", "merge")}
        chain = _named_chain(ctx)
        pipe = cls(index, cfg, parts["classifier"], parts["rewriter"], parts["fusion"], [s for _, s in chain],
                   parts["generator"], ctx.llm, merge=parts["merge"], ctx=ctx)
        pipe.rerank_names = [n for n, _ in chain]
        return pipe

    def derive(self, overrides: dict, *, generator: Generator | None = None) -> "Pipeline":
        """A pipeline with some settings changed that shares this one's loaded models.

        Each component is rebuilt when a configuration table its builder read (recorded when it
        was built, :func:`preqrag.components.registry.build`) or its name changed, and reused
        otherwise (a component given to the constructor rather than built has no record: it is
        rebuilt); rebuilt components get their models from the same model pool
        (:meth:`preqrag.components.registry.Context.shared`), so a cross-encoder step re-made with a new
        ``cross_encoder.depth`` scores with the already loaded cross-encoder. The index (retrievers,
        embedder) is shared; the LLM too, unless ``[llm]`` changed. Used by
        :mod:`preqrag.run.deadline` for its degradation levels.

        Args:
            overrides: nested settings (``{"cross_encoder": {"depth": 10}}``) merged over ``self.cfg``.
            generator: a generator to use instead of the configured one (e.g. the extractive
                answerer, which needs no LLM).

        Raises:
            pydantic.ValidationError: an override is not a valid setting.
            ValueError: an override names an unknown component, or a table under both its old
                and new name (an old name alone is read as the new one, with a warning).
        """
        data = self.cfg.model_dump()
        for section, values in renamed_tables(overrides).items():  # else [reranker] would meet [cross_encoder]
            if isinstance(values, dict):
                data.setdefault(section, {}).update(values)
            else:
                data[section] = values
        cfg = PipelineConfig.model_validate(data)
        llm = self.llm if cfg.llm == self.cfg.llm else None
        ctx = Context(cfg, self.index, llm, pool=self.ctx.pool)

        def kept(slot: str, old_name: str, new_name: str) -> bool:
            """Whether the component ``old_name`` is reused as ``new_name``; if so, the new context
            keeps its record (for a pipeline derived from this one)."""
            reads = self.ctx.reads.get((slot, old_name))
            if old_name != new_name or reads is None or tables_of(cfg, reads) != tables_of(self.cfg, reads):
                return False
            ctx.reads[(slot, new_name)] = reads
            return True

        def keep_or_build(slot: str, current):
            old, new = getattr(self.cfg, slot).name, getattr(cfg, slot).name
            return current if kept(slot, old, new) else build(slot, new, ctx)

        classifier = keep_or_build("classifier", self.classifier)
        rewriter = keep_or_build("rewriter", self.rewriter)
        fusion = keep_or_build("fusion", self.fusion)
        merge = keep_or_build("merge", self.merge)
        if generator is None:
            generator = keep_or_build("generator", self.generator)
        named = list(zip(self.rerank_names, self.rerank_chain)) if self.rerank_names is not None else None
        chain = _named_chain(ctx, named, lambda name: kept("rerank", name, name))
        pipe = type(self)(self.index, cfg, classifier, rewriter, fusion, [s for _, s in chain], generator, ctx.llm,
                          merge=merge, ctx=ctx)
        pipe.rerank_names = [n for n, _ in chain]
        return pipe

    def warm_up(self) -> None:
        """Load every model the components use (embedder, rerankers, LLM) now, so that the
        first question does not pay for loading and a model that cannot load fails here."""
        for component in (self.index.encoder, *self.rerank_chain, self.llm):
            if component is not None:
                component.warm_up()

    # ------------------------------------------------------------------ batch API
    def answer(self, questions: list[Question]) -> list[Outcome]:
        """Answer a batch; never raises for a question's failure (it becomes an Outcome.failure).

        Equivalent to ``self.generate(self.prepare(questions))``.
        """
        return self.generate(self.prepare(questions))

    def prepare(self, questions: list[Question]) -> list[Outcome]:
        """Every stage but generation, with failure isolation: one Outcome per question,
        holding its trace, or its failure when retrieval failed for it. Never raises for
        a question's failure. Used with :meth:`generate` to overlap the retrieval of one
        batch with the generation of the previous (``run.overlap``)."""
        return _isolated(questions, lambda qs: [Outcome(q, trace=t) for q, t in zip(qs, self.retrieve(qs))],
                         lambda q: q)

    def generate(self, prepared: list[Outcome]) -> list[Outcome]:
        """Generate answers for the outcomes of :meth:`prepare` (failures pass through, in
        order). A batch that raises is retried question by question."""
        ready = [o for o in prepared if o.failure is None and o.trace is not None]
        done = _isolated(ready, self._generate_batch, lambda o: o.question) if ready else []
        by_id = {id(r): d for r, d in zip(ready, done)}
        return [by_id.get(id(o), o) for o in prepared]

    def retrieve(self, questions: list[Question]) -> list[Trace]:
        """Every slot but generation, for a batch: one Trace per question.

        ``Trace.context_ids`` holds the passages that would be given to the generator;
        ``Trace.seconds`` the batch time of each slot divided by the batch size. Used by
        :meth:`prepare` and by retrieval-only benchmarks.

        With ``[run] use_given_candidates`` a question that carries ``candidates`` (a ragnarok
        request) is not retrieved for: :meth:`_given` makes its trace from them.

        Raises:
            StageError: a slot failed (``stage`` names it: classify, rewrite, sparse,
                dense, fusion, a rerank step's ``stage``, or ``candidates``).
        """
        given = [i for i, q in enumerate(questions) if self.cfg.run.use_given_candidates and has_candidates(q.extra)]
        if not given:
            return self._retrieve(questions)
        given_set = set(given)
        rest = [i for i in range(len(questions)) if i not in given_set]
        traces: dict[int, Trace] = dict(zip(given, self._given([questions[i] for i in given])))
        if rest:
            traces.update(zip(rest, self._retrieve([questions[i] for i in rest])))
        return [traces[i] for i in range(len(questions))]

    def _given(self, questions: list[Question]) -> list[Trace]:
        """Traces for questions answered from their own candidates (``[run] use_given_candidates``).

        The question is classified (the class is recorded; no LLM unless the classifier is
        one); nothing else runs before generation: no rewrite, retrieval, fusion, rerank chain
        or merge. ``context_ids`` = the docids of the first ``generator.context_top_k``
        candidates in their given order; ``rankings`` holds ``given`` (the candidates, trace
        depth) and ``final`` (the same); ``candidates = "given"``.

        Raises:
            StageError: ``classify`` failed, or ``candidates`` are malformed (no docid or text).
        """
        seconds: dict[str, float] = {}
        texts = [q.question for q in questions]
        classes: list[Classification] = _run_stage("classify", lambda: self.classifier.classify(texts), seconds)
        lists = _run_stage("candidates", lambda: [read_candidates(q.extra) for q in questions])
        per_q = {stage: round(s / len(questions), 4) for stage, s in seconds.items()}
        batches = {stage: StageBatch(size=len(questions), seconds=round(s, 4)) for stage, s in seconds.items()}
        depth, k_ctx = self.cfg.run.trace_depth, self.cfg.generator.context_top_k
        traces = []
        for q, c, (cands, notes) in zip(questions, classes, lists):
            ranking = Ranking(ids=[p.id for p in cands], scores=[p.score for p in cands])
            plan = QueryPlan(question_type=c.question_type, rewriter="given",
                             sub_queries=[SubQuery(text=q.question, sparse=q.question, dense=q.question)])
            fallbacks = ([f"classify: {c.fallback}"] if c.fallback else []) + notes
            traces.append(Trace(id=q.id, classification=c, plan=plan,
                                rankings={"given": [ranking.top(depth)], "final": [ranking.top(depth)]},
                                context_ids=ranking.ids[:k_ctx], seconds=dict(per_q), batches=dict(batches),
                                fallbacks=fallbacks, learned_models=[], candidates="given"))
        return traces

    def _retrieve(self, questions: list[Question]) -> list[Trace]:
        """:meth:`retrieve` for questions whose context is retrieved (every slot runs)."""
        n = len(questions)
        texts = [q.question for q in questions]
        seconds: dict[str, float] = {}
        # 1. plan
        classes: list[Classification] = _run_stage("classify", lambda: self.classifier.classify(texts), seconds)
        plans = _run_stage("rewrite", lambda: self.rewriter.plan(texts, [c.question_type for c in classes]),
                           seconds)
        slots = [(qi, si) for qi, p in enumerate(plans) for si in range(len(p.sub_queries))]
        lists = self._search(plans, slots, seconds)  # 2. one call per retriever for every query
        merged = _run_stage("fusion", lambda: self._fuse(lists, len(slots)), seconds)  # 3
        against = ([plans[qi].sub_queries[si].text for qi, si in slots] if self.cfg.rerank.query == "sub-query"
                   else [texts[qi] for qi, _ in slots])
        current, step_outputs = self._rerank(against, merged, seconds)  # 4
        # 5. merge sub-queries (the merge slot: [merge] name), 6. context
        owns = [[j for j, (x, _) in enumerate(slots) if x == qi] for qi in range(n)]
        full = [{**{key: [lists[key][j][0] for j in own] for key, *_ in self.retrievers},
                 "merged": [merged[j] for j in own], **{key: [out[j] for j in own] for key, out in step_outputs.items()}}
                for own in owns]
        merged_out = _run_stage("merge", lambda: self.merge.merge(texts, classes, full,
                                                                  [[current[j] for j in own] for own in owns]),
                                seconds)
        return self._retrieval_traces(questions, classes, plans, full, merged_out, seconds)

    def _search(self, plans: list[QueryPlan], slots: list[tuple[int, int]],
                seconds: dict[str, float]) -> dict[str, list[list[Ranking]]]:
        """Step 2: per retriever (trace key), per slot ``(question, sub-query)``, its rankings:
        the primary query's, then each ``extra`` query's. What a retriever fell back on for a query
        (``Ranking.fallback``, e.g. DoTA's search without a filter that left no passage) is added
        to the plan's fallbacks, once, as ``"<trace key>: <fallback>"``."""
        lists: dict[str, list[list[Ranking]]] = {}
        for key, retriever, k, field in self.retrievers:  # field: which sub-query text it gets
            queries: list[str] = []
            filters: list[dict[str, list[str]]] = []
            owner: list[int] = []
            for j, (qi, si) in enumerate(slots):
                sq = plans[qi].sub_queries[si]
                for text in [getattr(sq, field), *sq.extra]:
                    queries.append(text)
                    filters.append(sq.filters)
                    owner.append(j)
            found = _run_stage(key, lambda: retriever.search(queries, k, filters if any(filters) else None), seconds)
            per_slot: list[list[Ranking]] = [[] for _ in slots]
            for j, r in zip(owner, found):
                per_slot[j].append(r)
                plan = plans[slots[j][0]]
                if r.fallback and f"{key}: {r.fallback}" not in plan.fallbacks:
                    plan.fallbacks.append(f"{key}: {r.fallback}")
            lists[key] = per_slot
        return lists

    def _fuse(self, lists: dict[str, list[list[Ranking]]], n_slots: int) -> list[Ranking]:
        """Step 3: per slot, all its lists fused (primary queries first, then extra ones,
        alternating retrievers in each round)."""
        out = []
        for j in range(n_slots):
            by_retriever = [lists[key][j] for key, *_ in self.retrievers]
            ordered = [r for rank in range(max((len(x) for x in by_retriever), default=0))
                       for x in by_retriever if rank < len(x) for r in [x[rank]]]
            out.append(self.fusion.fuse(ordered) if ordered else Ranking())
        return out

    def _rerank(self, queries: list[str], merged: list[Ranking],
                seconds: dict[str, float]) -> tuple[list[Ranking], dict[str, list[Ranking]]]:
        """Step 4, the rerank chain over each slot's fused list against its query (``[rerank] query``:
        the whole question, or the slot's sub-query):
        ``(last rankings, {trace key: each step's rankings})``; with no step the fused lists pass
        through as ``reranked``."""
        step_outputs: dict[str, list[Ranking]] = {}
        current = merged
        for step in self.rerank_chain:
            current = _run_stage(step.stage, lambda: step.rerank(queries, current, self.index.text), seconds)
            step_outputs[step.trace_key] = current
        if "reranked" not in step_outputs:
            step_outputs["reranked"] = current
        return current, step_outputs

    def _retrieval_traces(self, questions: list[Question], classes: list[Classification], plans: list[QueryPlan],
                          full: list[dict[str, list[Ranking]]], merged_out: list,
                          seconds: dict[str, float]) -> list[Trace]:
        """One Trace per question: its rankings per trace key as the merge slot read them
        (``full``: retrievers' primary queries, ``merged``, the rerank steps; one per sub-query),
        the merge slot's ``final`` and extra rankings, all cut to ``run.trace_depth``; the batch's
        stage seconds shared equally."""
        n = len(questions)
        per_q = {stage: round(s / n, 4) for stage, s in seconds.items()}
        batches = {stage: StageBatch(size=n, seconds=round(s, 4)) for stage, s in seconds.items()}
        depth, k_ctx = self.cfg.run.trace_depth, self.cfg.generator.context_top_k
        traces = []
        for qi, q in enumerate(questions):
            final, extra_rankings = merged_out[qi]
            rankings = {key: [r.top(depth) for r in per_sub] for key, per_sub in full[qi].items()}
            rankings["final"] = [final.top(depth)]
            for key, value in extra_rankings.items():
                rankings[key] = [r.top(depth) for r in value]
            fallbacks = list(plans[qi].fallbacks)
            if classes[qi].fallback:
                fallbacks.append(f"classify: {classes[qi].fallback}")
            traces.append(Trace(id=q.id, classification=classes[qi], plan=plans[qi], rankings=rankings,
                                context_ids=final.ids[:k_ctx], seconds=dict(per_q), batches=dict(batches),
                                fallbacks=fallbacks, learned_models=list(self.learned_models)))
        return traces

    def _context(self, question: Question, trace: Trace) -> list[tuple[str, str]]:
        """``(text, document id)`` of each context passage: from the index, or from the
        question's candidates when the trace says they were given."""
        if trace.candidates == "given":
            by_id = {p.id: p for p in read_candidates(question.extra)[0]}
            return [(by_id[pid].text, by_id[pid].doc_id) for pid in trace.context_ids]
        return [(self.index.passages[pid].text, self.index.passages[pid].doc_id) for pid in trace.context_ids]

    def _generate_batch(self, prepared: list[Outcome]) -> list[Outcome]:
        questions = [o.question for o in prepared]
        traces = [o.trace for o in prepared]
        context = [self._context(q, t) for q, t in zip(questions, traces)]
        contexts = [[text for text, _ in c] for c in context]
        t0 = time.perf_counter()
        generated: list[Generated] = _run_stage("generate", lambda: self.generator.generate(
            [q.question for q in questions], contexts, [q.extra for q in questions]))
        wall = time.perf_counter() - t0
        per_q = round(wall / len(questions), 4)
        outcomes = []
        for q, trace, g, ctx in zip(questions, traces, generated, context):
            prompt, answer = g.final_prompt, g.answer
            trace.seconds["generate"] = per_q
            trace.batches["generate"] = StageBatch(size=len(questions), seconds=round(wall, 4))
            trace.truncations = list(g.truncations)
            retrieved = bool(trace.context_ids)
            if g.n_passages is not None and g.n_passages < len(trace.context_ids):
                # passages dropped to fit the LLM's window (from the end): the answer lists only
                # those the prompt held, numbered as in the prompt
                trace.context_ids, ctx = trace.context_ids[:g.n_passages], ctx[:g.n_passages]
            if g.details is not None:  # a generator's record of its steps (GINGER)
                trace.generation = g.details
            if g.citations is not None:  # a generator that cites: numbers -> passage ids
                trace.citations = [Citation(sentence=sent, passage_ids=ids)
                                   for sent, ids in numbers_to_ids(g.citations, trace.context_ids)]
                trace.removed_citations = int(g.removed_citations)
            trace.fallbacks.extend(g.fallbacks)  # what the generator fell back on (e.g. CIR: unparsable JSON)
            if isinstance(answer, LLMError):
                outcomes.append(Outcome(q, trace=trace, failure=Failure(
                    id=q.id, question=q.question, error=str(answer), stage="generate")))
                continue
            if not retrieved:
                outcomes.append(Outcome(q, trace=trace, failure=Failure(
                    id=q.id, question=q.question, error="no passage retrieved", stage="retrieve")))
                continue
            passages = [LiveRAGPassage(passage=text, doc_IDs=[doc_id]) for text, doc_id in ctx]
            outcomes.append(Outcome(q, trace=trace, answer=LiveRAGAnswer(
                id=q.id, question=q.question, passages=passages, final_prompt=prompt, answer=answer)))
        return outcomes
