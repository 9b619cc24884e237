"""``preqrag train-ranker``: learn the final ranking from questions with gold documents (issue 14).

1. **Retrieve** (no generation): :meth:`preqrag.run.pipeline.Pipeline.retrieve` over the questions
   that have ``gold_doc_ids``, with the configured pipeline, ``[merge] name = "interleave"`` (the
   baseline the features describe) and ``run.trace_depth`` >= :data:`CANDIDATE_DEPTH`. The traces
   are cached in ``<RANKER>.traces.jsonl`` (appended per batch: an interrupted run resumes; a
   different index or configuration starts the cache afresh), so re-training with other
   parameters or features does not re-run retrieval.
2. **Features**: :func:`preqrag.learned.features.extract` per question; label 1 for gold
   documents.
3. **Train** LightGBM LambdaMART (:func:`preqrag.learned.ranker.train_booster`), documents
   grouped by question; with ``folds`` the same is first cross-validated, folds grouped by
   gold document (:func:`question_groups`).
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..core.config import PipelineConfig, renamed_tables
from ..core.io import append_jsonl, atomic_write_text, read_jsonl_tolerant
from ..core.records import Question, Trace
from .features import FEATURE_VERSION, Candidates, extract
from .ranker import LearnedRanker, RankerParams, question_sha256, rank_candidates, train_booster

CANDIDATE_DEPTH = 100
"""Passages per list kept as candidates (``run.trace_depth`` of the training retrieval)."""


def gold_docs(q: Question) -> list[str]:
    """The question's gold document ids (``extra["gold_doc_ids"]``, as evaluation reads them)."""
    from ..evaluation.retrieval import gold_docs as _gold

    return _gold(q)


def training_config(cfg: PipelineConfig, depth: int = CANDIDATE_DEPTH) -> PipelineConfig:
    """``cfg`` with the interleave merge (the baseline the features describe) and
    ``run.trace_depth >= depth``."""
    data = cfg.model_dump()
    data["merge"] = {"name": "interleave", "model": None}
    data["run"]["trace_depth"] = max(int(data["run"]["trace_depth"]), depth)
    return PipelineConfig.model_validate(data)


def cache_key(pipeline) -> dict:
    """What the cached traces depend on: the index (corpus hash, settings) and the retrieval config."""
    m = pipeline.index.manifest
    cfg = pipeline.cfg.model_dump(exclude={"generator", "llm", "deadline", "run", "cir", "ginger"})
    cfg["trace_depth"] = pipeline.cfg.run.trace_depth
    return {"corpus_sha256": m.get("corpus", {}).get("sha256"), "embedder": m.get("embedder"),
            "n_passages": m.get("n_passages"), "config": cfg}


def _stored_key(row: dict) -> dict | None:
    """The cache key of a traces file's first line, its configuration's tables under their current
    names (:func:`preqrag.core.config.renamed_tables`): a cache written before ``[reranker]`` became
    ``[cross_encoder]`` still matches the same retrieval instead of being emptied and recomputed."""
    key = row.get("cache_key")
    if isinstance(key, dict) and isinstance(key.get("config"), dict):
        try:
            key = {**key, "config": renamed_tables(key["config"], warn=False)}
        except ValueError:  # both names: not a key this code wrote
            return None
    return key


def collect_traces(pipeline, questions: Sequence[Question], cache: str | Path, *, batch_size: int = 16,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Trace]:
    """Retrieval traces of ``questions``, resumable through the JSONL ``cache``.

    Args:
        pipeline: a :class:`~preqrag.run.pipeline.Pipeline` (built from :func:`training_config`).
        questions: the questions (ids unique).
        cache: the traces file; its first line is ``{"cache_key": ...}`` (:func:`cache_key`); a
            different key empties it.
        batch_size: questions per ``retrieve`` call.
        progress: ``progress(done, total)`` after each batch.

    Returns:
        ``{question key: Trace}`` for every question.

    Raises:
        StageError: retrieval failed for a batch (the cache keeps the finished batches).
    """
    cache = Path(cache)
    key = cache_key(pipeline)
    rows = read_jsonl_tolerant(cache, repair=True)
    if not rows or _stored_key(rows[0]) != json.loads(json.dumps(key)):
        atomic_write_text(cache, json.dumps({"cache_key": key}) + "\n")
        rows = rows[:0]
    else:
        rows = rows[1:]
    traces = {str(r["id"]): Trace.model_validate(r) for r in rows if "id" in r}
    todo = [q for q in questions if q.key not in traces]
    done = len(questions) - len(todo)
    if progress:
        progress(done, len(questions))
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        got = pipeline.retrieve(batch)
        append_jsonl(cache, [t.model_dump(mode="json") for t in got])
        for t in got:
            traces[str(t.id)] = t
        done += len(batch)
        if progress:
            progress(done, len(questions))
    return {q.key: traces[q.key] for q in questions}


def candidates_of(question: Question, trace: Trace, depth: int = CANDIDATE_DEPTH) -> tuple[Candidates, np.ndarray]:
    """Candidates and labels (1 = gold document) of one question from its trace."""
    final = trace.rankings.get("final", [None])[0]
    from ..core.records import Ranking

    cands = extract(question.question, trace.classification, trace.rankings, final or Ranking(), depth)
    gold = set(gold_docs(question))
    return cands, np.array([1.0 if d in gold else 0.0 for d in cands.doc_ids])


def question_groups(questions: Sequence[Question]) -> list[int]:
    """Connected components of questions that share a gold document (union-find).

    Cross-validation folds split by these groups, so that no gold document is in both a training
    and a test fold. Returns one group number per question (0-based, in order of first appearance).
    """
    parent = list(range(len(questions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, q in enumerate(questions):
        for d in gold_docs(q):
            if d in owner:
                a, b = find(i), find(owner[d])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[d] = i
    roots: dict[int, int] = {}
    return [roots.setdefault(find(i), len(roots)) for i in range(len(questions))]


def folds_of(questions: Sequence[Question], k: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``k`` (train, test) index lists grouped by gold document (scikit-learn ``GroupKFold``,
    shuffled with ``seed``).

    Raises:
        ValueError: fewer groups than ``k``.
    """
    from sklearn.model_selection import GroupKFold

    groups = question_groups(questions)
    if len(set(groups)) < k:
        raise ValueError(f"{len(set(groups))} groups of questions sharing gold documents, fewer than {k} folds")
    gkf = GroupKFold(n_splits=k, shuffle=True, random_state=seed)
    X = np.zeros((len(questions), 1))
    return [(list(tr), list(te)) for tr, te in gkf.split(X, groups=groups)]


def doc_metrics(rankings: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, float | None]:
    """Mean single hit@1 / hit@10 / MRR@10 and multi recall@10 / all@10 of document rankings (ranx)."""
    from ..evaluation.retrieval import gold_type, per_query_metrics

    gold = {q.key: gold_docs(q) for q in questions}
    pq = per_query_metrics(rankings, gold)
    single = [pq[q.key] for q in questions if gold_type(q) == "single"]
    multi = [pq[q.key] for q in questions if gold_type(q) == "multi"]
    mean = lambda rows, m: float(np.mean([r[m] for r in rows])) if rows else None  # noqa: E731
    return {"single_hit@1": mean(single, "hit@1"), "single_hit@10": mean(single, "hit@10"),
            "single_mrr@10": mean(single, "mrr@10"), "multi_recall@10": mean(multi, "recall@10"),
            "multi_all@10": mean(multi, "all@10"), "n_single": len(single), "n_multi": len(multi)}


def fit(questions: Sequence[Question], traces: dict[str, Trace], params: RankerParams,
        depth: int = CANDIDATE_DEPTH, config: dict | None = None) -> LearnedRanker:
    """Train a ranker on the traces of ``questions`` (no I/O).

    Raises:
        ValueError: no usable training question (see :func:`train_booster`).
    """
    t0 = time.perf_counter()
    groups = [candidates_of(q, traces[q.key], depth) for q in questions]
    booster = train_booster([(c.features, y) for c, y in groups], params)
    training = {"n_questions": len(questions),
                "n_used": sum(1 for _, y in groups if len(y) >= 2 and 0 < y.sum() < len(y)),
                "n_documents": int(sum(len(y) for _, y in groups)),
                "n_gold_candidates": int(sum(y.sum() for _, y in groups)),
                "seconds": round(time.perf_counter() - t0, 3),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "lightgbm_version": _lgb_version(), "feature_version": FEATURE_VERSION,
                "pipeline_config": config or {}}
    trained_on = {"ids": sorted(q.key for q in questions),
                  "question_sha256": sorted({question_sha256(q.question) for q in questions})}
    ranker = LearnedRanker(booster, depth, asdict(params), training, trained_on)
    obj = json.loads(ranker.to_json())
    ranker.sha256 = obj["sha256"]
    return ranker


def _lgb_version() -> str:
    import lightgbm

    return lightgbm.__version__


def learned_doc_rankings(ranker: LearnedRanker, questions: Sequence[Question],
                         traces: dict[str, Trace]) -> dict[str, list[str]]:
    """``{question key: documents by learned score}``."""
    out = {}
    for q in questions:
        c, _ = candidates_of(q, traces[q.key], ranker.candidate_depth)
        out[q.key] = rank_candidates(ranker, c)[0]
    return out


def baseline_doc_rankings(questions: Sequence[Question], traces: dict[str, Trace]) -> dict[str, list[str]]:
    """``{question key: documents of the interleaved final ranking}`` (the baseline)."""
    from ..evaluation.retrieval import stage_doc_rankings

    return {q.key: stage_doc_rankings(traces[q.key]).get("final", []) for q in questions}


def cross_validate(questions: Sequence[Question], traces: dict[str, Trace], params: RankerParams, k: int,
                   depth: int = CANDIDATE_DEPTH) -> dict:
    """``k``-fold cross-validation grouped by gold document.

    Returns:
        ``{"folds": k, "baseline": metrics, "learned": metrics}`` over every question, each
        question scored by the model of the fold it was held out of (:func:`doc_metrics`).
    """
    learned: dict[str, list[str]] = {}
    for train_idx, test_idx in folds_of(questions, k, params.seed):
        ranker = fit([questions[i] for i in train_idx], traces, params, depth)
        learned.update(learned_doc_rankings(ranker, [questions[i] for i in test_idx], traces))
    return {"folds": k, "baseline": doc_metrics(baseline_doc_rankings(questions, traces), questions),
            "learned": doc_metrics(learned, questions)}
