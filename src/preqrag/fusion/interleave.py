"""Round-robin interleaving of per-sub-question rankings (PreQRAG §2.2.2 / §2.4)."""

from __future__ import annotations

from ..records import Ranking


def interleave(rankings: list[Ranking]) -> Ranking:
    """Take rank 1 of each list, then rank 2 of each, ..., skipping passages already taken.

    Used for multi-document questions so that every sub-question contributes to the top of
    the context. Scores of the result are ``1 / (rank + 1)``.
    """
    seen: set[str] = set()
    ids: list[str] = []
    depth = max((len(r) for r in rankings), default=0)
    for i in range(depth):
        for r in rankings:
            if i < len(r) and r.ids[i] not in seen:
                seen.add(r.ids[i])
                ids.append(r.ids[i])
    return Ranking(ids=ids, scores=[1.0 / (i + 1) for i in range(len(ids))])
