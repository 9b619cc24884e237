"""DoTA-RAG's search in its routed namespaces: a query whose filter leaves no passage (the
routed parts hold none of this index's passages, or none that matches the query) is searched
again without the filter, so that every question gets candidates; the ranking says so, and
the pipeline records it in the plan's fallbacks
(``"<trace key>: no passage matches filters {...}; searched without them"``)."""

from __future__ import annotations

from collections.abc import Sequence

from ...core.contracts import Filters, Retriever
from ...core.records import Ranking


class UnfilteredFallback:
    """A :class:`~preqrag.core.contracts.Retriever` over ``retriever`` that searches again, without
    its filter, every query whose non-empty filter gave an empty ranking (one more batched call
    for all of them); such a ranking's ``fallback`` names the filter. Queries without a filter,
    and filtered ones that found passages, get ``retriever``'s rankings unchanged.

    Args:
        retriever: the retriever to search with (its ``name`` and ``learned_models`` are this one's).
    """

    def __init__(self, retriever: Retriever):
        self.retriever = retriever

    @property
    def name(self) -> str:
        """``retriever``'s."""
        return self.retriever.name

    @property
    def learned_models(self) -> Sequence[dict[str, str]]:
        """``retriever``'s."""
        return self.retriever.learned_models

    def search(self, queries: list[str], k: int, filters: Sequence[Filters] | None = None) -> list[Ranking]:
        """``retriever.search(queries, k, filters)``, each filtered query that found nothing searched
        again without its filter (see the class).

        Raises:
            FilterUnsupported: as ``retriever``, for a filter its index cannot apply.
        """
        found = self.retriever.search(queries, k, filters)
        empty = [i for i, (r, f) in enumerate(zip(found, filters or [])) if f and not r.ids]
        if empty:
            redo = self.retriever.search([queries[i] for i in empty], k)
            for i, r in zip(empty, redo):
                found[i] = r.model_copy(update={
                    "fallback": f"no passage matches filters {filters[i]}; searched without them"})
        return found
