"""BM25 pruning of dense candidates (DoTA-RAG §2.3 step 2): a rerank-chain step.

"Compute lexical scores on-the-fly; retain the top 20 passages." For each ranking (the dense
top-100 of DoTA-RAG §2.3 step 1), every candidate is scored by BM25 against the query and the
``keep`` best are kept, best first, with their BM25 scores. Candidates with score 0 (no query
term) stay behind every matching one, in their input order, so a query whose terms match
nothing keeps the dense order instead of emptying the list.

Scores are the index's own BM25 (bm25s, ``[bm25]`` settings, collection statistics of the
whole index: idf and average length over all passages), read for the candidates from the
bm25s score matrix (``BM25.get_scores``): exactly the score ``preqrag``'s BM25 retriever
gives those passages for that query. The authors' code (``rag/pipeline/routing_v6_final.py``)
instead builds a ``rank_bm25.BM25Okapi`` over the 100 candidates alone (their statistics,
whitespace tokens); global statistics are the better-founded choice (a term's rarity in 100
passages retrieved *for* it says little) and need no second tokeniser.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...core.records import Ranking
from ...retrieval.bm25 import BM25Retriever, tokenize


class BM25PruneStep:
    """Rerank step ``bm25-prune``: keep the ``keep`` candidates with the highest BM25 score.

    Args:
        sparse: the index's BM25 retriever (its bm25s index and tokenisation settings).
        keep: candidates kept per ranking (``dota.prune_keep``, DoTA-RAG §2.3: 20).

    The output ranking holds BM25 scores; trace key ``pruned``, stage ``bm25-prune``.
    """

    name = "bm25-prune"
    stage = "bm25-prune"
    trace_key = "pruned"

    def __init__(self, sparse: BM25Retriever, keep: int):
        self.sparse = sparse
        self.keep = keep
        self._row: dict[str, int] | None = None

    def warm_up(self) -> None:
        """Load the bm25s index now."""
        self.sparse.warm_up()

    def scores(self, query: str, ids: list[str]) -> np.ndarray:
        """BM25 score of ``query`` for each passage in ``ids`` (float32, ``len(ids)``); 0 for a
        query with no indexed term.

        Raises:
            KeyError: a passage id not in the index.
        """
        bm25 = self.sparse.bm25
        if self._row is None:
            self._row = {pid: i for i, pid in enumerate(self.sparse.passage_ids)}
        rows = np.asarray([self._row[pid] for pid in ids], dtype=np.int64)
        (tokens,) = tokenize([query], self.sparse.cfg, return_ids=False)
        token_ids = bm25.get_tokens_ids(list(tokens))
        if not token_ids or not len(rows):
            return np.zeros(len(rows), dtype=np.float32)
        return np.asarray(bm25.get_scores_from_ids(token_ids), dtype=np.float32)[rows]

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]:
        """Each ranking pruned to its ``keep`` best BM25 candidates (stable for ties)."""
        out = []
        for q, r in zip(queries, rankings):
            s = self.scores(q, r.ids)
            order = sorted(range(len(r.ids)), key=lambda i: -s[i])[:self.keep]
            out.append(Ranking(ids=[r.ids[i] for i in order], scores=[float(s[i]) for i in order]))
        return out
