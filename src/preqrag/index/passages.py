"""The passage store of an index: memory-mapped Arrow, random access by row or by passage id.

``Index.open`` used to read every passage into a dict of objects (2.4 GB of Python objects
for the bench corpus's 85,899 passages would be ~1 TB at FineWeb's ~40 million). The store
instead memory-maps two files written at build time:

* ``passages.arrow`` — the passages table (``id``, ``doc_id``, ``position``, ``text``; row
  ``i`` = passage ``i``) as an uncompressed Arrow IPC file, so opening reads no text and a
  row is read from the page cache when asked for (zero-copy, shared between processes);
* ``passages.lookup.npy`` — ``(n, 2)`` int64: the first 8 bytes of BLAKE2b(passage id) as a
  signed integer, and the row, sorted by hash; a passage id is found by binary search
  (``numpy.searchsorted``) on the memory-mapped array. Hash collisions are resolved by
  comparing the stored id of every row with the same hash.

Indexes built before the store existed (no ``passages.arrow``) are read from
``passages.parquet`` into memory once, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..core.io import id_hash, open_parquet
from ..core.records import Passage

ARROW = "passages.arrow"
LOOKUP = "passages.lookup.npy"


def write_store(parquet: str | Path, out_dir: str | Path, batch_rows: int = 65536) -> int:
    """Write ``passages.arrow`` and ``passages.lookup.npy`` in ``out_dir`` from a passages
    Parquet file, streaming row groups (memory: one batch of text plus 16 bytes per passage).

    Returns:
        The number of passages.
    """
    import pyarrow as pa

    out_dir = Path(out_dir)
    pf = open_parquet(parquet)
    columns = ["id", "doc_id", "position", "text"]
    schema = pa.schema([pf.schema_arrow.field(c) for c in columns])
    hashes: list[np.ndarray] = []
    tmp = out_dir / (ARROW + ".tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
            writer.write_batch(batch)
            hashes.append(np.fromiter((id_hash(x) for x in batch.column(0).to_pylist()), dtype=np.int64,
                                      count=batch.num_rows))
    os.replace(tmp, out_dir / ARROW)
    h = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int64)
    order = np.argsort(h, kind="stable")
    lookup = np.stack([h[order], order.astype(np.int64)], axis=1)
    tmp = out_dir / (LOOKUP + ".tmp.npy")
    np.save(tmp, lookup)
    os.replace(tmp, out_dir / LOOKUP)
    return len(h)


class _Column(Sequence):
    """A read-only sequence view of one string column (``passage_ids[i]``, slices give lists)."""

    def __init__(self, column):
        self._c = column

    def __len__(self) -> int:
        return len(self._c)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._c[i].to_pylist()
        if i < 0:
            i += len(self._c)
        return self._c[i].as_py()

    def __iter__(self) -> Iterator[str]:
        for chunk in self._c.iterchunks():
            yield from chunk.to_pylist()

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))


class PassageStore(Mapping):
    """Passages of an index by id (``store[pid]`` → :class:`~preqrag.core.records.Passage`), memory-mapped.

    Args:
        index_dir: the index directory (``passages.arrow`` + ``passages.lookup.npy``, or an
            older index's ``passages.parquet``).

    Attributes:
        ids: the passage ids in row order (a sequence; row ``i`` = passage ``i``), as the
            retrievers index them.

    Raises (from ``store[pid]``):
        KeyError: no passage with that id.
    """

    def __init__(self, index_dir: str | Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        index_dir = Path(index_dir)
        if (index_dir / ARROW).exists():
            self._table = pa.ipc.open_file(pa.memory_map(str(index_dir / ARROW), "r")).read_all()
            self._lookup = np.load(index_dir / LOOKUP, mmap_mode="r")
            self.memory_mapped = True
        else:
            self._table = pq.read_table(index_dir / "passages.parquet", columns=["id", "doc_id", "position", "text"])
            h = np.fromiter((id_hash(x) for x in self._table.column("id").to_pylist()), dtype=np.int64,
                            count=self._table.num_rows)
            order = np.argsort(h, kind="stable")
            self._lookup = np.stack([h[order], order.astype(np.int64)], axis=1)
            self.memory_mapped = False
        self.ids = _Column(self._table.column("id"))
        self._doc = self._table.column("doc_id")
        self._pos = self._table.column("position")
        self._text = self._table.column("text")

    def __len__(self) -> int:
        return self._table.num_rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def row(self, passage_id: str) -> int:
        """Row of a passage id.

        Raises:
            KeyError: no such passage.
        """
        if not isinstance(passage_id, str):
            raise KeyError(passage_id)
        h = id_hash(passage_id)
        keys = self._lookup[:, 0]
        i = int(np.searchsorted(keys, h))
        while i < len(keys) and keys[i] == h:
            r = int(self._lookup[i, 1])
            if self.ids[r] == passage_id:
                return r
            i += 1
        raise KeyError(passage_id)

    def at(self, row: int) -> Passage:
        """The passage of row ``row``."""
        return Passage(id=self.ids[row], doc_id=self._doc[row].as_py(), position=self._pos[row].as_py(),
                       text=self._text[row].as_py())

    def texts_at(self, rows: Sequence[int]) -> list[str]:
        """The texts of rows ``rows``, in that order (one Arrow ``take``)."""
        return self._text.take(np.asarray(rows, dtype=np.int64)).to_pylist()

    def __getitem__(self, passage_id: str) -> Passage:
        return self.at(self.row(passage_id))

    def __contains__(self, passage_id) -> bool:
        try:
            self.row(passage_id)
        except KeyError:
            return False
        return True

    def values(self) -> Iterator[Passage]:  # type: ignore[override]
        """Every passage in row order (streamed batch by batch)."""
        for batch in self._table.to_batches():
            d = batch.to_pydict()
            for pid, doc, pos, text in zip(d["id"], d["doc_id"], d["position"], d["text"]):
                yield Passage(id=pid, doc_id=doc, position=pos, text=text)
