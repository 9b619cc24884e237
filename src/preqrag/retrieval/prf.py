"""RM3 pseudo-relevance feedback for BM25 (``[bm25] prf = "rm3"``), computed with numpy.

The query is searched once; its top ``fbDocs`` passages are taken as relevant and a relevance
model is estimated from them (RM1, Lavrenko & Croft, SIGIR 2001, "Relevance-based language
models")::

    P(w|R)  ∝  Σ_{d ∈ top fbDocs}  P(w|d) · P(q|d)
    P(w|d)  =  tf(w, d) / |d|                       (the passage's own index tokens)
    P(q|d)  =  s(d) / Σ_{d'} s(d')                  (first-pass BM25 scores, normalised)

The ``fbTerms`` terms of highest P(w|R) are kept and renormalised to sum 1 (``rm``). RM3
(Abdul-Jaleel et al., "UMass at TREC 2004: Novelty and HARD") interpolates them with the
original query ``q`` (its term counts, normalised to sum 1: uniform over distinct terms)::

    w(t)    =  α · q(t)  +  (1 − α) · rm(t)         (α = originalQueryWeight)
    s2(d)   =  Σ_t  w(t) · bm25(t, d)

and the second pass ranks every passage by ``s2``, with the index's precomputed per-term BM25
scores (bm25s's score matrix, one column of ``(passage, score)`` entries per term). Defaults
are Anserini's (``-rm3``: fbDocs 10, fbTerms 10, originalQueryWeight 0.5). As in Anserini's
``Rm3Reranker``, a candidate expansion term must be 2 to 20 characters of ``[a-z0-9]`` and occur in
at most 10% of the passages (:func:`anserini_term_ok`; stopwords are already gone: the index's
tokeniser removed them). Unlike Anserini, ``|d|`` is the whole passage's token count (the
index's document length) and a document's terms are not cut to its ``fbTerms`` most frequent
before the sum: the textbook RM1 above. Raw scores as ``P(q|d)`` (Anserini) and normalised
ones give the same ``rm``, which is normalised at the end.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

MAX_DF_RATIO = 0.1
"""Anserini's cut (``Rm3Reranker``): a term in more than this share of the passages is not an
expansion term (a collection-specific stopword)."""

_TERM = re.compile(r"[a-z0-9]{2,20}")


def anserini_term_ok(term: str, df: int, n_docs: int) -> bool:
    """Whether ``term`` may expand a query: 2-20 characters of ``[a-z0-9]`` and a document
    frequency ``df`` of at most :data:`MAX_DF_RATIO` of the ``n_docs`` passages (Anserini's
    ``Rm3Reranker`` filter)."""
    return _TERM.fullmatch(term) is not None and df <= MAX_DF_RATIO * n_docs


def relevance_model(doc_tokens: Sequence[Sequence[str]], doc_scores: Sequence[float], n_terms: int,
                    keep: Callable[[str], bool] | None = None) -> dict[str, float]:
    """RM1 over feedback documents: ``P(w|R) ∝ Σ_d tf(w,d)/|d| · s(d)/Σs``, its ``n_terms``
    heaviest terms renormalised to sum 1 (see the module docstring).

    Args:
        doc_tokens: each feedback document's tokens (``|d|`` = its length; an empty one adds nothing).
        doc_scores: each document's first-pass score, >= 0 (normalised here to ``P(q|d)``).
        n_terms: terms kept (fbTerms), >= 1.
        keep: which terms may be kept (default: all); ``|d|`` still counts every token.

    Returns:
        ``{term: weight}``, at most ``n_terms`` terms, weights summing to 1, heaviest first
        (ties by term); ``{}`` when no document has a kept term or every score is 0.

    Raises:
        ValueError: lengths differ, a negative score, or ``n_terms < 1``.
    """
    if len(doc_tokens) != len(doc_scores):
        raise ValueError(f"relevance_model: {len(doc_tokens)} documents but {len(doc_scores)} scores")
    if n_terms < 1:
        raise ValueError(f"relevance_model: n_terms must be >= 1, got {n_terms}")
    scores = np.asarray(doc_scores, dtype=np.float64)
    if (scores < 0).any():
        raise ValueError("relevance_model: scores must be >= 0")
    total = scores.sum()
    if total <= 0:
        return {}
    rm: dict[str, float] = {}
    for tokens, s in zip(doc_tokens, scores / total):
        if not len(tokens) or s == 0:
            continue
        for term, tf in Counter(tokens).items():
            if keep is None or keep(term):
                rm[term] = rm.get(term, 0.0) + s * tf / len(tokens)
    top = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
    norm = sum(w for _, w in top)
    return {t: float(w / norm) for t, w in top} if norm > 0 else {}


def rm3_weights(query_tokens: Sequence[str], expansion: Mapping[str, float],
                original_weight: float) -> dict[str, float]:
    """RM3's query: ``α · q(t) + (1 − α) · rm(t)``, with ``q(t)`` = the count of ``t`` in
    ``query_tokens`` / their number (a repeated term counts each time, as in plain BM25) and
    ``rm`` = ``expansion`` (from :func:`relevance_model`, summing to 1).

    Returns:
        ``{term: weight}``: the query's terms first, in order, then the new expansion terms;
        weights sum to 1 (to ``α`` when ``expansion`` is empty); ``{}`` for an empty query.

    Raises:
        ValueError: ``original_weight`` outside [0, 1].
    """
    if not 0.0 <= original_weight <= 1.0:
        raise ValueError(f"rm3_weights: original_weight must be in [0, 1], got {original_weight}")
    if not query_tokens:
        return {}
    out = {t: original_weight * c / len(query_tokens) for t, c in Counter(query_tokens).items()}
    for t, w in expansion.items():
        out[t] = out.get(t, 0.0) + (1.0 - original_weight) * w
    return out


def weighted_scores(scores: Mapping, token_ids: np.ndarray, weights: np.ndarray,
                    nonoccurrence: np.ndarray | None = None) -> np.ndarray:
    """``Σ_t weights[t] · bm25(t, d)`` for every passage ``d``, from bm25s's score matrix.

    Args:
        scores: ``bm25s.BM25.scores``: ``data`` (float), ``indices`` (passage rows) and
            ``indptr`` (term ``t``'s entries are ``[indptr[t], indptr[t+1])``), ``num_docs``;
            arrays may be memory-mapped (only the terms' slices are read).
        token_ids: vocabulary ids (int, shape ``(T,)``).
        weights: one weight per id (shape ``(T,)``).
        nonoccurrence: bm25s's per-term score of a passage without the term (BM25L / BM25+),
            added weighted to every passage as bm25s does; None for the other variants.

    Returns:
        float64 array of shape ``(num_docs,)``.
    """
    indptr, n = scores["indptr"], int(scores["num_docs"])
    token_ids = np.asarray(token_ids, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if not len(token_ids):
        return np.zeros(n, dtype=np.float64)
    starts, ends = np.asarray(indptr[token_ids]), np.asarray(indptr[token_ids + 1])
    rows = np.concatenate([scores["indices"][a:b] for a, b in zip(starts, ends)])
    vals = np.concatenate([np.asarray(scores["data"][a:b], dtype=np.float64) * w
                           for a, b, w in zip(starts, ends, weights)])
    out = np.bincount(rows.astype(np.int64), weights=vals, minlength=n)
    if nonoccurrence is not None:
        out += float(np.dot(np.asarray(nonoccurrence[token_ids], dtype=np.float64), weights))
    return out


def top_k(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows of ``scores`` with score > 0 (and ``mask`` true, when given), best
    first, equal scores by row.

    Returns:
        ``(rows, scores)``: int64 and float64 arrays of length <= ``k``.
    """
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    pos = np.flatnonzero(scores > 0)
    if len(pos) > k:
        pos = pos[np.argpartition(-scores[pos], k - 1)[:k]]
        kth = scores[pos].min()  # rows tied with the k-th may have been cut arbitrarily: take the lowest rows
        pos = np.union1d(pos[scores[pos] > kth], np.flatnonzero(scores == kth))
    order = np.lexsort((pos, -scores[pos]))[:k]
    return pos[order].astype(np.int64), scores[pos[order]]
