"""Metadata facets of an index's passages, for filtered retrieval (:data:`preqrag.stages.Filters`).

A facet gives every passage row a label, e.g. DoTA-RAG's topic namespaces (§2.2: the routed
query searches only the namespaces its votes chose). The BM25 and dense retrievers of one
index share one :class:`Facets`, so a filter means the same rows to both: BM25 applies it
as bm25s's ``weight_mask`` (scores of other rows multiplied by 0), dense retrieval as a FAISS
``IDSelectorBitmap``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..stages import Filters


class Facets:
    """Registered facets over ``n_rows`` passage rows.

    Attributes:
        facets: facet name → (values, labels): row ``i`` has value ``values[labels[i]]``.
    """

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.facets: dict[str, tuple[list[str], np.ndarray]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.facets

    def add(self, name: str, values: list[str], labels: np.ndarray) -> None:
        """Register facet ``name``: row ``i`` has value ``values[labels[i]]``.

        Raises:
            ValueError: ``labels`` is not one label per passage row.
        """
        labels = np.asarray(labels)
        if labels.shape != (self.n_rows,):
            raise ValueError(f"facet {name!r}: {labels.shape[0] if labels.ndim else 0} labels for "
                             f"{self.n_rows} passages")
        self.facets[name] = (list(values), labels)

    def mask(self, filters: Filters, who: str = "retrieval") -> np.ndarray | None:
        """Boolean mask over the rows ``filters`` allow (any listed value of a facet, every
        facet), or None for no filter (``{}``).

        Raises:
            ValueError: an unregistered facet or an unknown value (``who`` names the retriever).
        """
        mask = None
        for facet, allowed in filters.items():
            if facet not in self.facets:
                raise ValueError(f"{who}: no facet {facet!r} registered (known: {sorted(self.facets)})")
            values, labels = self.facets[facet]
            unknown = [v for v in allowed if v not in values]
            if unknown:
                raise ValueError(f"{who}: unknown {facet} value(s) {unknown}")
            m = np.isin(labels, [values.index(v) for v in allowed])
            mask = m if mask is None else mask & m
        return mask


def group_by_filter(filters: Sequence[Filters]) -> list[list[int]]:
    """Indices of the queries that share a filter, in first-seen order (each group is one
    search call with one mask)."""
    groups: dict[str, list[int]] = {}
    for i, f in enumerate(filters):
        groups.setdefault(repr(sorted((name, sorted(v)) for name, v in f.items())), []).append(i)
    return list(groups.values())
