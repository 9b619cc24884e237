"""Dense retrieval: embedder + a FAISS inner-product index (flat, HNSW, IVF-SQ8 or IVF-PQ).

The index type is chosen at build time by ``[index] dense_index`` (see
:class:`preqrag.core.config.IndexConfig`); the passage vectors are added shard by shard, so
building needs memory for the index structure itself, not for a second copy of every vector.
Types built in memory are checkpointed every :data:`CHECKPOINT_SECONDS`, and an interrupted build
resumes from its checkpoint (:func:`build_faiss`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..core.records import Ranking
from ..core.contracts import Encoder, Filters
from .facets import Facets, group_by_filter

TRAIN_SEED = 0
"""Seed of the training sample of IVF/PQ indexes (same corpus and settings: same index)."""


def factory_string(kind: str, n: int, dim: int, cfg=None) -> str:
    """The FAISS ``index_factory`` string of a dense index type for ``n`` vectors of ``dim``.

    Args:
        kind: ``flat``, ``hnsw``, ``hnsw-sq8``, ``ivf-sq8`` or ``ivf-pq``.
        n: number of vectors (sets the automatic ``nlist``).
        dim: vector dimension (``pq_m`` must divide it).
        cfg: an :class:`~preqrag.core.config.IndexConfig`; ``None`` = its defaults.

    Raises:
        ValueError: unknown kind, ``pq_m`` does not divide ``dim``, or ``refine`` asked for a
            type that has exact scores already (``flat``, ``hnsw``).
    """
    from ..core.config import REFINABLE, IndexConfig

    cfg = cfg or IndexConfig()
    if cfg.refine != "none":  # IndexConfig refuses these at load; a model_copy skips its validators
        if kind not in REFINABLE:
            raise ValueError(f"index.refine = {cfg.refine!r} applies to {' / '.join(REFINABLE)}, not {kind!r} "
                             "(flat and hnsw score with the exact vectors already)")
        return factory_string(kind, n, dim, cfg.model_copy(update={"refine": "none"})) + ",RFlat"
    if kind == "flat":
        return "Flat"
    if kind == "hnsw":
        return f"HNSW{cfg.hnsw_m},Flat"
    if kind == "hnsw-sq8":
        return f"HNSW{cfg.hnsw_m},SQ8"
    nlist = cfg.ivf_nlist or max(1, 2 ** round(math.log2(4 * math.sqrt(max(n, 1)))))
    nlist = min(nlist, max(1, n // 39))  # FAISS warns below 39 training points per centroid
    if kind == "ivf-sq8":
        return f"IVF{nlist},SQ8"
    if kind == "ivf-pq":
        if dim % cfg.pq_m:
            raise ValueError(f"index.pq_m = {cfg.pq_m} does not divide the embedding dimension {dim}")
        return f"IVF{nlist},PQ{cfg.pq_m}x{cfg.pq_nbits}"
    raise ValueError(f"index.dense_index: unknown type {kind!r} (flat, hnsw, hnsw-sq8, ivf-sq8, ivf-pq)")


def _as_shards(embeddings) -> list[np.ndarray]:
    if isinstance(embeddings, np.ndarray):
        return [embeddings]
    return [np.load(s, mmap_mode="r") if isinstance(s, (str, Path)) else s for s in embeddings]


def _rows_of(src, shard, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of one shard as float32: ``shard`` when in memory, else the ``.npy`` file
    ``src`` mapped for the copy and unmapped when it returns."""
    if shard is not None:
        return np.asarray(shard[rows], dtype=np.float32)
    mapped = np.load(src, mmap_mode="r")
    try:
        return np.array(mapped[rows], dtype=np.float32)
    finally:
        del mapped


def _flat_header(dim: int, n: int) -> bytes:
    """The bytes FAISS writes before the vectors of an ``IndexFlatIP`` of ``n`` vectors of ``dim``
    floats (fourcc ``IxFI``, the index header with ``ntotal``, then the code vector's length).

    Derived from FAISS itself rather than hard-coded: the serialisation of a 1-vector index minus
    its vector gives the layout; ``ntotal`` (int64 at byte 8) and the code length (uint64, the
    header's last 8 bytes) are set for ``n``, and the rule is checked against FAISS's own
    serialisation of a 3-vector index.

    Raises:
        RuntimeError: the installed FAISS writes flat indexes differently (the caller falls back
            to ``faiss.write_index``).
    """
    import faiss

    def serialized(vectors: np.ndarray) -> bytes:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return bytes(faiss.serialize_index(index))

    row = dim * 4
    one = serialized(np.ones((1, dim), np.float32))[:-row]
    per_vector = int(np.frombuffer(one[-8:], dtype="<u8")[0])  # code length of 1 vector (floats or bytes)

    def header(k: int) -> bytes:
        h = bytearray(one)
        h[8:16] = np.int64(k).astype("<i8").tobytes()
        h[-8:] = np.uint64(k * per_vector).astype("<u8").tobytes()
        return bytes(h)

    probe = np.random.default_rng(0).random((3, dim), dtype=np.float32)
    if one[:4] != b"IxFI" or header(3) + probe.tobytes() != serialized(probe):
        raise RuntimeError("unexpected FAISS flat index layout")
    return header(n)


def _refine_layout(dim: int, n: int) -> tuple[bytes, bytes]:
    """The bytes FAISS writes around the two parts of an ``IndexRefineFlat`` of ``n`` vectors:
    ``(prefix, suffix)`` with the file = prefix + base index + flat index (:func:`_flat_header`
    + vectors) + suffix (fourcc ``IxRF``, the index header with ``ntotal``; after the parts, the
    default ``k_factor``). Derived from FAISS's own serialisation of a 1-vector index and checked
    on a 3-vector one, as :func:`_flat_header` does.

    Raises:
        RuntimeError: the installed FAISS writes refine indexes differently.
    """
    import faiss

    def parts(vectors: np.ndarray) -> tuple[bytes, bytes, bytes]:
        index = faiss.IndexRefineFlat(faiss.IndexFlatIP(dim))
        index.add(vectors)
        return (bytes(faiss.serialize_index(index)), bytes(faiss.serialize_index(index.base_index)),
                bytes(faiss.serialize_index(index.refine_index)))

    def layout(vectors: np.ndarray) -> tuple[bytes, bytes]:
        whole, base, flat = parts(vectors)
        at = whole.find(base)
        if whole[:4] != b"IxRF" or at < 16 or whole[at + len(base):at + len(base) + len(flat)] != flat:
            raise RuntimeError("unexpected FAISS refine index layout")
        return whole[:at], whole[at + len(base) + len(flat):]

    def prefix(head: bytes, k: int) -> bytes:
        h = bytearray(head)
        h[8:16] = np.int64(k).astype("<i8").tobytes()
        return bytes(h)

    head, suffix = layout(np.ones((1, dim), np.float32))
    if np.frombuffer(head[8:16], dtype="<i8")[0] != 1:
        raise RuntimeError("unexpected FAISS refine index header")
    probe = np.random.default_rng(0).random((3, dim), dtype=np.float32)
    if layout(probe) != (prefix(head, 3), suffix):
        raise RuntimeError("unexpected FAISS refine index layout")
    return prefix(head, n), suffix


def _write_shards(fh, sources: Sequence, dim: int) -> int:
    """Append each shard's float32 rows to ``fh``, one shard in memory at a time; rows written."""
    written = 0
    for src in sources:
        arr = np.load(src) if isinstance(src, (str, Path)) else np.asarray(src)
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != dim:
            raise ValueError(f"vector shard of shape {arr.shape}, expected (rows, {dim})")
        fh.write(arr.tobytes())
        written += len(arr)
        del arr
    return written


def write_flat_index(sources: Sequence, path: str | Path, dim: int, n: int, base=None) -> None:
    """Write an exact inner-product index (FAISS ``IndexFlatIP``) straight from the vector shards:
    the header (:func:`_flat_header`), then each shard's float32 rows in order, to a temporary
    name renamed at the end. Peak memory: one shard (FAISS's own ``add`` grows one vector of all
    codes by reallocation, about twice the index at the end). The file is byte-identical to
    ``faiss.write_index`` of the same index (tests/integration/test_dense_index.py).

    With ``base`` (a trained FAISS index holding the same ``n`` vectors, e.g. IVF-PQ or HNSW-SQ8), the file is
    an ``IndexRefineFlat`` of ``base`` instead (``refine = "flat"``): :func:`_refine_layout`'s
    prefix, ``base``, the flat index as above, the suffix — byte-identical to ``faiss.write_index``
    of ``IndexRefineFlat(base)`` with the same vectors added, at the memory of ``base`` plus one
    shard where FAISS's ``add`` would grow the float32 copy by reallocation (2.65 GB build peak at
    1M × 256-d, docs/results/scale.md)."""
    import faiss

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if base is not None and base.ntotal != n:
        raise ValueError(f"base index holds {base.ntotal} vectors, expected {n}")
    head, tail = _refine_layout(dim, n) if base is not None else (b"", b"")
    flat_header = _flat_header(dim, n)  # both layouts checked before anything is written
    with open(tmp, "wb") as fh:
        fh.write(head)
        if base is not None:
            faiss.write_index(base, faiss.PyCallbackIOWriter(fh.write))
        fh.write(flat_header)
        written = _write_shards(fh, sources, dim)
        fh.write(tail)
        fh.flush()
        os.fsync(fh.fileno())
    if written != n:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"{written} vectors written, expected {n}")
    tmp.replace(path)


CHECKPOINT_SECONDS = 600.0
"""Default seconds between checkpoints of an index built in memory (:func:`build_faiss`). A
checkpoint writes the whole index so far (at 5M × 256-d HNSW-SQ8 up to 2.64 GB), so ten minutes
keeps the cost small for a build that takes hours — measured: 14 checkpoints, 75.2 s of a
9,045 s build (0.8 %; ``bench/ann_scale.py --size 5000000 --types hnsw-sq8``, docs/scale.md) —
while an interruption loses at most ten minutes of inserts."""


def _checkpoint_paths(path: Path) -> tuple[Path, Path]:
    """``(index, state)``: the checkpoint files of the index being built at ``path``."""
    return path.with_name(path.name + ".checkpoint"), path.with_name(path.name + ".checkpoint.json")


def _ends_sha256(shards: Sequence[np.ndarray]) -> str:
    """SHA-256 of each shard's first and last rows (float32): what a checkpoint must match besides
    shapes and settings (:func:`build_faiss`), two pages per memory-mapped file."""
    digest = hashlib.sha256()
    for shard in shards:
        if len(shard):
            digest.update(np.asarray(shard[0], dtype=np.float32).tobytes())
            digest.update(np.asarray(shard[-1], dtype=np.float32).tobytes())
    return digest.hexdigest()


def _restore_level_rng(index, n_added: int) -> None:
    """Bring a reloaded HNSW index's level generator to where ``n_added`` inserts left it.

    FAISS draws each new vertex's level from ``hnsw.rng`` (one draw per vertex,
    ``HNSW::random_level``) and does not serialise the generator: a read index starts again from
    its seed, so later inserts would repeat the first vertices' levels. Drawing ``n_added`` levels
    replays the sequence; with the same batches (one per shard) and one thread a resumed build is
    then byte-identical to an uninterrupted one (tests/integration/test_dense_index.py)."""
    graph = _hnsw_part(index)
    if graph is not None:
        hnsw = graph.hnsw
        for _ in range(n_added):
            hnsw.random_level()


def _hnsw_part(index):
    """The ``IndexHNSW`` of an HNSW index, or of the base of a refined one (FAISS's own
    ``IndexRefineFlat`` over HNSW-SQ8, built in memory where the refine layout is unknown); else None."""
    import faiss

    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexRefine):
        index = faiss.downcast_index(index.base_index)
    return index if isinstance(index, faiss.IndexHNSW) else None


def _resume_checkpoint(path: Path, key: dict, starts: Sequence[int]):
    """The checkpointed index of an interrupted build with the same ``key``, or ``None`` (no
    checkpoint, another key, or an index that does not end at a shard boundary: the stale files
    are removed). The shards already added follow from the index's own ``ntotal``, so a crash
    between writing the index and the state cannot mislead the resume."""
    import faiss

    ck, state = _checkpoint_paths(path)
    try:
        saved = json.loads(state.read_text())
        if saved.get("key") != key or not ck.exists():
            raise ValueError("another build")
        index = faiss.read_index(str(ck))
        if index.ntotal not in starts:
            raise ValueError("not at a shard boundary")
    except (OSError, ValueError, RuntimeError):
        ck.unlink(missing_ok=True)
        state.unlink(missing_ok=True)
        return None, {}
    return index, saved


def _write_checkpoint(index, path: Path, key: dict, trained_on: int, seconds: float) -> None:
    """Write ``index`` as the build's checkpoint, then its state: ``key``, the rows, the training
    sample's size and the build seconds so far (each file atomically: :func:`preqrag.core.io.atomic_write`)."""
    import faiss

    from ..core.io import atomic_write, atomic_write_text

    ck, state = _checkpoint_paths(path)
    atomic_write(ck, lambda fh: faiss.write_index(index, faiss.PyCallbackIOWriter(fh.write)))
    atomic_write_text(state, json.dumps({"key": key, "rows": int(index.ntotal), "train_size_used": trained_on,
                                         "seconds": round(seconds, 1)}))


def build_faiss(embeddings: np.ndarray | Sequence, path: str | Path, cfg=None,
                checkpoint_seconds: float | None = CHECKPOINT_SECONDS,
                progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Write a FAISS inner-product index of the passage vectors to ``path``.

    Args:
        embeddings: float32 ``(n, dim)`` unit-norm vectors, or a sequence of shards (arrays
            or ``.npy`` paths: memory-mapped for the training sample, read one at a time to add
            them) in passage order; row ``i`` = passage ``i``.
        path: output file (written to a temporary name, then renamed).
        cfg: :class:`~preqrag.core.config.IndexConfig` (``None``: exact flat index).
        checkpoint_seconds: for the types built in memory (all but ``flat``), write the index so
            far to ``<path>.checkpoint`` (+ ``.checkpoint.json``, its settings) after the first
            shard that ends this many seconds after the last checkpoint; ``None``: never. Default
            :data:`CHECKPOINT_SECONDS`. A later call with the same vectors (shapes plus each
            shard's first and last rows) and settings resumes from the checkpoint instead of
            starting again; the checkpoint files are removed once ``path`` is written.
        progress: optional callback ``(phase, done, total)``: ``("dense index", rows added, n)``
            after each shard of the types built in memory (at resume, first with the checkpoint's rows).

    Returns:
        What to record in the manifest: ``{"type", "factory", "n", "dim", "train_size"}``, plus
        ``"resumed": {"rows", "seconds_before"}`` (rows found in the checkpoint and the seconds
        the interrupted calls had spent) when the build resumed, and ``"checkpoints": {"written",
        "seconds"}`` (this call's checkpoints and the seconds spent writing them) when any.

    With unit-norm vectors inner product equals cosine similarity. IVF/PQ and SQ8 types are
    trained on ``cfg.train_size`` rows sampled uniformly with seed :data:`TRAIN_SEED`.

    Memory: ``flat`` is written straight from the shards (one shard in memory); with
    ``refine = "flat"`` only the HNSW/IVF part is built in memory and the exact vectors are streamed
    into the file the same way (:func:`write_flat_index` with ``base``); ``hnsw`` holds its
    float32 vectors and graph in memory (``hnsw-sq8``: 8-bit codes instead), the IVF types their
    codes.

    Resume: the checkpointed index is read back, its IVF/SQ training kept, and the shards after
    its last row added; HNSW's level generator is replayed (:func:`_restore_level_rng`), so with
    one FAISS thread the resumed file is byte-identical to an uninterrupted build's (with several
    threads HNSW inserts are not deterministic in either case). At 5M × 256-d, HNSW-SQ8 with
    efConstruction 200 took 2.5 h on 2 cores (docs/scale.md): the checkpoints let such a build
    span interrupted sessions or preemptible machines.
    """
    from ..core.config import IndexConfig

    cfg = cfg or IndexConfig()
    sources = [embeddings] if isinstance(embeddings, np.ndarray) else list(embeddings)
    shards = _as_shards(sources)  # .npy paths memory-mapped: shapes here, then unmapped
    lengths = [len(s) for s in shards]
    n = sum(lengths)
    dim = shards[0].shape[1]
    # what a checkpoint must match besides shapes and settings: each shard's first and last rows
    # (two pages per file; the index build's own work directory is keyed by the corpus hash)
    ends_sha256 = _ends_sha256(shards)
    # a mapped file's touched pages count in this process's resident memory for as long as it stays
    # mapped: keep only in-memory arrays; files are mapped again one at a time for the sample
    shards = [None if isinstance(src, (str, Path)) else s for src, s in zip(sources, shards)]
    spec = factory_string(cfg.dense_index, n, dim, cfg)
    if spec == "Flat":  # exact: written straight from the shards, peak memory one shard
        try:
            write_flat_index(sources, path, dim, n)
            return {"type": cfg.dense_index, "factory": spec, "n": int(n), "dim": int(dim), "train_size": 0}
        except RuntimeError:  # another FAISS layout: build it in memory below
            pass
    return _build_in_memory(sources, shards, lengths, dim, spec, cfg, Path(path), checkpoint_seconds, progress,
                            ends_sha256)


def _build_in_memory(sources: list, shards: list, lengths: list[int], dim: int, spec: str, cfg, path: Path,
                     checkpoint_seconds: float | None, progress, ends_sha256: list[str]) -> dict:
    """:func:`build_faiss` for the types built in memory: resume from a checkpoint or create and
    train the index, add the shards (checkpointing), write it (streaming the exact vectors when
    ``refine = "flat"``) and return the manifest entry."""
    import faiss

    n = sum(lengths)
    stream_refine = _streams_refine(cfg, dim, n)
    base_spec = (factory_string(cfg.dense_index, n, dim, cfg.model_copy(update={"refine": "none"}))
                 if stream_refine else spec)
    t_start = time.perf_counter()
    hnsw = cfg.dense_index in ("hnsw", "hnsw-sq8")
    key = {"factory": base_spec, "n": int(n), "dim": int(dim), "lengths": [int(x) for x in lengths],
           "ef_construction": cfg.hnsw_ef_construction if hnsw else None,
           "train_size": cfg.train_size, "train_seed": TRAIN_SEED,
           "rows_sha256": ends_sha256}
    starts = np.cumsum([0] + lengths)
    index, saved = _resume_checkpoint(path, key, starts) if checkpoint_seconds is not None else (None, {})
    resumed_rows = int(index.ntotal) if index is not None else 0
    trained_on = int(saved.get("train_size_used", 0))
    if index is None:
        index, trained_on = _new_index(base_spec, dim, cfg, sources, shards, starts, n)
    else:
        _restore_level_rng(index, resumed_rows)
    seconds_before = float(saved.get("seconds", 0.0))

    def checkpoint() -> None:
        _write_checkpoint(index, path, key, trained_on, seconds_before + time.perf_counter() - t_start)

    checkpoints = _add_shards(index, sources, shards, starts, resumed_rows, checkpoint_seconds, checkpoint,
                              progress)
    info = {"type": cfg.dense_index, "factory": spec, "n": int(n), "dim": int(dim), "train_size": trained_on}
    if resumed_rows:
        info["resumed"] = {"rows": resumed_rows, "seconds_before": seconds_before}
    if checkpoints:
        info["checkpoints"] = {"written": len(checkpoints), "seconds": round(sum(checkpoints), 1)}
    if stream_refine:
        write_flat_index(sources, path, dim, n, base=index)
    else:
        tmp = path.with_name(path.name + ".tmp")
        faiss.write_index(index, str(tmp))
        tmp.replace(path)
    for f in _checkpoint_paths(path):
        f.unlink(missing_ok=True)
    return info


def _streams_refine(cfg, dim: int, n: int) -> bool:
    """``refine = "flat"`` whose exact vectors :func:`write_flat_index` can stream into the file
    (the HNSW/IVF part built in memory); False for another FAISS layout (FAISS's own
    IndexRefineFlat, built in memory) or another ``refine``."""
    if cfg.refine != "flat":
        return False
    try:
        _refine_layout(dim, n), _flat_header(dim, n)
        return True
    except RuntimeError:
        return False


def _new_index(spec: str, dim: int, cfg, sources: list, shards: list, starts: np.ndarray, n: int):
    """``(index, rows trained on)``: an empty FAISS index of factory ``spec`` (inner product),
    HNSW's efConstruction set, trained when its type needs it (:func:`_train`)."""
    import faiss

    index = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    if cfg.dense_index in ("hnsw", "hnsw-sq8"):
        _hnsw_part(index).hnsw.efConstruction = cfg.hnsw_ef_construction
    trained_on = 0
    if not index.is_trained:
        trained_on = _train(index, sources, shards, starts, min(n, cfg.train_size))
    return index, trained_on


def _train(index, sources: list, shards: list, starts: np.ndarray, size: int) -> int:
    """Train ``index`` (IVF/PQ, SQ8) on ``size`` rows sampled uniformly with seed
    :data:`TRAIN_SEED`; returns the rows used. Only the sample's rows are read, each file mapped
    while its rows are copied: readahead brings in far more than the sampled rows (at 5M × 256-d
    the sample of 100,000 touched ~4 GB of the 5.1 GB of files, which stayed resident while the
    maps lived)."""
    n = int(starts[-1])
    rows = np.sort(np.random.default_rng(TRAIN_SEED).choice(n, size=size, replace=False))
    sample = np.concatenate([_rows_of(src, s, rows[(rows >= a) & (rows < b)] - a)
                             for src, s, a, b in zip(sources, shards, starts[:-1], starts[1:])])
    index.train(sample)
    return len(sample)


def _add_shards(index, sources: list, shards: list, starts: np.ndarray, resumed_rows: int,
                checkpoint_seconds: float | None, checkpoint: Callable[[], None],
                progress: Callable[[str, int, int], None] | None) -> list[float]:
    """Add the shards after row ``resumed_rows`` to ``index``, calling ``checkpoint()`` after the
    first shard that ends ``checkpoint_seconds`` after the last one (never after the last shard);
    returns the seconds each checkpoint took. Each shard's vectors are read, not mapped: mapped
    pages would count in the build's resident memory (~the whole vector set by the end)."""
    n = int(starts[-1])
    last_checkpoint, checkpoints = time.monotonic(), []
    if progress:
        progress("dense index", resumed_rows, n)
    for i in range(int(np.searchsorted(starts, resumed_rows)), len(sources)):
        src, shard = sources[i], shards[i]
        arr = np.load(src) if isinstance(src, (str, Path)) else shard
        index.add(np.ascontiguousarray(arr, dtype=np.float32))
        del arr
        if progress:
            progress("dense index", int(starts[i + 1]), n)
        if (checkpoint_seconds is not None and i + 1 < len(sources)
                and time.monotonic() - last_checkpoint >= checkpoint_seconds):
            t_ck = time.perf_counter()
            checkpoint()
            checkpoints.append(time.perf_counter() - t_ck)
            last_checkpoint = time.monotonic()
    return checkpoints


class DenseRetriever:
    """Dense retrieval over a FAISS index (PreQRAG §2.3 dense index; the paper used e5-base-v2).

    Args:
        faiss_path: the index file (``<index>/dense.faiss``, any type :func:`build_faiss`
            writes), row ``i`` = passage ``i``.
        passage_ids: passage id of row ``i``.
        encoder: the embedder the index was built with (checked by Index).
        batch_size: query encoding batch size.
        cfg: :class:`~preqrag.core.config.IndexConfig`: ``mmap`` (open memory-mapped) and the
            search-time settings ``hnsw_ef_search`` / ``ivf_nprobe``.

    Filters (metadata facets, e.g. DoTA-RAG's topic namespaces, §2.2): the index's facets
    (:mod:`preqrag.retrieval.facets`: declared facet files in the index directory, or a label per
    passage row added with :meth:`add_facet`); ``search(..., filters=...)`` then restricts each query
    to the rows whose labels are allowed, with a FAISS ``IDSelectorBitmap`` (with a flat index,
    exact search over those rows only; HNSW and IVF skip the other rows during their
    approximate search, so a very selective filter can lower their recall).
    """

    name = "dense"

    def __init__(self, faiss_path: str | Path, passage_ids: list[str], encoder: Encoder, batch_size: int = 32,
                 cfg=None):
        from ..core.config import IndexConfig

        self.cfg = cfg or IndexConfig()
        self.faiss_path = Path(faiss_path)
        self.passage_ids = passage_ids
        self.encoder = encoder
        self.batch_size = batch_size
        self._index = None
        self._facets: Facets | None = None
        self._rows: dict[str, int] | None = None

    @property
    def learned_models(self) -> tuple[dict[str, str], ...]:
        """Its encoder's: a fine-tuned one's identity, else ``()``."""
        return self.encoder.learned_models

    @property
    def facets(self) -> Facets:
        """The index's facets (shared with its BM25 retriever; see :mod:`preqrag.retrieval.facets`)."""
        if self._facets is None:
            self._facets = Facets(len(self.passage_ids))
        return self._facets

    @facets.setter
    def facets(self, value: Facets) -> None:
        self._facets = value

    def add_facet(self, name: str, values: list[str], labels: np.ndarray) -> None:
        """Register facet ``name``: passage row ``i`` has value ``values[labels[i]]``
        (:meth:`Facets.add`)."""
        self.facets.add(name, values, labels)

    def filter_mask(self, filters: dict[str, list[str]]) -> np.ndarray | None:
        """Boolean mask over the passage rows ``filters`` allow, or None for ``{}``
        (:meth:`Facets.mask`)."""
        return self.facets.mask(filters, "dense retrieval")

    def warm_up(self) -> None:
        """Open the FAISS index now rather than at the first search (memory-mapped with ``[index]
        mmap``)."""
        self._load()

    @property
    def faiss_index(self):
        """The FAISS index (``faiss.Index``), opened on first use: for code that reads it directly
        (all rows with ``reconstruct_n``, its ``d``, its factory string); vectors by passage id:
        :meth:`vectors`."""
        return self._load()

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored vectors of passages ``ids``, float32 ``(len(ids), dim)`` in that order, read
        back from the FAISS index by row (``reconstruct_batch``; nothing re-encoded). The id → row
        map is built on the first call (one dict entry per passage).

        Raises:
            KeyError: a passage id not in the index.
        """
        index = self._load()
        if not ids:
            return np.zeros((0, index.d), np.float32)
        if self._rows is None:
            self._rows = {pid: i for i, pid in enumerate(self.passage_ids)}
        rows = np.asarray([self._rows[pid] for pid in ids], dtype=np.int64)
        return np.asarray(index.reconstruct_batch(rows), dtype=np.float32)

    def _load(self):
        if self._index is None:
            import faiss

            flags = 0
            if self.cfg.mmap:
                with open(self.faiss_path, "rb") as fh:
                    ivf = fh.read(2) == b"Iw"  # FAISS fourcc of IndexIVF* ("IwSq", "IwPQ", "IwFl" ...)
                # IVF: inverted lists mapped (IO_FLAG_MMAP); flat codes and HNSW storage:
                # IO_FLAG_MMAP_IFC. The two flags cannot be combined for IVF indexes. A refined
                # IVF index ("IxRF"): IO_FLAG_MMAP_IFC maps its exact vectors (measured: no
                # anonymous memory added at open), IO_FLAG_MMAP would read them into memory.
                flags = (faiss.IO_FLAG_MMAP if ivf else faiss.IO_FLAG_MMAP_IFC) | faiss.IO_FLAG_READ_ONLY
            self._index = faiss.read_index(str(self.faiss_path), flags)
        return self._index

    def _params(self, index, sel=None):
        """FAISS search parameters: the filter selector and the type's search-time setting."""
        import faiss

        kw = {} if sel is None else {"sel": sel}
        if isinstance(index, faiss.IndexRefine):  # HNSW/IVF candidates (filtered there), re-scored exactly
            base = faiss.downcast_index(index.base_index)
            return faiss.IndexRefineSearchParameters(k_factor=float(self.cfg.refine_k_factor),
                                                     base_index_params=self._params(base, sel))
        if isinstance(index, faiss.IndexHNSW):
            return faiss.SearchParametersHNSW(efSearch=self.cfg.hnsw_ef_search, **kw)
        if isinstance(index, faiss.IndexIVF):
            return faiss.SearchParametersIVF(nprobe=min(self.cfg.ivf_nprobe, index.nlist), **kw)
        return faiss.SearchParameters(**kw) if kw else None

    def search_vectors(self, vectors: np.ndarray, k: int, mask: np.ndarray | None = None) -> list[Ranking]:
        """Search with precomputed query embeddings, float32 ``(n, dim)``; ``mask`` (bool per
        passage row) restricts the search to those rows (FAISS ``IDSelectorBitmap``)."""
        index = self._load()
        if mask is None:
            k = min(k, index.ntotal)
            params = self._params(index)
        else:
            import faiss

            k = min(k, int(mask.sum()))
            if k == 0:
                return [Ranking() for _ in range(len(vectors))]
            bitmap = np.packbits(mask.astype(bool), bitorder="little")  # must outlive the search
            selector = faiss.IDSelectorBitmap(bitmap)
            params = self._params(index, selector)
        scores, rows = index.search(np.ascontiguousarray(vectors, dtype=np.float32), k, params=params)
        return [Ranking(ids=[self.passage_ids[i] for i in r if i >= 0],
                        scores=[float(s) for s, i in zip(sc, r) if i >= 0])
                for sc, r in zip(scores, rows)]

    def search(self, queries: list[str], k: int, filters: Sequence[Filters] | None = None) -> list[Ranking]:
        """Top-``k`` passages per query; ``filters[i]`` (optional, facet → allowed values, ``{}``
        for none) restricts query ``i`` (see :meth:`filter_mask`). Queries with the same filter
        are searched together."""
        if not queries:
            return []
        vectors = self.encoder.encode(queries, is_query=True, batch_size=self.batch_size)
        if not filters or not any(filters):
            return self.search_vectors(vectors, k)
        out: list[Ranking] = [Ranking()] * len(queries)
        for members in group_by_filter(filters):
            found = self.search_vectors(vectors[members], k, self.filter_mask(filters[members[0]]))
            for i, r in zip(members, found):
                out[i] = r
        return out
