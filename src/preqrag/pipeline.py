"""The PreQRAG pipeline: classify → rewrite → retrieve → fuse → rerank → generate (§2).

:class:`Pipeline` composes one component per stage (all chosen by configuration) and
answers a batch of questions at a time, so that every stage can batch across
questions (one BM25 call, one query-encoding call, one reranker call, one round of LLM
calls per batch). If a batch fails, its questions are retried one by one so that one bad
question never loses the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import PipelineConfig
from .fusion import interleave, load_fusion
from .generation import LLMGenerator
from .index import Index
from .records import (Classification, Failure, LiveRAGAnswer, LiveRAGPassage, Question, Ranking,
                      Trace)
from .rerankers import load_reranker
from .rewriting import IdentityRewriter, PreQRAGRewriter
from .stages import LLM, Classifier, Fusion, Generator, LLMError, Reranker, Rewriter


def _isolated(items: list, run_batch: Callable[[list], list["Outcome"]],
              question_of: Callable[[Any], Question]) -> list["Outcome"]:
    """``run_batch(items)``; if it raises, retry item by item so that one bad question
    never loses the others. A single item that raises becomes a failure Outcome naming the
    error and the stage (the exception's ``stage`` attribute)."""
    try:
        return run_batch(items)
    except Exception as e:
        if len(items) > 1:
            return [o for x in items for o in _isolated([x], run_batch, question_of)]
        q = question_of(items[0])
        return [Outcome(q, failure=Failure(id=q.id, question=q.question, error=f"{type(e).__name__}: {e}",
                                           stage=getattr(e, "stage", None)))]


@dataclass
class Outcome:
    """Result for one question: an answer and its trace, or a failure."""

    question: Question
    answer: LiveRAGAnswer | None = None
    trace: Trace | None = None
    failure: Failure | None = None


class _LazyLLM:
    """Builds the configured LLM once, on first use, and shares it between stages."""

    def __init__(self, cfg: PipelineConfig, llm: LLM | None = None):
        self.cfg = cfg
        self.llm = llm

    def __call__(self) -> LLM:
        if self.llm is None:
            from .llm import load_llm

            self.llm = load_llm(self.cfg.llm, cache_dir=self.cfg.run.cache_dir)
        return self.llm


class Pipeline:
    """PreQRAG over an opened :class:`~preqrag.index.Index`.

    Args:
        index: the index to retrieve from.
        cfg: the configuration.
        classifier, rewriter, fusion, reranker (``None`` = no reranking), generator:
            stage components; :meth:`from_config` builds them from ``cfg``.
    """

    def __init__(self, index: Index, cfg: PipelineConfig, classifier: Classifier, rewriter: Rewriter,
                 fusion: Fusion, reranker: Reranker | None, generator: Generator):
        self.index = index
        self.cfg = cfg
        self.classifier = classifier
        self.rewriter = rewriter
        self.fusion = fusion
        self.reranker = reranker
        self.generator = generator

    @classmethod
    def from_config(cls, index_dir: str | Path, cfg: PipelineConfig, llm: LLM | None = None) -> "Pipeline":
        """Open the index and build every stage named in ``cfg``.

        Args:
            llm: an LLM to use instead of the configured one (shared by all LLM stages).

        Raises:
            IndexOpenError: index missing or built with another embedder.
            ValueError: an unknown component name.
        """
        from .classifiers import load_classifier

        index = Index.open(index_dir, cfg)
        lazy = _LazyLLM(cfg, llm)
        rewriter: Rewriter = (PreQRAGRewriter(lazy, cfg.rewriter) if cfg.rewriter.name == "preqrag"
                              else IdentityRewriter())
        return cls(index, cfg, load_classifier(cfg, lazy), rewriter, load_fusion(cfg.fusion),
                   load_reranker(cfg.reranker, cfg.run.cache_dir), LLMGenerator(lazy, cfg.generator))

    def warm_up(self) -> None:
        """Load every model the stages use (embedder, cross-encoder, LLM) now, so that the
        first question does not pay for loading and a model that cannot load fails here."""
        for component in (self.index.encoder, self.reranker, self._llm()):
            fn = getattr(component, "warm_up", None)
            if fn is not None:
                fn()

    def _llm(self) -> LLM | None:
        lazy = getattr(self.generator, "llm_factory", None)
        return lazy() if lazy is not None else None

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
        """Every stage but generation, for a batch: one Trace per question.

        ``Trace.context_ids`` holds the passages that would be given to the generator;
        ``Trace.seconds`` the batch time of each stage divided by the batch size. Used by
        :meth:`answer` and by retrieval-only benchmarks. Raises what a stage raises, with
        the stage name in the exception's ``stage`` attribute.
        """
        cfg = self.cfg
        n = len(questions)
        texts = [q.question for q in questions]
        seconds: dict[str, float] = {}

        def timed(stage: str, fn: Callable):
            t = time.perf_counter()
            try:
                return fn()
            except Exception as e:
                e.stage = stage  # type: ignore[attr-defined]
                raise
            finally:
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t

        classes: list[Classification] = timed("classify", lambda: self.classifier.classify(texts))
        plans = timed("rewrite", lambda: self.rewriter.plan(texts, [c.question_type for c in classes]))

        # Flatten sub-queries of the batch: one retrieval call per retriever for the whole batch.
        slots = [(qi, si) for qi, p in enumerate(plans) for si in range(len(p.sub_queries))]
        use_dense = cfg.retrieval.use_dense and self.index.dense is not None
        sparse: list[Ranking] = [Ranking() for _ in slots]
        dense: list[Ranking] = [Ranking() for _ in slots]
        if cfg.retrieval.use_sparse:
            sparse = timed("sparse", lambda: self.index.sparse.search(
                [plans[qi].sub_queries[si].sparse for qi, si in slots], cfg.retrieval.sparse_top_k))
        if use_dense:
            dense = timed("dense", lambda: self.index.dense.search(
                [plans[qi].sub_queries[si].dense for qi, si in slots], cfg.retrieval.dense_top_k))
        merged = timed("fusion", lambda: [self.fusion.fuse([s, d]) for s, d in zip(sparse, dense)])
        reranked = timed("rerank", lambda: self._rerank(texts, slots, merged))

        per_q = {stage: round(s / n, 4) for stage, s in seconds.items()}  # batch time shared equally
        depth = cfg.run.trace_depth
        k = cfg.generator.context_top_k
        traces = []
        for qi, q in enumerate(questions):
            own = [j for j, (x, _) in enumerate(slots) if x == qi]
            lists = [reranked[j] for j in own]
            final = lists[0] if len(lists) == 1 else interleave(lists)
            rankings = {"merged": [merged[j].top(depth) for j in own],
                        "reranked": [reranked[j].top(depth) for j in own],
                        "final": [final.top(depth)]}
            if cfg.retrieval.use_sparse:
                rankings["sparse"] = [sparse[j].top(depth) for j in own]
            if use_dense:
                rankings["dense"] = [dense[j].top(depth) for j in own]
            fallbacks = list(plans[qi].fallbacks)
            if classes[qi].fallback:
                fallbacks.append(f"classify: {classes[qi].fallback}")
            traces.append(Trace(id=q.id, classification=classes[qi], plan=plans[qi], rankings=rankings,
                                context_ids=final.ids[:k], seconds=dict(per_q), fallbacks=fallbacks))
        return traces

    def _generate_batch(self, prepared: list[Outcome]) -> list[Outcome]:
        questions = [o.question for o in prepared]
        traces = [o.trace for o in prepared]
        contexts = [[self.index.passages[pid].text for pid in t.context_ids] for t in traces]
        t0 = time.perf_counter()
        try:
            generated = self.generator.generate([q.question for q in questions], contexts)
        except Exception as e:
            e.stage = "generate"  # type: ignore[attr-defined]
            raise
        per_q = round((time.perf_counter() - t0) / len(questions), 4)
        outcomes = []
        for q, trace, (prompt, answer, truncations) in zip(questions, traces, generated):
            trace.seconds["generate"] = per_q
            trace.truncations = list(truncations)
            if isinstance(answer, LLMError):
                outcomes.append(Outcome(q, trace=trace, failure=Failure(
                    id=q.id, question=q.question, error=str(answer), stage="generate")))
                continue
            if not trace.context_ids:
                outcomes.append(Outcome(q, trace=trace, failure=Failure(
                    id=q.id, question=q.question, error="no passage retrieved", stage="retrieve")))
                continue
            passages = [LiveRAGPassage(passage=self.index.passages[pid].text,
                                       doc_IDs=[self.index.passages[pid].doc_id]) for pid in trace.context_ids]
            outcomes.append(Outcome(q, trace=trace, answer=LiveRAGAnswer(
                id=q.id, question=q.question, passages=passages, final_prompt=prompt, answer=answer)))
        return outcomes

    def _rerank(self, questions: list[str], slots: list[tuple[int, int]], merged: list[Ranking]) -> list[Ranking]:
        """Cross-encoder scores of (original question, passage) for the head of each fused list.

        Each distinct (question, passage) pair of the batch is scored once, in one call.
        The returned rankings hold only the reranked head (``reranker.depth`` candidates).
        """
        if self.reranker is None:
            return merged
        depth = self.cfg.reranker.depth
        pair_index: dict[tuple[int, str], int] = {}
        pairs: list[tuple[str, str]] = []
        for (qi, _), m in zip(slots, merged):
            for pid in m.ids[:depth]:
                if (qi, pid) not in pair_index:
                    pair_index[(qi, pid)] = len(pairs)
                    pairs.append((questions[qi], self.index.passages[pid].text))
        scores = self.reranker.score(pairs) if pairs else np.zeros(0, dtype=np.float32)
        out = []
        for (qi, _), m in zip(slots, merged):
            head = m.ids[:depth]
            s = [float(scores[pair_index[(qi, pid)]]) for pid in head]
            order = sorted(range(len(head)), key=lambda i: -s[i])
            out.append(Ranking(ids=[head[i] for i in order], scores=[s[i] for i in order]))
        return out
