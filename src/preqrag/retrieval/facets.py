"""Metadata facets of an index's passages, for filtered retrieval (:data:`preqrag.core.contracts.Filters`).

A facet gives every passage row a label, e.g. DoTA-RAG's topic namespaces (§2.2: the routed
query searches only the namespaces its votes chose). The BM25 and dense retrievers of one
index share one :class:`Facets`, so a filter means the same rows to both: BM25 applies it
as bm25s's ``weight_mask`` (scores of other rows multiplied by 0), dense retrieval as a FAISS
``IDSelectorBitmap``.

The index owns its facets. A facet kept in a file inside the index directory is declared once
with :func:`register_facet` (DoTA-RAG's ``topic`` and ``namespace`` facets read
``<index>/topics.npz``, written by ``preqrag topics`` or the ``dota`` rewriter): the index reads
it the first time a filter names it, and again when the file changes. A component that makes
filters therefore never changes the index it shares with other pipelines; it makes the file
current (an atomic write) and names the facet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..core.contracts import Filters

FacetSource = Callable[[Path, int], tuple[list[str], np.ndarray]]
"""Reads a facet from an index directory: ``source(index_dir, n_rows) -> (values, labels)``,
row ``i`` having value ``values[labels[i]]``; raises ValueError when the file is missing or
does not match the index (the message says how to make it)."""

_SOURCES: dict[str, tuple[str, FacetSource]] = {}


def register_facet(name: str, file: str, source: FacetSource) -> None:
    """Declare facet ``name``, kept in ``<index>/<file>`` and read by ``source`` (see
    :data:`FacetSource`). Registered at import by the package that writes the file (once per
    name; the same registration again is a no-op).

    Raises:
        ValueError: ``name`` is already declared with another file or source.
    """
    old = _SOURCES.get(name)
    if old is not None and old != (file, source):
        raise ValueError(f"register_facet: facet {name!r} is already declared (file {old[0]!r})")
    _SOURCES[name] = (file, source)


class Facets:
    """The facets of an index's ``n_rows`` passage rows: those added in memory (:meth:`add`) and
    those declared with :func:`register_facet`, read from ``index_dir`` on first use and re-read
    when their file changes (its size and modification time).

    Attributes:
        facets: facet name → (values, labels): row ``i`` has value ``values[labels[i]]``.
    """

    def __init__(self, n_rows: int, index_dir: str | Path | None = None):
        self.n_rows = n_rows
        self.index_dir = Path(index_dir) if index_dir is not None else None
        self.facets: dict[str, tuple[list[str], np.ndarray]] = {}
        self._stamps: dict[str, tuple[int, int] | None] = {}  # None: added in memory
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        return name in self.facets

    def _current(self, name: str) -> None:
        """Read (or re-read) declared facet ``name`` from the index directory when its file is
        new or changed; nothing for an in-memory facet or an index without a directory."""
        if self.index_dir is None or name not in _SOURCES or (name in self._stamps and self._stamps[name] is None):
            return
        file, source = _SOURCES[name]
        with self._lock:
            try:
                st = (self.index_dir / file).stat()
                stamp = (st.st_size, st.st_mtime_ns)
            except OSError:
                stamp = (-1, -1)  # missing: the source says how to make it
            if self._stamps.get(name) == stamp and name in self.facets:
                return
            values, labels = source(self.index_dir, self.n_rows)
            self._put(name, values, labels)
            self._stamps[name] = stamp

    def add(self, name: str, values: list[str], labels: np.ndarray) -> None:
        """Register facet ``name`` in memory: row ``i`` has value ``values[labels[i]]`` (a declared
        facet of the same name is then no longer read from its file).

        Raises:
            ValueError: ``labels`` is not one label per passage row.
        """
        self._put(name, values, labels)
        self._stamps[name] = None

    def _put(self, name: str, values: list[str], labels: np.ndarray) -> None:
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
            self._current(facet)
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
