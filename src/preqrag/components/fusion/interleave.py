"""Round-robin interleaving of ranked lists (PreQRAG §2.2.2 / §2.4)."""

from __future__ import annotations

from collections.abc import Sequence

from ...core.records import Ranking


def interleave_ids(lists: Sequence[Sequence[str]]) -> list[str]:
    """Round-robin merge of ranked id lists, de-duplicated (first occurrence wins).

    ``interleave_ids([["a", "b"], ["c", "a", "d"]]) == ["a", "c", "b", "d"]``.
    """
    seen: set[str] = set()
    out: list[str] = []
    for rank in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if rank < len(lst) and lst[rank] not in seen:
                seen.add(lst[rank])
                out.append(lst[rank])
    return out


def interleave(rankings: list[Ranking]) -> Ranking:
    """Take rank 1 of each ranking, then rank 2 of each, ..., skipping passages already taken.

    Used for multi-document questions so that every sub-question contributes to the top of
    the context, and by :class:`~preqrag.components.fusion.union.UnionFusion`. Scores of the result are
    ``1 / (rank + 1)``.
    """
    ids = interleave_ids([r.ids for r in rankings])
    return Ranking(ids=ids, scores=[1.0 / (i + 1) for i in range(len(ids))])


class InterleaveMerge:
    """The default merge slot (:class:`~preqrag.core.contracts.Merger`): a single sub-query's ranking as
    is, several interleaved round-robin (:func:`interleave`; PreQRAG §2.2.2). No extra trace
    rankings."""

    name = "interleave"
    learned_models: tuple[dict[str, str], ...] = ()
    """No trained model (:class:`~preqrag.core.contracts.Merger`)."""

    def merge(self, questions, classifications, rankings, finals):
        """See :class:`~preqrag.core.contracts.Merger`; returns ``(final, {})`` per question."""
        return [(f[0] if len(f) == 1 else interleave(list(f)), {}) for f in finals]
