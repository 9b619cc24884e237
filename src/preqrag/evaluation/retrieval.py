"""Document-level retrieval evaluation against gold documents, after every pipeline stage.

Metrics follow the PreQRAG paper (Martinez et al., SIGIR 2025 LiveRAG, arXiv 2506.17493):

* single-gold questions (``n_gold == 1``): ``hit@k`` for k = 1, 2, 3, 5, 10 — "percentage of
  original documents successfully retrieved" in the top k (Tables 2 and 3) — and ``mrr@10``
  (Table A.1; the paper's primary single-document metric).
* multi-gold questions (``n_gold >= 2``): ``recall@k``, the share of gold documents in the top
  k, averaged over questions (Table A.2, the multi-doc rows of Tables 2 and 3), and
  ``all@k``, the share of questions with *every* gold document in the top k (not in the
  paper; it says whether the generator can see all the evidence).

The per-question values of ``hit_rate@k``, ``recall@k`` and ``mrr@10`` are computed by ranx
(Bassani, ECIR 2022), whose metrics are tested against trec_eval; ``all@k`` is
``recall@k == 1``. Group means are plain means of those per-question values.

From passages to documents
--------------------------
Passage ids are ``"{doc_id}#{position}"``. A passage ranking becomes a document ranking by
mapping each passage to its document in rank order and keeping the first occurrence of
each document. A stage with several rankings (one per sub-query: a multi-document
question decomposed into sub-questions) is combined into one document ranking by
**round-robin interleaving**: each sub-query's ranking is first mapped to documents, then
documents are taken in turn — rank 1 of sub-query 1, rank 1 of sub-query 2, ..., rank 2 of
sub-query 1, ... — skipping documents already taken. This treats the sub-queries as
equally important (no score calibration across sub-queries is assumed) and is what a
generator given "the top documents of each sub-question" would see.

Stages evaluated (when present in the traces): ``sparse``, ``dense``, ``merged``,
``reranked`` (per sub-query), ``final`` (one ranking) and ``context`` (``Trace.context_ids``:
the passages put in the prompt).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.records import Question, Trace, docs_in_order
from ..components.fusion.interleave import interleave_ids

STAGES: tuple[str, ...] = ("sparse", "dense", "merged", "reranked", "final", "context")
"""Stages in pipeline order; ``context`` is ``Trace.context_ids``."""

KS: tuple[int, ...] = (1, 2, 3, 5, 10)
"""Cut-offs of Tables 2, 3 and A.2 (1, 2, 3, 10) plus 5 (Table A.1/A.2)."""

CATEGORIES: tuple[str, ...] = (
    "answer_type", "factuality", "premise", "phrasing", "linguistic_variation", "user_expertise")
"""DataMorgana categorisations carried by the question files (PreQRAG Appendix D)."""

SINGLE_METRICS: tuple[str, ...] = tuple(f"hit@{k}" for k in KS) + ("mrr@10",)
"""Metrics reported for single-gold questions."""

MULTI_METRICS: tuple[str, ...] = tuple(f"recall@{k}" for k in KS) + tuple(f"all@{k}" for k in KS)
"""Metrics reported for multi-gold questions."""

DEFAULT_DEPTH = 100
"""Documents kept per question and stage in the ranx Run / TREC files. Metrics need only
the top 10; 100 lets others re-score deeper cut-offs (the README figures use top-100
passages) while keeping run files small."""

NONE_VALUE = "none"
"""Category value used when a question has no value (e.g. ``answer_type: null``)."""


# ---------------------------------------------------------------------------- mapping

def stage_doc_rankings(trace: Trace | Mapping[str, Any]) -> dict[str, list[str]]:
    """Document rankings of every stage recorded in one trace.

    Args:
        trace: a :class:`~preqrag.core.records.Trace` or its ``model_dump()``.

    Returns:
        ``{stage: [doc_id, ...]}`` for each stage in ``trace.rankings`` (per-sub-query
        rankings interleaved, see module doc) plus ``"context"`` when ``context_ids`` is
        non-empty. Stages other than :data:`STAGES` are kept too (under their own name).
    """
    t = trace if isinstance(trace, Trace) else Trace.model_validate(trace)
    out: dict[str, list[str]] = {}
    for stage, rankings in t.rankings.items():
        out[stage] = interleave_ids([docs_in_order(r.ids) for r in rankings])
    if t.context_ids:
        out["context"] = docs_in_order(t.context_ids)
    return out


def gold_docs(q: Question) -> list[str]:
    """Gold document ids of a question (``extra["gold_doc_ids"]``), de-duplicated; ``[]`` if none."""
    g = q.extra.get("gold_doc_ids") or []
    return list(dict.fromkeys(str(x) for x in g))


def gold_type(q: Question) -> str | None:
    """``"single"`` (one gold doc), ``"multi"`` (two or more) or ``None`` (no gold).

    Uses ``n_gold`` when present (README: ``n_gold == 1`` single, ``n_gold >= 2`` multi),
    else the number of gold document ids.
    """
    n = q.extra.get("n_gold")
    if not isinstance(n, int) or isinstance(n, bool):
        n = len(gold_docs(q))
    if n <= 0:
        return None
    return "single" if n == 1 else "multi"


def category_value(q: Question, category: str) -> str:
    """The question's value for a DataMorgana category, ``"none"`` when missing/null."""
    v = q.extra.get(category)
    return NONE_VALUE if v is None or v == "" else str(v)


# ---------------------------------------------------------------------------- ranx

def to_ranx_run(doc_rankings: Mapping[str, Sequence[str]], name: str = "run",
                depth: int = DEFAULT_DEPTH):
    """A ``ranx.Run`` from ``{qid: [doc, ...]}`` (best first).

    Scores are ``depth - rank`` (strictly decreasing, so ranx keeps the given order; ties
    would be broken by ranx, not by us). Queries with an empty ranking are left out (ranx
    cannot hold them); callers score them 0.
    """
    from ranx import Run

    d = {qid: {doc: float(depth - i) for i, doc in enumerate(docs[:depth])}
         for qid, docs in doc_rankings.items() if docs}
    return Run(d, name=name)


def to_ranx_qrels(gold: Mapping[str, Sequence[str]]):
    """A ``ranx.Qrels`` giving relevance 1 to every gold document of every query."""
    from ranx import Qrels

    return Qrels({qid: {doc: 1 for doc in docs} for qid, docs in gold.items() if docs})


def per_query_metrics(doc_rankings: Mapping[str, Sequence[str]],
                      gold: Mapping[str, Sequence[str]],
                      ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """Per-question metrics computed with ranx.

    Args:
        doc_rankings: ``{qid: [doc, ...]}``; every qid must be in ``gold``. An empty or
            missing ranking scores 0 on every metric.
        gold: ``{qid: [gold_doc, ...]}`` (non-empty lists).
        ks: cut-offs.

    Returns:
        ``{qid: {"hit@k", "recall@k", "all@k" for k in ks, "mrr@10": value}}`` for every qid of
        ``gold``.
    """
    from ranx import evaluate

    metrics = [f"hit_rate@{k}" for k in ks] + [f"recall@{k}" for k in ks] + ["mrr@10"]
    zero = {**{f"hit@{k}": 0.0 for k in ks}, **{f"recall@{k}": 0.0 for k in ks},
            **{f"all@{k}": 0.0 for k in ks}, "mrr@10": 0.0}
    out = {qid: dict(zero) for qid in gold}
    nonempty = {qid: list(doc_rankings.get(qid) or []) for qid in gold}
    nonempty = {qid: docs for qid, docs in nonempty.items() if docs}
    if not nonempty:
        return out
    run = to_ranx_run(nonempty)
    qrels = to_ranx_qrels({qid: gold[qid] for qid in nonempty})
    evaluate(qrels, run, metrics, return_mean=False, save_results_in_run=True)
    for qid in nonempty:
        row = out[qid]
        for k in ks:
            row[f"hit@{k}"] = float(run.scores[f"hit_rate@{k}"][qid])
            r = float(run.scores[f"recall@{k}"][qid])
            row[f"recall@{k}"] = r
            row[f"all@{k}"] = 1.0 if r >= 1.0 - 1e-9 else 0.0
        row["mrr@10"] = float(run.scores["mrr@10"][qid])
    return out


# ---------------------------------------------------------------------------- aggregation

def _mean_block(rows: list[dict[str, float]], names: Sequence[str]) -> dict[str, float | int | None]:
    block: dict[str, float | int | None] = {"n": len(rows)}
    for m in names:
        block[m] = float(np.mean([r[m] for r in rows])) if rows else None
    return block


def _group_block(qids: list[str], pq: dict[str, dict[str, float]], gtype: dict[str, str],
                 single_metrics: Sequence[str], multi_metrics: Sequence[str]) -> dict:
    return {
        "single": _mean_block([pq[q] for q in qids if gtype[q] == "single"], single_metrics),
        "multi": _mean_block([pq[q] for q in qids if gtype[q] == "multi"], multi_metrics),
    }


def _as_trace(t: Trace | Mapping[str, Any]) -> Trace:
    return t if isinstance(t, Trace) else Trace.model_validate(t)


def _counts(questions, by_id: dict, qmap: dict, gold: dict, evaluated: list[str], failed: set[str],
            gtype: dict[str, str]) -> dict[str, int]:
    """The ``"n"`` block of :func:`evaluate_retrieval`'s result: how many questions, traces and
    failures were seen and evaluated, single and multi."""
    n_single = sum(1 for q in evaluated if gtype[q] == "single")
    return {"questions": len(questions), "with_gold": len(gold), "traces": len(by_id),
            "traces_without_question": sum(1 for q in by_id if q not in qmap),
            "traces_without_gold": sum(1 for q in by_id if q in qmap and q not in gold),
            "failed": sum(1 for q in evaluated if q in failed), "evaluated": len(evaluated),
            "single": n_single, "multi": len(evaluated) - n_single}


def _stages_present(doc_rankings: dict[str, dict[str, list[str]]]) -> list[str]:
    """The stages found in at least one question's rankings: :data:`STAGES` order, then others sorted."""
    present: set[str] = set()
    for r in doc_rankings.values():
        present.update(r)
    return [s for s in STAGES if s in present] + sorted(present - set(STAGES))


def _breakdown(groupings: dict, pq: dict, gtype: dict[str, str], single_metrics: tuple[str, ...],
               multi_metrics: tuple[str, ...]) -> dict:
    """One stage's ``breakdown``: ``{by: {value: group block}}`` over every grouping."""
    return {by: {value: _group_block(qids, pq, gtype, single_metrics, multi_metrics)
                 for value, qids in groups.items()}
            for by, groups in groupings.items()}


def evaluate_retrieval(traces: Sequence[Trace] | Sequence[Mapping[str, Any]],
                       questions: Sequence[Question], *,
                       failed_ids: Iterable[str | int] = (),
                       stages: Sequence[str] | None = None,
                       ks: Sequence[int] = KS,
                       trec_dir: str | Path | None = None,
                       run_name: str = "run",
                       depth: int = DEFAULT_DEPTH,
                       per_query: bool = False) -> dict:
    """Document-level retrieval metrics after each stage, overall and broken down.

    Args:
        traces: one Trace (or its ``model_dump()``) per answered question; a later trace of
            the same id replaces an earlier one.
        questions: questions with ``extra["gold_doc_ids"]`` (e.g. ``dev.jsonl``). Questions
            without gold documents are not evaluated.
        failed_ids: ids of questions the run failed on (``*.failed.jsonl``); they are
            evaluated with empty rankings (a failure is a miss), unless they also have a trace.
        stages: stages to evaluate; default: those of :data:`STAGES` (then any other stage
            name) found in at least one trace. A question whose trace lacks an evaluated
            stage gets an empty ranking for it (counted in ``n_missing``; failed questions
            are counted in ``n["failed"]`` only).
        ks: cut-offs (default :data:`KS`).
        trec_dir: when given, writes ``qrels.trec`` and ``{stage}.trec`` (ranx TREC format,
            top ``depth`` documents) there, so others can re-score with trec_eval or ranx.
        run_name: run name written in the TREC files.
        depth: documents per question kept in the TREC run files.
        per_query: also return per-question values under ``"per_query"``.

    Returns:
        ``{"n": {...counts...}, "stages": [stage, ...], "metrics": {stage: {"n_missing": int,
        "breakdown": {by: {value: {"single": {"n", hit@k..., "mrr@10"}, "multi": {"n",
        recall@k..., all@k...}}}}}}}`` where ``by`` is ``"all"`` (value ``"all"``),
        ``"gold_type"``, ``"pred_type"`` (``classification.question_type``; failed questions
        are ``"failed"``) and each of :data:`CATEGORIES`. Group values with no question of a
        gold type have ``n == 0`` and ``None`` metrics. With ``per_query``:
        ``"per_query": {stage: {qid: {metric: value}}}``.

    Raises:
        ImportError: ranx is not installed (``pip install "ranx==0.3.21"``).
    """
    by_id = {str(tr.id): tr for tr in map(_as_trace, traces)}  # a later trace of an id replaces an earlier one
    failed = {str(x) for x in failed_ids} - set(by_id)
    qmap = {q.key: q for q in questions}
    gold = {q.key: gold_docs(q) for q in questions if gold_docs(q) and gold_type(q)}
    evaluated = [qid for qid in qmap if qid in gold and (qid in by_id or qid in failed)]
    gtype = {qid: gold_type(qmap[qid]) for qid in evaluated}

    doc_rankings = {qid: stage_doc_rankings(by_id[qid]) if qid in by_id else {} for qid in evaluated}
    stages = _stages_present(doc_rankings) if stages is None else list(stages)

    single_metrics = tuple(f"hit@{k}" for k in ks) + ("mrr@10",)
    multi_metrics = tuple(f"recall@{k}" for k in ks) + tuple(f"all@{k}" for k in ks)
    result: dict[str, Any] = {"n": _counts(questions, by_id, qmap, gold, evaluated, failed, gtype), "ks": list(ks),
                              "stages": list(stages), "metrics": {}, "single_metrics": list(single_metrics),
                              "multi_metrics": list(multi_metrics)}

    pred = {qid: (by_id[qid].classification.question_type if qid in by_id else "failed")
            for qid in evaluated}
    groupings = _groupings(evaluated, gtype, pred, qmap)

    if trec_dir is not None:
        Path(trec_dir).mkdir(parents=True, exist_ok=True)
        to_ranx_qrels({q: gold[q] for q in evaluated}).save(str(Path(trec_dir) / "qrels.trec"), kind="trec")

    pq_all: dict[str, dict[str, dict[str, float]]] = {}
    for stage in stages:
        ranks = {qid: doc_rankings[qid].get(stage, []) for qid in evaluated}
        n_missing = sum(1 for qid in evaluated if qid in by_id and stage not in doc_rankings[qid])
        pq_all[stage] = pq = per_query_metrics(ranks, {q: gold[q] for q in evaluated}, ks)
        result["metrics"][stage] = {"n_missing": n_missing,
                                    "breakdown": _breakdown(groupings, pq, gtype, single_metrics, multi_metrics)}
        if trec_dir is not None and any(ranks.values()):
            to_ranx_run(ranks, name=run_name, depth=depth).save(
                str(Path(trec_dir) / f"{stage}.trec"), kind="trec")
    if per_query:
        result["per_query"] = pq_all
    return result


def _groupings(evaluated: list[str], gtype: dict[str, str], pred: dict[str, str],
               qmap: dict[str, Question]) -> dict[str, dict[str, list[str]]]:
    """The breakdowns of :func:`evaluate_retrieval`: ``{by: {value: [question ids]}}`` for
    ``all``, ``gold_type``, ``pred_type`` and each of :data:`CATEGORIES`."""
    groupings: dict[str, dict[str, list[str]]] = {"all": {"all": list(evaluated)}}
    groupings["gold_type"] = _groups(evaluated, lambda q: gtype[q])
    groupings["pred_type"] = _groups(evaluated, lambda q: pred[q])
    for cat in CATEGORIES:
        groupings[cat] = _groups(evaluated, lambda q, c=cat: category_value(qmap[q], c))
    return groupings


def _groups(qids: Iterable[str], key) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for q in qids:
        out.setdefault(key(q), []).append(q)
    return dict(sorted(out.items()))
