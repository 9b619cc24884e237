"""Build and open a preqrag index: passages + BM25 index + dense FAISS index + manifest.

Layout of an index directory::

    manifest.json      corpus hash, chunking/BM25/embedder settings, counts, phase timings
    passages.parquet   id, doc_id, position, text (row i = passage i)
    passages.arrow     the same table, uncompressed Arrow IPC, memory-mapped at open
    passages.lookup.npy  sorted (id hash, row) pairs: passage id -> row (preqrag.index.passages)
    bm25/              bm25s index
    dense.faiss        FAISS inner-product index of unit-norm passage embeddings ([index] dense_index:
                       flat by default, or HNSW / IVF-SQ8 / IVF-PQ; the type is in the manifest)

``build_index`` works in ``<index>.partial/`` and renames it to ``<index>`` only on
success. Dense embeddings are checkpointed there in shards, so an interrupted build
re-run with the same corpus and settings resumes encoding where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .chunking import Chunker
from ..core.config import PipelineConfig
from ..models.encoders import load_encoder
from ..core.io import atomic_write_text, corpus_files, iter_corpus
from ..models.install import sha256_file
from .passages import PassageStore, write_store
from ..core.records import Passage
from ..retrieval.bm25 import BM25Retriever, build_bm25, parquet_texts
from ..retrieval.dense import DenseRetriever, build_faiss
from ..retrieval.facets import Facets
from ..core.contracts import Encoder, FILTERS, ROWS

MANIFEST_VERSION = 1
SHARD = 2048  # passages per checkpointed embedding shard


class IndexOpenError(ValueError):
    """An index that cannot be opened as configured (missing files, other embedder ...)."""


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes; of a corpus directory, SHA-256 over its corpus files'
    (relative path, SHA-256) lines in :func:`preqrag.core.io.corpus_files` order."""
    path = Path(path)
    if path.is_dir():
        from ..core.io import corpus_files

        lines = "".join(f"{f.relative_to(path).as_posix()}\t{file_sha256(f)}\n" for f in corpus_files(path))
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()
    return sha256_file(path)  # the one file hasher (models, corpora, index files)


def _save_shard(path: Path, embeddings: np.ndarray) -> None:
    """Write one embedding shard atomically (temp file + rename)."""
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, embeddings)
    os.replace(tmp, path)


_MODEL_HASHES: dict[tuple, str] = {}
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".onnx", ".json", ".txt", ".model")
"""Files of a model directory that :func:`model_sha256` covers (weights, tokenizer, configuration)."""


def model_sha256(location: str | Path) -> str | None:
    """Fingerprint of a local model: SHA-256 over the relative path and SHA-256 of every weight,
    tokenizer and configuration file (:data:`MODEL_FILE_SUFFIXES`; ``preqrag_training.json`` left out)
    of a model directory, or of a single model file. ``None`` for a hub name (not on disk).
    Cached per process by path, size and modification time."""
    root = Path(location)
    if not root.exists():
        return None
    files = [root] if root.is_file() else sorted(
        f for f in root.rglob("*") if f.is_file() and f.suffix in MODEL_FILE_SUFFIXES
        and f.name != "preqrag_training.json")
    key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _MODEL_HASHES:
        h = hashlib.sha256()
        for f in files:
            h.update(f"{f.relative_to(root) if f != root else f.name}\0{file_sha256(f)}\n".encode("utf-8"))
        _MODEL_HASHES[key] = h.hexdigest()
    return _MODEL_HASHES[key]


def _embedder_sha256(cfg: PipelineConfig) -> str | None:
    from ..models.files import resolve

    try:
        return model_sha256(resolve(cfg.embedder.name).location)
    except FileNotFoundError:
        return None


def _settings(cfg: PipelineConfig, encoder: Encoder, max_tokens: int) -> dict:
    """The build settings recorded in the manifest. ``embedder.backend`` (``"torch"``,
    ``"onnx-int8"``, ...) is informational: :meth:`Index.open` checks the name and ``model_sha256``
    (the source model's files, the same for both backends of all-MiniLM-L6-v2), so an index built
    with the torch backend serves queries encoded by the ONNX int8 one and the other way round
    (vectors at mean cosine >= 0.99: docs/results/encoder_speed.md)."""
    embedder = {"name": encoder.name, "dim": int(encoder.dim), "max_seq_length": int(encoder.max_seq_length),
                "passage_prefix": cfg.embedder.passage_prefix, "model_sha256": _embedder_sha256(cfg)}
    backend = getattr(encoder, "backend", None)
    if backend:
        embedder["backend"] = backend
    return {
        "chunking": {"max_tokens": max_tokens, "overlap_tokens": cfg.chunking.overlap_tokens,
                     "splitter": "semantic-text-splitter"},
        "bm25": cfg.bm25.index_settings(),
        "embedder": embedder,
    }


def start_partial(partial: Path, key: dict) -> None:
    """Resume the work directory ``partial`` when it was started with the same ``key``
    (``partial.json``), else empty it and start afresh."""
    state = partial / "partial.json"
    if partial.exists():
        try:
            same = json.loads(state.read_text()) == key
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    atomic_write_text(state, json.dumps(key))


def publish_partial(partial: Path, out: Path) -> None:
    """Rename the finished ``partial`` to ``out``; an existing ``out`` is replaced only now
    (moved aside, then removed), so a failure never leaves a half-written index at ``out``."""
    (partial / "partial.json").unlink(missing_ok=True)
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old)
    else:
        os.replace(partial, out)


PASSAGE_ROW_GROUP = 8192
"""Passages per Parquet row group written while chunking."""
CHUNK_BATCH = 256
"""Documents chunked per :meth:`~preqrag.index.chunking.Chunker.split_many` call (one batched tokenizer call)."""


def write_passages(corpus: str | Path, path: str | Path, chunker: Chunker, shard: int = 0, n_shards: int = 1,
                   progress: Callable[[str, int, int], None] | None = None, *,
                   ordinals: bool = False) -> tuple[int, int, int]:
    """Chunk a corpus into a passages Parquet file, streaming (one row group of
    :data:`PASSAGE_ROW_GROUP` passages in memory at a time).

    Args:
        corpus: corpus file (:func:`preqrag.core.io.iter_corpus`).
        path: output Parquet (columns ``id``, ``doc_id``, ``position``, ``text``; with
            ``ordinals`` also ``doc_ordinal``, the document's 0-based position in the corpus,
            which :func:`preqrag.index.shards.merge_shards` orders by: every shard has it, one of one too).
        chunker: the passage splitter.
        shard, n_shards: keep only documents ``o`` with ``o % n_shards == shard``.
        progress: optional callback ``(phase, done, total)``.

    Returns:
        ``(documents in the corpus, documents kept, passages written)``.

    Raises:
        ValueError: a bad corpus line (names file, line and field).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = [("id", pa.string()), ("doc_id", pa.string()), ("position", pa.int64()), ("text", pa.string())]
    if ordinals:
        fields.append(("doc_ordinal", pa.int64()))
    schema = pa.schema(fields)
    cols: dict[str, list] = {name: [] for name in schema.names}
    n_total = n_kept = n_passages = 0
    pending: list[tuple[int, str, str]] = []

    def chunk_pending(writer) -> None:
        nonlocal cols, n_passages
        for (ordinal, _, _), passages in zip(pending, chunker.split_many([(d, t) for _, d, t in pending])):
            for p in passages:
                cols["id"].append(p.id)
                cols["doc_id"].append(p.doc_id)
                cols["position"].append(p.position)
                cols["text"].append(p.text)
                if ordinals:
                    cols["doc_ordinal"].append(ordinal)
            if len(cols["id"]) >= PASSAGE_ROW_GROUP:
                n_passages += len(cols["id"])
                writer.write_table(pa.table(cols, schema=schema))
                cols = {name: [] for name in schema.names}
        pending.clear()

    with pq.ParquetWriter(str(path), schema) as writer:
        for ordinal, (doc_id, text, _meta) in enumerate(iter_corpus(corpus)):
            n_total += 1
            if ordinal % n_shards != shard:
                continue
            n_kept += 1
            pending.append((ordinal, doc_id, text))
            if len(pending) >= CHUNK_BATCH:
                chunk_pending(writer)
            if progress and n_kept % 500 == 0:
                progress("chunking", n_kept, 0)
        chunk_pending(writer)
        if cols["id"]:
            n_passages += len(cols["id"])
            writer.write_table(pa.table(cols, schema=schema))
    return n_total, n_kept, n_passages


def encode_passages(parquet: str | Path, out_dir: str | Path, encoder: Encoder, batch_size: int,
                    progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """Encode the passages of a Parquet file into ``emb_00000.npy``, ... of :data:`SHARD` rows
    each in ``out_dir``, reading :data:`SHARD` texts at a time; files that exist are kept (an
    interrupted build resumes). Returns the files in passage order."""
    from ..core.io import open_parquet

    pf = open_parquet(parquet)
    total = pf.metadata.num_rows
    files: list[Path] = []
    pending: list[str] = []  # batches do not cross row groups: re-cut into exactly SHARD rows

    def flush():
        path = Path(out_dir) / f"emb_{len(files):05d}.npy"
        if not path.exists():
            _save_shard(path, encoder.encode(pending, is_query=False, batch_size=batch_size))
        files.append(path)
        if progress:
            progress("encoding", min(len(files) * SHARD, total), total)

    for batch in pf.iter_batches(batch_size=SHARD, columns=["text"]):
        pending.extend(batch.column("text").to_pylist())
        while len(pending) >= SHARD:
            rest = pending[SHARD:]
            pending = pending[:SHARD]
            flush()
            pending = rest
    if pending:
        flush()
    return files


def build_index(corpus: str | Path, index_dir: str | Path, cfg: PipelineConfig, *,
                overwrite: bool = False, dense: bool = True,
                progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Index a corpus file.

    Args:
        corpus: JSONL / JSONL.gz / Parquet corpus (see :func:`preqrag.core.io.iter_corpus`).
        index_dir: target directory; must not exist unless ``overwrite``.
        cfg: configuration (chunking, bm25, embedder sections are used).
        overwrite: replace an existing index (only after the new one is complete).
        dense: build the dense index (False: BM25 only, e.g. for sparse baselines).
        progress: optional callback ``(phase, done, total)``.

    Returns:
        The manifest dict (also written to ``manifest.json``), including per-phase wall
        seconds in ``seconds`` and the peak resident memory in ``peak_rss_mb``.

    Raises:
        FileExistsError: ``index_dir`` exists and not ``overwrite``.
        ValueError: a bad corpus line (names file, line and field) or an empty corpus.
    """
    corpus, index_dir = Path(corpus), Path(index_dir)
    if index_dir.exists() and not overwrite:
        raise FileExistsError(f"{index_dir} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    corpus_files(corpus)  # an unsupported format is refused here, before hashing or loading a model
    encoder = load_encoder(cfg.embedder)
    max_tokens = min(cfg.chunking.max_tokens, encoder.max_seq_length - 2)  # room for [CLS]/[SEP]
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    corpus_hash = file_sha256(corpus)
    settings = _settings(cfg, encoder, max_tokens)
    settings["dense"] = dense
    key = {"corpus_sha256": corpus_hash, **settings}

    partial = index_dir.with_name(index_dir.name + ".partial")
    start_partial(partial, key)
    seconds["hash"] = time.perf_counter() - t0

    # 1. corpus -> passages, streamed to Parquet row groups
    t = time.perf_counter()
    chunker = Chunker(encoder.tokenizer, max_tokens, cfg.chunking.overlap_tokens)
    n_docs, _, n_passages = write_passages(corpus, partial / "passages.parquet", chunker, progress=progress)
    if not n_passages:
        raise ValueError(f"{corpus}: no passages (empty corpus?)")
    write_store(partial / "passages.parquet", partial)  # memory-mapped passage store (preqrag.index.passages)
    seconds["chunking"] = time.perf_counter() - t

    # 2. sparse index, streamed from the passages file (preqrag.retrieval.bm25.build_bm25)
    t = time.perf_counter()
    build_bm25(parquet_texts(partial / "passages.parquet"), cfg.bm25, partial / "bm25")
    seconds["bm25"] = time.perf_counter() - t

    # 3. dense index, checkpointed in shards
    dense_index = None
    if dense:
        t = time.perf_counter()
        shards = encode_passages(partial / "passages.parquet", partial, encoder, cfg.embedder.batch_size,
                                 progress=progress)
        # shard by shard, memory-mapped; resumes from its checkpoint after an interruption
        dense_index = build_faiss(shards, partial / "dense.faiss", cfg.index, progress=progress)
        for s in shards:
            s.unlink()
        seconds["dense"] = time.perf_counter() - t

    seconds["total"] = time.perf_counter() - t0
    manifest = {
        "version": MANIFEST_VERSION,
        "corpus": {"path": str(corpus), "sha256": corpus_hash, "n_documents": n_docs},
        "n_passages": n_passages,
        **settings,
        "dense_index": dense_index,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    manifest["files"] = record_files(partial)  # sizes and hashes, checked at open (check_index_files)
    atomic_write_text(partial / "manifest.json", json.dumps(manifest, indent=2))
    publish_partial(partial, index_dir)
    manifest["size_bytes"] = sum(f.stat().st_size for f in index_dir.rglob("*") if f.is_file())
    return manifest


FINGERPRINT_BYTES = 65536
"""Bytes hashed at each end of an index file for the check at open (:func:`check_index_files`)."""


def _fingerprint(path: Path, size: int) -> str:
    """SHA-256 of a file's first and last :data:`FINGERPRINT_BYTES` (the whole file when smaller)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(FINGERPRINT_BYTES))
        if size > 2 * FINGERPRINT_BYTES:
            fh.seek(size - FINGERPRINT_BYTES)
            h.update(fh.read(FINGERPRINT_BYTES))
        elif size > FINGERPRINT_BYTES:
            h.update(fh.read())
    return h.hexdigest()


def record_files(index_dir: str | Path) -> dict[str, dict]:
    """``{relative path: {"size", "sha256", "fingerprint"}}`` of every file of an index
    directory but ``manifest.json`` (the manifest's ``files``): what :func:`check_index_files`
    and :func:`verify_index` compare against."""
    root = Path(index_dir)
    out = {}
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if f.is_file() and rel not in ("manifest.json", "partial.json"):  # partial.json: the build's state, removed at publish
            size = f.stat().st_size
            out[rel] = {"size": size, "sha256": file_sha256(f), "fingerprint": _fingerprint(f, size)}
    return out


REBUILD = "rebuild the index with `preqrag index` (or restore the file from a copy)"


def check_index_files(index_dir: str | Path, manifest: dict, *, full: bool = False) -> list[str]:
    """Problems with the files the manifest records (``files``; older indexes have none: no
    check): a file missing, of another size (truncated, grown), or whose first and last 64 KiB
    differ (zeroed, or from another index); with ``full`` also a whole-file SHA-256 mismatch
    (``preqrag index --verify``). Returns ``"<file>: <what>"`` lines; ``[]`` when all is well."""
    root = Path(index_dir)
    problems = []
    for rel, want in (manifest.get("files") or {}).items():
        f = root / rel
        if not f.is_file():
            problems.append(f"{f}: missing")
            continue
        size = f.stat().st_size
        if size != want["size"]:
            problems.append(f"{f}: {size} bytes, the manifest says {want['size']} (truncated or replaced)")
        elif _fingerprint(f, size) != want["fingerprint"]:
            problems.append(f"{f}: content differs from the manifest's (zeroed, damaged, or from another index)")
        elif full and file_sha256(f) != want["sha256"]:
            problems.append(f"{f}: SHA-256 differs from the manifest's (damaged)")
    return problems


def read_manifest(index_dir: str | Path) -> dict:
    """The parsed ``manifest.json`` of an index.

    Raises:
        IndexOpenError: no manifest, or one that is not a JSON object (naming the file and the remedy).
    """
    mpath = Path(index_dir) / "manifest.json"
    if not mpath.exists():
        raise IndexOpenError(f"{index_dir}: not a preqrag index (no manifest.json); build it with `preqrag index`")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise IndexOpenError(f"{mpath}: unreadable ({type(e).__name__}: {e}); {REBUILD}") from e
    if not isinstance(manifest, dict) or "embedder" not in manifest or "bm25" not in manifest:
        raise IndexOpenError(f"{mpath}: not a preqrag manifest; {REBUILD}")
    return manifest


def verify_index(index_dir: str | Path) -> list[str]:
    """Every check :meth:`Index.open` makes on the files, plus the whole-file SHA-256 of each
    (``preqrag index --verify IDX``). Returns the problems (``[]``: intact).

    Raises:
        IndexOpenError: no readable manifest.
    """
    manifest = read_manifest(index_dir)
    if not manifest.get("files"):
        return [f"{index_dir}: built before file records were kept (no 'files' in manifest.json): nothing to verify"]
    return check_index_files(index_dir, manifest, full=True)


@dataclass
class Index:
    """An opened index: passages and the retrievers over them.

    Use :meth:`open`; ``dense`` is ``None`` for a BM25-only index. Implements the
    :class:`preqrag.core.contracts.Index` protocol with capabilities ``rows`` and ``filters``.
    """

    capabilities = frozenset({ROWS, FILTERS})
    path: Path
    manifest: dict
    passages: Mapping[str, Passage]
    passage_ids: Sequence[str]
    sparse: BM25Retriever
    dense: DenseRetriever | None
    encoder: Encoder | None

    def text(self, passage_id: str) -> str:
        """The text of a passage.

        Raises:
            KeyError: no such passage in this index.
        """
        return self.passages[passage_id].text

    @classmethod
    def open(cls, index_dir: str | Path | None, cfg: PipelineConfig) -> "Index":
        """Open ``index_dir`` for the configuration ``cfg``.

        The embedded backend only; :func:`preqrag.index.backends.open_index` opens either backend.

        Raises:
            IndexOpenError: not an index, or built with another embedder (name, or the model files'
                fingerprint recorded as ``embedder.model_sha256``: a re-trained encoder at the same
                path) / BM25 settings than
                ``cfg`` names (retrieval would silently compare incompatible vectors).
        """
        if cfg.index.backend == "milvus":
            raise IndexOpenError('[index] backend = "milvus": open it with preqrag.index.backends.open_index')
        if index_dir is None:
            raise IndexOpenError('--index is required (the index directory), unless [index] backend = "milvus"')
        index_dir = Path(index_dir)
        manifest = read_manifest(index_dir)
        problems = check_index_files(index_dir, manifest)
        if problems:
            raise IndexOpenError("; ".join(problems) + f"; {REBUILD}")
        built = manifest["embedder"]["name"]
        if manifest.get("dense", True) and built != cfg.embedder.name:
            raise IndexOpenError(
                f"{index_dir} was built with embedder {built!r} but the configuration asks for "
                f"{cfg.embedder.name!r}; set [embedder] name = \"{built}\" or rebuild the index")
        built_sha = manifest["embedder"].get("model_sha256")
        if manifest.get("dense", True) and built_sha:
            current = _embedder_sha256(cfg)
            if current is not None and current != built_sha:
                raise IndexOpenError(
                    f"{index_dir} was built with another version of the embedder {built!r} (model sha256 "
                    f"{built_sha[:12]}, now {current[:12]}: retrained or replaced); rebuild the index with "
                    "`preqrag index`")
        if manifest["bm25"] != cfg.bm25.index_settings():  # [bm25] prf* act at query time: not compared
            raise IndexOpenError(f"{index_dir}: BM25 settings differ from the configuration "
                              f"(index: {manifest['bm25']}, config: {cfg.bm25.index_settings()})")
        passages = PassageStore(index_dir)  # memory-mapped; nothing read per passage until asked
        ids = passages.ids
        sparse = BM25Retriever(index_dir / "bm25", ids, cfg.bm25, mmap=cfg.index.mmap, backend=cfg.index.bm25_backend,
                               texts=passages.texts_at)  # RM3's feedback passages ([bm25] prf)
        sparse.facets = Facets(len(ids), index_dir)  # the index's facets, its declared facet files included
        encoder = dense = None
        if manifest.get("dense", True):
            encoder = load_encoder(cfg.embedder, cfg.run.cache_dir)
            dense = DenseRetriever(index_dir / "dense.faiss", ids, encoder, cfg.embedder.batch_size, cfg.index)
            dense.facets = sparse.facets  # one set of facets: a filter means the same rows to both
        return cls(index_dir, manifest, passages, ids, sparse, dense, encoder)
