"""Maximal Marginal Relevance diversification, a rerank-chain step (CIR at TREC 2024 RAG, §2.1).

CIR (TREC 2024 RAG, augmented generation) reranks the top ``j`` pre-ranked segments with
MMR (Carbonell & Goldstein, SIGIR 1998) so that the passages given to the generator are
relevant *and* not redundant (paper §2.1, Eq. 1)::

    MMR = argmax_{D_i in R \\ S} [ λ · Sim1(D_i, Q) − (1 − λ) · max_{D_j in S} Sim2(D_i, D_j) ]

``R`` is the candidate set (the top ``j``), ``S`` the passages already selected, ``Q`` the
query. λ = 1 is pure relevance, λ < 0.5 favours diversity; the paper's runs use
λ ∈ {0.25, 0.5, 0.75, 1} (Table 1, Table 3) and Sim = Jaccard or cosine.

Here (see :class:`MMRStep` for the details and the deviations):

* ``Sim2`` (diversity): Jaccard over the index's BM25 terms, or cosine of the passages'
  stored dense vectors, mapped to [0, 1] as ``(1 + cos) / 2`` (paper §2.1 footnote: cosine
  values "need to be transformed to a non-negative range").
* ``Sim1`` (relevance): by default the incoming ranking's scores (the cross-encoder's,
  in the ``cir`` preset) min-max normalised to [0, 1] per ranking; ``relevance =
  "similarity"`` uses the paper's Sim1 = the same similarity between query and passage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...core.records import Ranking

TokenizeFn = Callable[[list[str]], list[list[str]]]
"""Texts → their terms (for Jaccard)."""
PassageVectorsFn = Callable[[list[str], list[str]], np.ndarray]
"""(passage ids, their texts) → float32 ``(n, dim)`` passage vectors (for cosine)."""
QueryVectorsFn = Callable[[list[str]], np.ndarray]
"""Query texts → float32 ``(n, dim)`` query vectors (cosine relevance only)."""


def minmax(scores: Sequence[float]) -> np.ndarray:
    """Scores min-max normalised to [0, 1], float64 of shape ``(len(scores),)``.

    All-equal scores (including a single one) map to 1.0: every candidate is equally, and
    fully, relevant, so MMR's choice is decided by diversity alone (and then input order).
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    lo, hi = float(s.min()), float(s.max())
    if hi - lo <= 1e-12:
        return np.ones_like(s)
    return (s - lo) / (hi - lo)


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """``|a ∩ b| / |a ∪ b|`` in [0, 1]; 0.0 when both sets are empty (nothing shared)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def jaccard_matrix(term_sets: Sequence[set[str] | frozenset[str]]) -> np.ndarray:
    """Pairwise Jaccard coefficients, float64 ``(n, n)`` (diagonal 1 for non-empty sets)."""
    n = len(term_sets)
    m = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for k in range(i, n):
            m[i, k] = m[k, i] = jaccard(term_sets[i], term_sets[k])
    return m


def cosine_to_unit(cos: np.ndarray) -> np.ndarray:
    """Cosine similarities mapped from [-1, 1] to [0, 1] as ``(1 + cos) / 2``.

    CIR §2.1, footnote: cosine values can be negative and "need to be transformed to a
    non-negative range"; the paper does not say how, this affine map keeps their order."""
    return np.clip((1.0 + np.asarray(cos, dtype=np.float64)) / 2.0, 0.0, 1.0)


def _unit_rows(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms > 0, norms, 1.0)


def mmr_order(relevance: Sequence[float], similarity: np.ndarray, lambda_: float) -> tuple[list[int], list[float]]:
    """Greedy MMR selection (CIR §2.1, Eq. 1; Carbonell & Goldstein 1998).

    Args:
        relevance: ``Sim1(D_i, Q)`` per candidate, shape ``(n,)``, in [0, 1].
        similarity: ``Sim2(D_i, D_k)``, shape ``(n, n)``, in [0, 1].
        lambda_: λ in [0, 1]; 1 = relevance only, 0 = diversity only.

    Returns:
        ``(order, values)``: all ``n`` candidate indices in selection order, and the MMR
        criterion value of each at the moment it was selected (not necessarily
        decreasing). The first pick has no selected set: its penalty is 0. Ties go to the
        earlier candidate (input order), so λ = 1 with non-increasing relevance returns
        the input order.

    Raises:
        ValueError: λ outside [0, 1] or shapes that do not match.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"MMR lambda must lie in [0, 1], got {lambda_}")
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    sim = np.asarray(similarity, dtype=np.float64)
    if sim.shape != (n, n):
        raise ValueError(f"similarity matrix of shape {sim.shape} for {n} candidates")
    remaining = list(range(n))
    max_sim = np.zeros(n, dtype=np.float64)  # max Sim2 to the selected set, per candidate
    order: list[int] = []
    values: list[float] = []
    while remaining:
        cand = np.asarray(remaining)
        crit = lambda_ * rel[cand] - (1.0 - lambda_) * max_sim[cand]
        best = int(np.argmax(crit))  # first maximum: ties keep input order
        pick = remaining.pop(best)
        order.append(pick)
        values.append(float(crit[best]))
        max_sim = np.maximum(max_sim, sim[pick])
    return order, values


class MMRStep:
    """MMR diversification of the top ``top_j`` of each ranking (CIR §2.1, Eq. 1).

    The output ranking holds the ``top_j`` head of the input, reordered by MMR (the rest
    is dropped, as the cross-encoder step drops what is below its depth); its scores are
    the MMR criterion values at selection time (see :func:`mmr_order`). The generator
    then takes the ``generator.context_top_k`` head (CIR's ``k``).

    Relevance (``Sim1``): with ``relevance = "scores"`` (default) the incoming ranking's
    scores, min-max normalised to [0, 1] per ranking (:func:`minmax`). The paper computes
    Sim1 with the same Jaccard / cosine as Sim2 against the query; in the ``cir`` preset
    MMR follows a cross-encoder whose scores are a far better relevance estimate than
    term overlap or MiniLM cosine, and λ = 1 then means "the reranked order, no
    diversification". ``relevance = "similarity"`` gives the paper's Sim1.

    Similarity (``Sim2``):

    * ``"jaccard"``: Jaccard coefficient of the passages' term sets. The paper tokenises,
      removes NLTK's English stopwords and Porter-stems; here ``tokenize`` is the index's
      BM25 tokeniser (bm25s English stopwords, Snowball English stemmer: the same steps,
      and no NLTK data download).
    * ``"cosine"``: cosine of the passages' dense vectors (the vectors stored in the
      index's FAISS index: no re-encoding), mapped to [0, 1] by :func:`cosine_to_unit`.
      The paper used OpenAI text-embedding-3-small (an API); here the index's embedder.

    Args:
        lambda_: λ in [0, 1] (``[mmr] lambda_``).
        similarity: ``"cosine"`` or ``"jaccard"``.
        top_j: candidates diversified per ranking (CIR's ``j``).
        relevance: ``"scores"`` or ``"similarity"``.
        tokenize: texts → term lists (needed for Jaccard).
        passage_vectors: (ids, texts) → vectors (needed for cosine).
        query_vectors: queries → vectors (needed for cosine with relevance = "similarity").

    Raises:
        ValueError (at construction): λ outside [0, 1], an unknown similarity or relevance,
            or a missing function the chosen similarity needs.
    """

    name = "mmr"
    stage = "mmr"
    trace_key = "mmr"

    def __init__(self, lambda_: float, similarity: str, top_j: int, relevance: str = "scores", *,
                 tokenize: TokenizeFn | None = None, passage_vectors: PassageVectorsFn | None = None,
                 query_vectors: QueryVectorsFn | None = None):
        if not 0.0 <= lambda_ <= 1.0:
            raise ValueError(f"mmr.lambda_ must lie in [0, 1], got {lambda_}")
        if similarity not in ("cosine", "jaccard"):
            raise ValueError(f"mmr.similarity: unknown {similarity!r}; valid: cosine, jaccard")
        if relevance not in ("scores", "similarity"):
            raise ValueError(f"mmr.relevance: unknown {relevance!r}; valid: scores, similarity")
        if top_j < 1:
            raise ValueError(f"mmr.top_j must be >= 1, got {top_j}")
        if similarity == "jaccard" and tokenize is None:
            raise ValueError("mmr.similarity = 'jaccard' needs a tokenizer")
        if similarity == "cosine" and passage_vectors is None:
            raise ValueError("mmr.similarity = 'cosine' needs passage vectors")
        if similarity == "cosine" and relevance == "similarity" and query_vectors is None:
            raise ValueError("mmr.relevance = 'similarity' with cosine needs a query encoder")
        self.lambda_ = float(lambda_)
        self.similarity = similarity
        self.top_j = int(top_j)
        self.relevance = relevance
        self.tokenize = tokenize
        self.passage_vectors = passage_vectors
        self.query_vectors = query_vectors

    def warm_up(self) -> None:
        """Nothing to load ahead: the passage vectors are the index's (read on first use), and an
        encoder the step needs (a BM25-only index, or cosine relevance) is the index's or loads
        on first use."""

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]:
        heads = [r.ids[:self.top_j] for r in rankings]
        needs_sim = self.lambda_ < 1.0 or self.relevance == "similarity"
        if not needs_sim:  # λ = 1 with score relevance: the order of the scores, no similarity needed
            sims = [np.zeros((len(h), len(h))) for h in heads]
            rels = [self._score_relevance(r, len(h)) for r, h in zip(rankings, heads)]
        else:
            sims, qsims = self._similarities(queries, heads, text_of)
            rels = [qs if self.relevance == "similarity" else self._score_relevance(r, len(h))
                    for qs, r, h in zip(qsims, rankings, heads)]
        out = []
        for head, rel, sim in zip(heads, rels, sims):
            order, values = mmr_order(rel, sim, self.lambda_)
            out.append(Ranking(ids=[head[i] for i in order], scores=values))
        return out

    @staticmethod
    def _score_relevance(r: Ranking, n: int) -> np.ndarray:
        scores = list(r.scores[:n])
        if len(scores) != n:  # a ranking without scores: its order is its relevance
            scores = [float(n - i) for i in range(n)]
        return minmax(scores)

    def _similarities(self, queries: list[str], heads: list[list[str]],
                      text_of: Callable[[str], str]) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Per ranking: the (n, n) passage-passage Sim2 and, for relevance = "similarity",
        the (n,) query-passage Sim1; one tokenize / vector call for the whole batch."""
        distinct = list(dict.fromkeys(pid for h in heads for pid in h))
        row = {pid: i for i, pid in enumerate(distinct)}
        texts = [text_of(pid) for pid in distinct]
        want_q = self.relevance == "similarity"
        sims: list[np.ndarray] = []
        qsims: list[np.ndarray | None] = []
        if self.similarity == "jaccard":
            terms = [frozenset(t) for t in self.tokenize(texts)] if texts else []
            qterms = [frozenset(t) for t in self.tokenize(list(queries))] if want_q and queries else []
            for qi, h in enumerate(heads):
                sets = [terms[row[p]] for p in h]
                sims.append(jaccard_matrix(sets))
                qsims.append(np.array([jaccard(qterms[qi], s) for s in sets]) if want_q else None)
            return sims, qsims
        vecs = _unit_rows(self.passage_vectors(distinct, texts)) if distinct else np.zeros((0, 1))
        qvecs = _unit_rows(self.query_vectors(list(queries))) if want_q and queries else None
        for qi, h in enumerate(heads):
            v = vecs[[row[p] for p in h]] if h else np.zeros((0, vecs.shape[1]))
            sims.append(cosine_to_unit(v @ v.T))
            qsims.append(cosine_to_unit(v @ qvecs[qi]) if qvecs is not None else None)
        return sims, qsims


def index_passage_vectors(index, cfg) -> PassageVectorsFn:
    """Passage vectors for :class:`MMRStep` from an opened :class:`~preqrag.core.contracts.Index`.

    With a dense index: its stored vectors (:meth:`~preqrag.core.contracts.DenseRetriever.vectors`:
    the embedded index reads them back from FAISS, Milvus from the collection), so nothing is
    re-encoded. A BM25-only index: the passages are encoded with the index's encoder, else
    ``cfg.embedder`` (loaded on first use)."""
    dense = index.dense
    if dense is not None:
        return lambda ids, texts: dense.vectors(ids)
    encoder, batch_size = _encoder(index, cfg), cfg.embedder.batch_size
    return lambda ids, texts: encoder.encode(texts, is_query=False, batch_size=batch_size)


def _encoder(index, cfg):
    if index.encoder is not None:
        return index.encoder
    from ...models.encoders import load_encoder

    return load_encoder(cfg.embedder, cfg.run.cache_dir)


def load_mmr_step(cfg, index) -> MMRStep:
    """The ``mmr`` step of ``cfg.mmr`` over ``index`` (built by
    :func:`preqrag.systems.cir.build.build_mmr_step`, rerank step ``mmr``). Jaccard terms come from the index's BM25
    tokeniser (``cfg.bm25``); cosine vectors from :func:`index_passage_vectors`."""
    from ...retrieval.bm25 import tokenize as bm25_tokenize

    m = cfg.mmr
    tokenize: TokenizeFn | None = None
    passage_vectors: PassageVectorsFn | None = None
    query_vectors: QueryVectorsFn | None = None
    if m.similarity == "jaccard":
        bm25 = cfg.bm25

        def bm25_terms(texts: list[str]) -> list[list[str]]:
            return [list(t) for t in bm25_tokenize(texts, bm25, return_ids=False)]

        tokenize = bm25_terms
    else:
        passage_vectors = index_passage_vectors(index, cfg)
        if m.relevance == "similarity":
            encoder, batch_size = _encoder(index, cfg), cfg.embedder.batch_size

            def encode_queries(queries: list[str]) -> np.ndarray:
                return encoder.encode(queries, is_query=True, batch_size=batch_size)

            query_vectors = encode_queries
    return MMRStep(m.lambda_, m.similarity, m.top_j, m.relevance, tokenize=tokenize,
                   passage_vectors=passage_vectors, query_vectors=query_vectors)
