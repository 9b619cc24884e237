"""Document-level candidates and features for the learned final ranking (issue 14).

The pipeline ranks *passages*; gold is per *document*. The learned ranker therefore scores
documents: every document with at least one passage in the rankings the pipeline already
computed for a question — each sub-query's ``sparse`` (BM25), ``dense``, ``merged`` (fused)
and ``reranked`` (cross-encoder) lists, cut at ``depth`` as in the trace — is a candidate.

Features of a candidate document (names in :data:`FEATURE_NAMES`, this order):

* for each scored list ``L`` in ``sparse``, ``dense``, ``reranked``: ``L_present`` (0/1),
  ``L_best_score`` and ``L_mean_score`` over the document's passages in ``L`` (all
  sub-queries), ``L_best_gap`` (best score minus the top score of the same sub-query's list,
  maximised over sub-queries: <= 0, comparable across questions), ``L_best_rank`` (1-based,
  best over sub-queries) and ``L_n_passages`` (its passages in ``L``, all sub-queries);
* for ``merged`` (fusion scores are rank-derived): ``merged_present``, ``merged_best_rank``,
  ``merged_n_passages``;
* ``baseline_rank``: 1-based rank of the document in the round-robin interleaving of the
  rerank chain's output (what the ``interleave`` merge gives; the default final ranking);
* ``n_passages``: its distinct candidate passages; ``n_passages_top10``: its distinct passages
  in the top 10 of any list;
* ``n_subqueries_retrieved`` (sub-queries with at least one of its passages in any list),
  ``share_subqueries_retrieved`` (that over ``n_subqueries``), ``n_subqueries``;
* ``question_multi`` (classified multi-document: 1), ``classifier_score`` (p(multi);
  :data:`MISSING_SCORE` when the classifier has none), ``query_words`` (words of the question).

Missing values: a document absent from a list gets ``L_present = 0``, scores
:data:`MISSING_SCORE` and rank ``depth + 1`` (a sentinel plus an indicator, so tree models
split on absence explicitly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..components.fusion.interleave import interleave
from ..core.records import Classification, Ranking, doc_of, docs_in_order

SCORED_LISTS: tuple[str, ...] = ("sparse", "dense", "reranked")
"""Trace keys whose scores are meaningful (BM25, cosine, cross-encoder logit)."""

RANKED_LISTS: tuple[str, ...] = ("merged",)
"""Trace keys used by rank only (fusion scores are derived from ranks)."""

LISTS: tuple[str, ...] = SCORED_LISTS + RANKED_LISTS

MISSING_SCORE = -1000.0
"""Sentinel score of a document absent from a list (below any BM25, cosine or logit)."""

FEATURE_VERSION = 1
"""Bumped whenever :data:`FEATURE_NAMES` or their definition change (cached features and
model files record it; a mismatch is refused)."""


def _names() -> tuple[str, ...]:
    out: list[str] = []
    for key in SCORED_LISTS:
        out += [f"{key}_present", f"{key}_best_score", f"{key}_mean_score", f"{key}_best_gap",
                f"{key}_best_rank", f"{key}_n_passages"]
    for key in RANKED_LISTS:
        out += [f"{key}_present", f"{key}_best_rank", f"{key}_n_passages"]
    out += ["baseline_rank", "n_passages", "n_passages_top10", "n_subqueries_retrieved",
            "share_subqueries_retrieved", "n_subqueries", "question_multi", "classifier_score", "query_words"]
    return tuple(out)


FEATURE_NAMES: tuple[str, ...] = _names()
"""Feature columns, in matrix order (see the module docstring)."""


@dataclass
class Candidates:
    """The candidate documents of one question and their features.

    Attributes:
        doc_ids: ``n`` candidate document ids, in baseline order (documents of the interleaved
            final ranking first, then the others in order of first appearance).
        features: ``float64`` array of shape ``(n, len(FEATURE_NAMES))``.
        passages: document id → its candidate passage ids, best first: passages scored by the
            cross-encoder by their best logit, then the others by their best rank in the
            fused (``merged``) lists, then by best rank in any list.
    """

    doc_ids: list[str]
    features: np.ndarray
    passages: dict[str, list[str]] = field(default_factory=dict)


def baseline_final(finals: Sequence[Ranking]) -> Ranking:
    """The ``interleave`` merge: the only ranking, or the round-robin of several sub-queries'."""
    return finals[0] if len(finals) == 1 else interleave(list(finals))


def extract(question: str, classification: Classification | None, rankings: Mapping[str, Sequence[Ranking]],
            final: Ranking, depth: int) -> Candidates:
    """Candidate documents and their features for one question.

    Args:
        question: the question text (its word count is a feature).
        classification: the classifier's output (``None``: single, no score).
        rankings: trace key → one Ranking per sub-query (keys of :data:`LISTS` used; others
            ignored; a missing key counts as empty lists).
        final: the baseline (interleaved) final ranking of the question.
        depth: candidates kept per list (each list is cut at its first ``depth`` entries; the
            rank sentinel is ``depth + 1``).

    Returns:
        :class:`Candidates` (``n = 0`` when no list holds a passage).
    """
    cut = {key: [r.top(depth) for r in rankings.get(key, [])] for key in LISTS}
    n_sub = max([len(v) for v in cut.values()] + [1])
    final = final.top(depth)
    order = _document_order(final, cut)
    if not order:
        return Candidates([], np.zeros((0, len(FEATURE_NAMES))), {})
    row_of = {d: i for i, d in enumerate(order)}
    n = len(order)
    col = {name: j for j, name in enumerate(FEATURE_NAMES)}
    X = np.zeros((n, len(FEATURE_NAMES)), dtype=np.float64)
    sentinel_rank = float(depth + 1)

    passage_sets: dict[str, set[str]] = {d: set() for d in order}
    top10: dict[str, set[str]] = {d: set() for d in order}
    subs: dict[str, set[int]] = {d: set() for d in order}
    best_ce: dict[str, float] = {}
    best_merged_rank: dict[str, int] = {}
    best_any_rank: dict[str, int] = {}
    for key in LISTS:
        scored = key in SCORED_LISTS
        best = np.full(n, -np.inf)
        gap = np.full(n, -np.inf)
        total = np.zeros(n)
        count = np.zeros(n)
        rank = np.full(n, np.inf)
        for si, r in enumerate(cut[key]):
            top_score = r.scores[0] if r.scores else 0.0
            for i, (pid, s) in enumerate(zip(r.ids, r.scores)):
                d = doc_of(pid)
                k = row_of[d]
                passage_sets[d].add(pid)
                subs[d].add(si)
                if i < 10:
                    top10[d].add(pid)
                best_any_rank[pid] = min(best_any_rank.get(pid, 1 << 30), i)
                count[k] += 1
                rank[k] = min(rank[k], i + 1)
                if scored:
                    s = float(s)
                    best[k] = max(best[k], s)
                    gap[k] = max(gap[k], s - float(top_score))
                    total[k] += s
                if key == "reranked":
                    best_ce[pid] = max(best_ce.get(pid, -np.inf), float(s))
                if key == "merged":
                    best_merged_rank[pid] = min(best_merged_rank.get(pid, 1 << 30), i)
        _list_columns(X, col, key, count, rank, sentinel_rank, (best, total, gap) if scored else None)

    _document_columns(X, col, order, final, passage_sets, top10, subs, n_sub, sentinel_rank)
    X[:, col["n_subqueries"]] = n_sub
    X[:, col["question_multi"]] = (1.0 if classification is not None and classification.question_type == "multi"
                                   else 0.0)
    X[:, col["classifier_score"]] = (float(classification.score) if classification is not None
                                     and classification.score is not None else MISSING_SCORE)
    X[:, col["query_words"]] = float(len(question.split()))

    passages = {d: sorted(passage_sets[d], key=lambda p: (
        0 if p in best_ce else 1, -best_ce.get(p, 0.0), best_merged_rank.get(p, 1 << 30),
        best_any_rank.get(p, 1 << 30), p)) for d in order}
    return Candidates(order, X, passages)


def _list_columns(X: np.ndarray, col: dict[str, int], key: str, count: np.ndarray, rank: np.ndarray,
                  sentinel_rank: float, scores: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
    """Fill list ``key``'s columns of ``X``: present, best rank (``sentinel_rank`` when absent),
    passages; for a scored list also the best, mean and best-gap score (``scores`` = (best,
    total, gap) per document; :data:`MISSING_SCORE` when absent)."""
    present = count > 0
    X[:, col[f"{key}_present"]] = present
    X[:, col[f"{key}_best_rank"]] = np.where(present, rank, sentinel_rank)
    X[:, col[f"{key}_n_passages"]] = count
    if scores is not None:
        best, total, gap = scores
        X[:, col[f"{key}_best_score"]] = np.where(present, best, MISSING_SCORE)
        X[:, col[f"{key}_mean_score"]] = np.where(present, total / np.maximum(count, 1), MISSING_SCORE)
        X[:, col[f"{key}_best_gap"]] = np.where(present, gap, MISSING_SCORE)


def _document_columns(X: np.ndarray, col: dict[str, int], order: list[str], final: Ranking,
                      passage_sets: dict[str, set[str]], top10: dict[str, set[str]], subs: dict[str, set[int]],
                      n_sub: int, sentinel_rank: float) -> None:
    """Fill the per-document columns of ``X`` (rows in ``order``): the baseline rank and the
    passage and sub-query counts."""
    base_rank = {d: i + 1 for i, d in enumerate(order[:len({doc_of(p) for p in final.ids})])}
    for k, d in enumerate(order):
        X[k, col["baseline_rank"]] = base_rank.get(d, sentinel_rank)
        X[k, col["n_passages"]] = len(passage_sets[d])
        X[k, col["n_passages_top10"]] = len(top10[d])
        X[k, col["n_subqueries_retrieved"]] = len(subs[d])
        X[k, col["share_subqueries_retrieved"]] = len(subs[d]) / n_sub


def _document_order(final: Ranking, cut: dict[str, list[Ranking]]) -> list[str]:
    """The candidate documents in order: the final ranking's, then each list's (:data:`LISTS`
    order, sub-query by sub-query) not seen before."""
    return docs_in_order(pid for ids in [final.ids] + [r.ids for key in LISTS for r in cut[key]] for pid in ids)
