"""Sharded index builds for clusters (issue 11 §5): ``preqrag index --shard i/N`` and ``preqrag index merge``.

Encoding passages is the expensive part of indexing (about 30 passages/s per CPU core with
MiniLM; FineWeb-10BT has ~40 million passages). A shard build chunks and encodes only the
documents whose 0-based position in the corpus ``o`` has ``o % N == i``, so N jobs of any
scheduler (a Slurm array, Kubernetes jobs, Ray tasks), on GPUs where present, share the work;
each needs the corpus file and the configuration only. Layout of a shard directory::

    shard.json         corpus hash, settings, shard i/N, counts, seconds
    passages.parquet   id, doc_id, position, text, doc_ordinal (the document's position o)
    emb_00000.npy ...  passage vectors, SHARD rows per file, in passage order

:func:`merge_shards` combines the N shards into an ordinary index. It streams: shard ``o % N``
holds document ``o``, so visiting documents in corpus order and taking each one's passages
from its shard (every shard is already in corpus order) restores the one-shot passage order
without sorting or loading every shard at once. BM25 is then built over **all** merged
passages, so its document frequencies and average length are the global ones: per-shard
BM25 indexes would score the same passage differently in each shard. The dense index is
built from the merged vectors shard-file by shard-file (:func:`preqrag.retrieval.dense.build_faiss`).
An index merged from shards therefore equals one built in one go, row for row, and
retrieval returns the same top-k (tested in tests/integration/test_shards.py).

Shard builds resume like one-shot builds (``<shard>.partial/`` keeps finished vector files);
a merge writes ``<index>.partial/`` and renames it only when complete.
"""

from __future__ import annotations

import json
import re
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..core.config import PipelineConfig
from .embedded import publish_partial, record_files, start_partial
from ..core.io import atomic_write_text

SHARD_MANIFEST = "shard.json"
ROW_GROUP = 8192
"""Passages per Parquet row group written by shard builds and merges."""


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/N"`` → ``(i, N)`` with ``0 <= i < N``.

    Raises:
        ValueError: not of the form ``i/N`` or ``i`` out of range.
    """
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise ValueError(f"--shard {spec!r}: expected i/N with 0 <= i < N (e.g. 0/8)")
    return int(m.group(1)), int(m.group(2))


def build_shard(corpus: str | Path, out_dir: str | Path, cfg: PipelineConfig, shard: int, n_shards: int, *,
                overwrite: bool = False, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Chunk and encode shard ``shard`` of ``n_shards`` of a corpus (documents ``o % N == shard``).

    Args:
        corpus: the whole corpus file (every shard reads it; see :func:`preqrag.core.io.iter_corpus`).
        out_dir: the shard directory to create.
        cfg: configuration (chunking, bm25, embedder tables; the same for every shard).
        shard, n_shards: which slice, ``0 <= shard < n_shards``.
        overwrite: replace an existing shard directory.
        progress: optional callback ``(phase, done, total)``.

    Returns:
        The shard manifest (also written to ``shard.json``).

    Raises:
        FileExistsError: ``out_dir`` exists and not ``overwrite``.
        ValueError: bad shard numbers, or a bad corpus line (names file, line and field).
    """
    from .chunking import Chunker
    from ..models.encoders import load_encoder
    from .embedded import _settings, encode_passages, file_sha256, write_passages

    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} of {n_shards}: expected 0 <= shard < n_shards")
    corpus, out_dir = Path(corpus), Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    encoder = load_encoder(cfg.embedder)
    max_tokens = min(cfg.chunking.max_tokens, encoder.max_seq_length - 2)
    settings = {**_settings(cfg, encoder, max_tokens), "dense": True}
    corpus_hash = file_sha256(corpus)
    key = {"corpus_sha256": corpus_hash, **settings, "shard": [shard, n_shards]}
    partial = out_dir.with_name(out_dir.name + ".partial")
    start_partial(partial, key)

    # 1. this shard's documents -> passages, streamed to Parquet row groups
    t = time.perf_counter()
    chunker = Chunker(encoder.tokenizer, max_tokens, cfg.chunking.overlap_tokens)
    n_docs_total, n_docs, n_passages = write_passages(corpus, partial / "passages.parquet", chunker,
                                                      shard, n_shards, progress, ordinals=True)
    seconds["chunking"] = time.perf_counter() - t

    # 2. vectors, checkpointed per SHARD passages (a re-run resumes)
    t = time.perf_counter()
    files = [f.name for f in encode_passages(partial / "passages.parquet", partial, encoder,
                                             cfg.embedder.batch_size, progress)]
    seconds["dense"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    manifest = {"corpus": {"path": str(corpus), "sha256": corpus_hash, "n_documents": n_docs_total},
                "shard": [shard, n_shards], "n_documents": n_docs, "n_passages": n_passages,
                "vector_files": files, "settings": settings,
                "seconds": {k: round(v, 3) for k, v in seconds.items()},
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    atomic_write_text(partial / SHARD_MANIFEST, json.dumps(manifest, indent=2))
    publish_partial(partial, out_dir)
    return manifest


def _load_shards(shard_dirs: Sequence[str | Path]) -> list[tuple[Path, dict]]:
    """Shard directories with their manifests, ordered by shard number; checks they form
    exactly shards 0..N-1 of one corpus with one set of settings.

    Raises:
        ValueError: a directory that is not a finished shard, a missing or repeated shard,
            or shards of different corpora / N / settings (names the directories).
    """
    loaded = []
    for d in map(Path, shard_dirs):
        mpath = d / SHARD_MANIFEST
        if not mpath.exists():
            raise ValueError(f"{d}: not a finished shard (no {SHARD_MANIFEST}); build it with "
                             "`preqrag index --shard i/N`")
        loaded.append((d, json.loads(mpath.read_text())))
    if not loaded:
        raise ValueError("merge: no shard directories given")
    first_dir, first = loaded[0]
    n = first["shard"][1]
    for d, m in loaded[1:]:
        for field, what in (("corpus", "corpus"), ("settings", "settings")):
            a = m[field]["sha256"] if field == "corpus" else m[field]
            b = first[field]["sha256"] if field == "corpus" else first[field]
            if a != b:
                raise ValueError(f"{d}: {what} differs from {first_dir} ({field}); shards of one index must be "
                                 "built from the same corpus file and configuration")
        if m["shard"][1] != n:
            raise ValueError(f"{d}: shard {m['shard'][0]}/{m['shard'][1]} but {first_dir} is of {n} shards")
    seen: dict[int, Path] = {}
    for d, m in loaded:
        i = m["shard"][0]
        if i in seen:
            raise ValueError(f"{d}: shard {i}/{n} given twice (also {seen[i]})")
        seen[i] = d
    missing = sorted(set(range(n)) - set(seen))
    if missing:
        raise ValueError(f"merge: shards {', '.join(f'{i}/{n}' for i in missing)} missing")
    return sorted(loaded, key=lambda x: x[1]["shard"][0])


def _shard_rows(d: Path, m: dict, columns: list[str]) -> Iterator[tuple[int, dict, np.ndarray | None]]:
    """Yield ``(doc_ordinal, row, vector)`` of every passage of a shard, in order (vectors
    memory-mapped from its files)."""
    from ..core.io import open_parquet

    files = [np.load(d / f, mmap_mode="r") for f in m["vector_files"]]
    fi, fr = 0, 0
    for batch in open_parquet(d / "passages.parquet").iter_batches(batch_size=ROW_GROUP,
                                                                       columns=columns + ["doc_ordinal"]):
        data = batch.to_pydict()
        for r in range(batch.num_rows):
            while fi < len(files) and fr >= len(files[fi]):
                fi, fr = fi + 1, 0
            vec = files[fi][fr] if fi < len(files) else None
            fr += 1
            yield data["doc_ordinal"][r], {c: data[c][r] for c in columns}, vec


def _interleave(shards: list, partial: Path, total: int,
                progress: Callable[[str, int, int], None] | None) -> tuple[int, list[Path], bool]:
    """Step 1 of :func:`merge_shards`: the shards' passages written to ``partial/passages.parquet``
    and their vectors to ``emb_*.npy`` files in corpus order (document o from shard o % N).
    Returns ``(passages written, vector files, every shard read to its end)``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .embedded import SHARD, _save_shard

    n_shards = len(shards)
    first = shards[0][1]
    columns = ["id", "doc_id", "position", "text"]
    schema = pa.schema([("id", pa.string()), ("doc_id", pa.string()), ("position", pa.int64()),
                        ("text", pa.string())])
    streams = [_shard_rows(d, m, columns) for d, m in shards]
    heads: list = [next(s, None) for s in streams]
    cols: dict[str, list] = {c: [] for c in columns}
    vec_buf: list[np.ndarray] = []
    vec_files: list[Path] = []
    written = 0
    ordinal = 0
    n_docs = first["corpus"]["n_documents"]
    with pq.ParquetWriter(partial / "passages.parquet", schema) as writer:
        while ordinal < n_docs:
            j = ordinal % n_shards
            while heads[j] is not None and heads[j][0] == ordinal:
                _, row, vec = heads[j]
                for c in columns:
                    cols[c].append(row[c])
                vec_buf.append(vec)
                heads[j] = next(streams[j], None)
                if len(vec_buf) == SHARD:
                    path = partial / f"emb_{len(vec_files):05d}.npy"
                    _save_shard(path, np.stack(vec_buf).astype(np.float32))
                    vec_files.append(path)
                    vec_buf = []
                if len(cols["id"]) >= ROW_GROUP:
                    writer.write_table(pa.table(cols, schema=schema))
                    written += len(cols["id"])
                    cols = {c: [] for c in columns}
                    if progress:
                        progress("merging", written, total)
            ordinal += 1
        if cols["id"]:
            writer.write_table(pa.table(cols, schema=schema))
            written += len(cols["id"])
    if vec_buf:
        path = partial / f"emb_{len(vec_files):05d}.npy"
        _save_shard(path, np.stack(vec_buf).astype(np.float32))
        vec_files.append(path)
    return written, vec_files, all(h is None for h in heads)


def merge_shards(shard_dirs: Sequence[str | Path], index_dir: str | Path, cfg: PipelineConfig, *,
                 overwrite: bool = False, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Combine shards 0..N-1 into one index, identical to a one-shot build of the corpus.

    Args:
        shard_dirs: the N shard directories (any order).
        index_dir: the index directory to create.
        cfg: configuration; its chunking/BM25/embedder settings must be those of the shards.
        overwrite: replace an existing index (only once the merged one is complete).
        progress: optional callback ``(phase, done, total)``.

    Returns:
        The index manifest (as :func:`preqrag.index.embedded.build_index` writes it, plus ``shards``).

    Raises:
        FileExistsError: ``index_dir`` exists and not ``overwrite``.
        ValueError: the shards do not form one complete set (see :func:`_load_shards`), or
            ``cfg`` names other settings than the shards were built with.
    """
    from .embedded import MANIFEST_VERSION
    from ..retrieval.bm25 import build_bm25, parquet_texts
    from ..retrieval.dense import build_faiss

    index_dir = Path(index_dir)
    if index_dir.exists() and not overwrite:
        raise FileExistsError(f"{index_dir} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    shards = _load_shards(shard_dirs)
    first = shards[0][1]
    settings = first["settings"]
    if settings["bm25"] != cfg.bm25.index_settings() or settings["embedder"]["name"] != cfg.embedder.name:
        raise ValueError(f"merge: the shards were built with embedder {settings['embedder']['name']!r} and BM25 "
                         f"{settings['bm25']}; the configuration names {cfg.embedder.name!r} and "
                         f"{cfg.bm25.index_settings()}")
    n_shards = len(shards)
    total = sum(m["n_passages"] for _, m in shards)
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    partial = index_dir.with_name(index_dir.name + ".partial")
    start_partial(partial, {"merge_of": [m["corpus"]["sha256"] for _, m in shards], "settings": settings,
                     "shards": [str(d.resolve()) for d, _ in shards]})

    # 1. passages and vectors in corpus order: document o comes from shard o % N
    written, vec_files, complete = _interleave(shards, partial, total, progress)
    from .passages import write_store

    write_store(partial / "passages.parquet", partial)
    if written != total or not complete:
        raise ValueError(f"merge: wrote {written} of {total} passages; a shard's doc_ordinal column does not "
                         "match the corpus (rebuild the shards)")
    seconds["merge"] = time.perf_counter() - t0

    # 2. BM25 over every passage: global document frequencies
    t = time.perf_counter()
    build_bm25(parquet_texts(partial / "passages.parquet"), cfg.bm25, partial / "bm25")
    seconds["bm25"] = time.perf_counter() - t

    # 3. dense index from the merged vector files (memory-mapped, added file by file)
    t = time.perf_counter()
    dense_index = build_faiss(vec_files, partial / "dense.faiss", cfg.index, progress=progress)
    for f in vec_files:
        f.unlink()
    seconds["dense"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    manifest = {"version": MANIFEST_VERSION, "corpus": first["corpus"], "n_passages": total, **settings,
                "dense_index": dense_index, "shards": n_shards,
                "shard_seconds": [m["seconds"] for _, m in shards],
                "seconds": {k: round(v, 3) for k, v in seconds.items()},
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    manifest["files"] = record_files(partial)  # checked when the index is opened (preqrag.index.embedded.check_index_files)
    atomic_write_text(partial / "manifest.json", json.dumps(manifest, indent=2))
    publish_partial(partial, index_dir)
    manifest["size_bytes"] = sum(f.stat().st_size for f in index_dir.rglob("*") if f.is_file())
    return manifest
