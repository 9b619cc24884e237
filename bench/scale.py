"""Issue 11: how building and serving grow with the corpus — docs/bench/scale.json.

For each size N (``--sizes``, passages):

1. **Corpus.** A seeded synthetic corpus of N one-passage documents resampled from real text: the
   sentences of a source index's passages (``--source``, an index directory) are pooled, and each
   document takes uniformly drawn sentences until it reaches a length drawn from the source
   passages' word counts (``numpy.random.default_rng(seed)``). Written as FineWeb-style Parquet
   (``id``, ``text``). Not timed.
2. **Build** with the production command, as a child process: ``preqrag index --corpus C --index
   DIR --config scale.toml`` where scale.toml sets ``[embedder] name = "wordllama"`` (the static
   WordLlama encoder: encoding N passages with all-MiniLM-L6-v2 would take N/16 s here, ~3.6 days
   at 5M) and ``[index] dense_index = "flat"``. Phase seconds from the manifest; peak RSS = the
   child's own ``VmHWM`` (:func:`harness.peak_mb`; rows before 2026-11-26 10:00 UTC: ``ru_maxrss``, which
   starts at the parent's RSS). The other dense types (``--types``) are built from the
   flat index's vectors (written once as memory-mapped ``.npy`` files) with
   :func:`preqrag.retrieval.dense.build_faiss`, each in its own child (its seconds and peak RSS);
   their ``build_seconds`` = the flat build minus its dense phase plus theirs. IVF-PQ uses the default
   48 sub-quantisers where they divide the dimension, else the largest count ≤ 48 that does (32 for
   WordLlama's 256).
3. **Serve**, one child per type: ``Index.open`` (BM25 memory-mapped, the passage store) and the
   type's ``DenseRetriever`` load, timed (``open_seconds``); then ``--queries`` dev questions (the
   fixed-seed sample) searched one at a time and in batches of 16: BM25 and dense p50/p95 ms
   (dense: search of precomputed query vectors, encoding excluded). ``serve_rss_mb`` = the child's
   ``RssAnon`` after the queries (anonymous memory: memory-mapped index pages are not counted, as
   the issue's target says), ``serve_vmrss_mb`` = its whole ``VmRSS``. ``recall@10_vs_flat``:
   mean share of the flat top-10 found by the type's top-10. IVF rows also at other ``ivf_nprobe``
   values (:data:`SWEEP_NPROBE`), HNSW rows at other ``hnsw_ef_search`` values (:data:`SWEEP_EF_SEARCH`).

Also recorded: the real encoder's passages/s (``--real-encoder-sample`` passages with the default
embedder, all-MiniLM-L6-v2), so the WordLlama build times can be read against it.

Usage:
  python bench/scale.py --source IDX --questions ../shared/liverag-bench/dev.jsonl \\
         --sizes 100000,1000000,5000000 --types flat,hnsw,ivf-pq --workdir /tmp/scale \\
         [--queries 200] [--seed 0] [--keep] [-o docs/bench/scale.json]
Rows merge into an existing output by (passages, dense_index). Sizes run in the order given;
each size's directory is removed after its rows unless ``--keep``. docs/results/scale.md shows the
JSON (``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import command as recorded_command, machine, pct, peak_mb, recall_vs, status_mb  # noqa: E402

HERE = Path(__file__).resolve()
SENTENCE = re.compile(r"(?<=[.!?])\s+")
ROW_GROUP = 50_000
SWEEP_NPROBE = (16, 64, 128, 256)
"""IVF rows: nprobe values also measured (p50/p95 and recall@10 against flat) beside the default 32."""
SWEEP_EF_SEARCH = (32, 64, 256, 512)
"""HNSW rows: efSearch values also measured beside the default 128 (``[index] hnsw_ef_search``)."""


def sweep_setting(kind: str) -> tuple[str | None, tuple, str]:
    """The search-time setting a type is also measured at: (IndexConfig field, values, the rows'
    column name). IVF types: ``ivf_nprobe``; HNSW types: ``hnsw_ef_search``; flat: none."""
    if kind.startswith("ivf"):
        return "ivf_nprobe", SWEEP_NPROBE, "nprobe"
    if kind.startswith("hnsw"):
        return "hnsw_ef_search", SWEEP_EF_SEARCH, "ef_search"
    return None, (), "nprobe"


# ---------------------------------------------------------------------------------------- corpus
def generate(source: Path, n: int, seed: int, out: Path) -> dict:
    """Write ``n`` synthetic one-passage documents resampled from ``source``'s passages to ``out``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = pq.read_table(source / "passages.parquet", columns=["text"]).column("text").to_pylist()
    lengths = np.asarray([len(t.split()) for t in texts])
    pool = [s for t in texts for s in SENTENCE.split(t) if s.strip()]
    words = np.asarray([len(s.split()) for s in pool])
    del texts
    rng = np.random.default_rng(seed)
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    with pq.ParquetWriter(str(out), schema) as w:
        for lo in range(0, n, ROW_GROUP):
            hi = min(n, lo + ROW_GROUP)
            ids, docs = [], []
            targets = rng.choice(lengths, size=hi - lo)
            for i, target in enumerate(targets):
                parts, have = [], 0
                while have < max(1, target):
                    j = int(rng.integers(len(pool)))
                    parts.append(pool[j])
                    have += int(words[j])
                ids.append(f"syn-{lo + i}")
                docs.append(" ".join(parts))
            w.write_table(pa.table({"id": ids, "text": docs}, schema=schema))
    return {"source_passages": int(len(lengths)), "sentences": len(pool), "seed": seed}


# ---------------------------------------------------------------------------------------- children
def run_child(args: list[str], out_json: Path | None = None) -> tuple[dict | None, float, float]:
    """Run a child process; (its JSON on stdout or in ``out_json``, wall seconds, its peak RSS in MB as
    it reported it: :func:`harness.peak_mb` of its own process)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"child failed ({p.returncode}): {' '.join(args)}\n{err[-3000:]}")
    data = json.loads(out_json.read_text()) if out_json else (json.loads(out) if out.strip() else None)
    peak = (data or {}).pop("_peak_rss_mb", None)
    return data, wall, peak


def child_build(corpus: str, index: str, config: str) -> None:
    """Child: the production build (same code as `preqrag index`), manifest + own peak RSS."""
    from preqrag.core.config import load_config
    from preqrag.index.embedded import build_index

    m = build_index(corpus, index, load_config(config))
    print(json.dumps({"manifest": m, "_peak_rss_mb": peak_mb()}))


def type_config(kind: str, dim: int):
    """The IndexConfig of a row's dense type: ``flat``, ``hnsw``, ``hnsw-sq8``, ``ivf-sq8``, ``ivf-pq``, or
    a lossy type with ``+rflat`` (``refine = "flat"``). PQ: the default 48 sub-quantisers, or the largest
    count that divides ``dim`` (32 for WordLlama's 256)."""
    from preqrag.core.config import IndexConfig

    base, _, refine = kind.partition("+")
    pq_m = max(m for m in range(1, 49) if dim % m == 0)
    return IndexConfig(dense_index=base, pq_m=pq_m, refine="flat" if refine == "rflat" else "none")


def child_dense(vectors_dir: str, out: str, kind: str) -> None:
    """Child: build dense index ``kind`` from the memory-mapped vector files."""
    from preqrag.retrieval.dense import build_faiss

    files = sorted(Path(vectors_dir).glob("v_*.npy"))
    dim = np.load(files[0], mmap_mode="r").shape[1]
    t = time.perf_counter()
    info = build_faiss(files, out, type_config(kind, dim))
    print(json.dumps({"info": info, "seconds": time.perf_counter() - t, "_peak_rss_mb": peak_mb()}))


def child_serve(index: str, config: str, faiss_path: str, kind: str, queries_file: str) -> None:
    """Child: open, query, report latencies, top-10 ids and memory."""
    from preqrag.core.config import load_config
    from preqrag.index.embedded import Index
    from preqrag.retrieval.dense import DenseRetriever

    qs = json.loads(Path(queries_file).read_text())
    cfg = load_config(config)
    t = time.perf_counter()
    idx = Index.open(index, cfg)
    dense = DenseRetriever(faiss_path, idx.passage_ids, idx.encoder, cfg=type_config(kind, idx.encoder.dim))
    dense.warm_up()
    idx.sparse.warm_up()
    open_s = time.perf_counter() - t
    qvec = idx.encoder.encode(qs, is_query=True)
    idx.sparse.search(qs[:2], 10)  # first-call costs out of the figures
    dense.search_vectors(qvec[:2], 10)

    def lat(fn, batch):
        ms = []
        for lo in range(0, len(qs) - batch + 1, batch):
            t0 = time.perf_counter()
            fn(lo, lo + batch)
            ms.append((time.perf_counter() - t0) * 1000)
        return ms

    bm1 = lat(lambda a, b: idx.sparse.search(qs[a:b], 10), 1)
    bm16 = lat(lambda a, b: idx.sparse.search(qs[a:b], 10), 16)
    top = dense.search_vectors(qvec, 10)
    d1 = lat(lambda a, b: dense.search_vectors(qvec[a:b], 10), 1)
    d16 = lat(lambda a, b: dense.search_vectors(qvec[a:b], 10), 16)
    sweep = {}
    # recall/latency trade-off: the same queries at other search-time settings (applied by search_vectors)
    field, values, _ = sweep_setting(kind)
    base_cfg = dense.cfg
    for value in values:
        dense.cfg = base_cfg.model_copy(update={field: value})
        ms = lat(lambda a, b: dense.search_vectors(qvec[a:b], 10), 1)
        sweep[value] = {"dense_p50_ms": round(pct(ms, 50), 3), "dense_p95_ms": round(pct(ms, 95), 3),
                        "top10": [r.ids for r in dense.search_vectors(qvec, 10)]}
    dense.cfg = base_cfg
    serve_rss, serve_vmrss = status_mb("RssAnon"), status_mb("VmRSS")  # before numba is imported
    numba_row = {}
    if importlib.util.find_spec("numba") is not None:  # [index] bm25_backend = "numba", same index
        from preqrag.retrieval.bm25 import BM25Retriever

        nb = BM25Retriever(Path(index) / "bm25", idx.passage_ids, cfg.bm25, mmap=True, backend="numba")
        t = time.perf_counter()
        nb.search(qs[:2], 10)
        numba_row["bm25_numba_first_call_s"] = round(time.perf_counter() - t, 2)
        nb1 = lat(lambda a, b: nb.search(qs[a:b], 10), 1)
        nb16 = lat(lambda a, b: nb.search(qs[a:b], 10), 16)
        numba_row.update({"bm25_numba_p50_ms": round(pct(nb1, 50), 2), "bm25_numba_p95_ms": round(pct(nb1, 95), 2),
                          "bm25_numba_b16_p50_ms": round(pct(nb16, 50), 2)})
    print(json.dumps({
        "sweep": sweep, **numba_row, "open_seconds": round(open_s, 3), "top10": [r.ids for r in top],
        "bm25_p50_ms": round(pct(bm1, 50), 2), "bm25_p95_ms": round(pct(bm1, 95), 2),
        "bm25_b16_p50_ms": round(pct(bm16, 50), 2), "bm25_b16_p95_ms": round(pct(bm16, 95), 2),
        "dense_p50_ms": round(pct(d1, 50), 3), "dense_p95_ms": round(pct(d1, 95), 3),
        "dense_b16_p50_ms": round(pct(d16, 50), 3), "dense_b16_p95_ms": round(pct(d16, 95), 3),
        "serve_rss_mb": serve_rss, "serve_vmrss_mb": serve_vmrss,
        "_peak_rss_mb": peak_mb()}))


# ---------------------------------------------------------------------------------------- parent
def real_encoder_rate(source: Path, n: int) -> dict:
    import pyarrow.parquet as pq

    from preqrag.core.config import load_config
    from preqrag.models.encoders import load_encoder

    cfg = load_config(None)
    texts = pq.read_table(source / "passages.parquet", columns=["text"]).column("text").to_pylist()[:n]
    enc = load_encoder(cfg.embedder)
    enc.encode(texts[:32], is_query=False)
    t = time.perf_counter()
    enc.encode(texts, is_query=False, batch_size=cfg.embedder.batch_size)
    s = time.perf_counter() - t
    return {"embedder": cfg.embedder.name, "passages": len(texts), "seconds": round(s, 2),
            "passages_per_second": round(len(texts) / s, 1)}


def dump_vectors(index: Path, out: Path, rows: int = 262_144) -> None:
    """The flat index's vectors as ``v_00000.npy``... (memory-mapped reads, one file at a time)."""
    import faiss

    flat = faiss.read_index(str(index / "dense.faiss"), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    out.mkdir(parents=True, exist_ok=True)
    for i, lo in enumerate(range(0, flat.ntotal, rows)):
        np.save(out / f"v_{i:05d}.npy", flat.reconstruct_n(lo, min(rows, flat.ntotal - lo)))


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        {"_build": child_build, "_dense": child_dense, "_serve": child_serve}[sys.argv[1]](*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", help="an index directory: its passages are resampled (required)")
    ap.add_argument("--questions", default=str(HERE.parent.parent.parent / "shared" / "liverag-bench" / "dev.jsonl"))
    ap.add_argument("--sizes", default="100000,1000000,5000000")
    ap.add_argument("--types", default="flat,hnsw,ivf-pq")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "preqrag-scale"))
    ap.add_argument("--real-encoder-sample", type=int, default=1024)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--reuse-corpus", action="store_true",
                    help="keep an existing WORKDIR/N/corpus.parquet (generated earlier with the same --source and --seed)")
    ap.add_argument("-o", "--out", default="docs/bench/scale.json")
    args = ap.parse_args(argv)
    if not args.source:
        ap.error("--source is required")

    from preqrag.core.io import atomic_write_text, read_questions

    source, work = Path(args.source), Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    qs, _ = read_questions(args.questions)
    qs = [q.question for q in random.Random(0).sample(qs, min(args.queries, len(qs)))]
    qfile = work / "queries.json"
    qfile.write_text(json.dumps(qs))
    toml = work / "scale.toml"
    toml.write_text('[embedder]\nname = "wordllama"\n[index]\ndense_index = "flat"\n')
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": []}
    command = recorded_command("scale", argv, paths=False)
    if args.real_encoder_sample:
        data["real_encoder"] = {**real_encoder_rate(source, args.real_encoder_sample), "command": command}
    me = [sys.executable, str(HERE)]
    for n in [int(x) for x in args.sizes.split(",")]:
        d = work / str(n)
        corpus = d / "corpus.parquet"
        if args.reuse_corpus and corpus.exists():  # same seed and source: the same corpus (not timed)
            gen = generate(source, 0, args.seed, d / "probe.parquet")
            (d / "probe.parquet").unlink()
            shutil.rmtree(d / "idx", ignore_errors=True)
            shutil.rmtree(d / "idx.partial", ignore_errors=True)
            shutil.rmtree(d / "vectors", ignore_errors=True)
        else:
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            gen = generate(source, n, args.seed, corpus)
        built, _, build_peak = run_child(me + ["_build", str(d / "corpus.parquet"), str(d / "idx"), str(toml)])
        m = built["manifest"]
        disk_common = sum(f.stat().st_size for f in (d / "idx").rglob("*") if f.is_file() and f.name != "dense.faiss")
        print(f"{n}: built in {m['seconds']['total']:.1f}s, peak {build_peak} MB", file=sys.stderr, flush=True)
        flat_top = None
        if any(k != "flat" for k in args.types.split(",")):
            dump_vectors(d / "idx", d / "vectors")
        for kind in args.types.split(","):
            if kind == "flat":
                faiss_path, dense_s, dense_peak = d / "idx" / "dense.faiss", m["seconds"]["dense"], build_peak
            else:
                faiss_path = d / f"{kind}.faiss"
                res, _, dense_peak = run_child(me + ["_dense", str(d / "vectors"), str(faiss_path), kind])
                dense_s = res["seconds"]
            served, _, _ = run_child(me + ["_serve", str(d / "idx"), str(toml), str(faiss_path), kind, str(qfile)])
            top = [set(t) for t in served.pop("top10")]
            if kind == "flat":
                flat_top = top

            def recall_vs_flat(found):
                return None if flat_top is None else round(recall_vs(flat_top, found), 4)

            recall = recall_vs_flat(top)
            setting = sweep_setting(kind)[2]
            served[f"{setting}_sweep"] = [{setting: int(p), "dense_p50_ms": v["dense_p50_ms"],
                                           "dense_p95_ms": v["dense_p95_ms"], "recall@10_vs_flat": recall_vs_flat(v["top10"])}
                                          for p, v in served.pop("sweep").items()]
            row = {"passages": m["n_passages"], "documents": n, "dense_index": kind,
                   "build_seconds": round(m["seconds"]["total"] - m["seconds"]["dense"] + dense_s, 1),
                   "build_phase_seconds": {**{k: v for k, v in m["seconds"].items() if k != "total"},
                                           "dense": round(dense_s, 1)},
                   "build_peak_rss_mb": max(build_peak, dense_peak or 0),
                   "disk_mb": round((disk_common + faiss_path.stat().st_size) / 2**20, 1),
                   **served, "recall@10_vs_flat": recall, "embedder": m["embedder"]["name"],
                   "corpus": gen, "queries": len(qs), "machine": machine(),
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "command": command}
            print(json.dumps({k: v for k, v in row.items() if k not in ("machine", "corpus")}), flush=True)
            data["rows"] = [r for r in data["rows"] if (r["passages"], r["dense_index"]) != (row["passages"], kind)]
            data["rows"].append(row)
            data["rows"].sort(key=lambda r: (r["passages"], r["dense_index"]))
            data["note"] = note(data)
            atomic_write_text(out, json.dumps(data, indent=1) + "\n")
        if not args.keep:
            shutil.rmtree(d)
    return 0


def note(data: dict) -> str:
    """What the rows and sections mean (written into the JSON; docs/results/scale.md shows it)."""
    from preqrag.core.config import IndexConfig

    c, rows = IndexConfig(), data["rows"]
    text = (f"Vectors: {rows[-1]['embedder'] if rows else 'wordllama'} (static; see the docstring of bench/scale.py); "
            "every row's machine and date in the JSON. nprobe_sweep / ef_search_sweep: the IVF / HNSW types at other "
            f"ivf_nprobe / hnsw_ef_search values (the row itself: the defaults, {c.ivf_nprobe} / {c.hnsw_ef_search}); "
            "dense search of one query, recall@10 against flat on the same queries. build_phase_seconds: the "
            "production build's phases (`preqrag index`); a type other than flat is built from the flat index's "
            "vectors, its build_seconds = the flat build minus its dense phase plus its own.")
    r = data.get("flat_build_alone_5m")
    big = [row["build_peak_rss_mb"] for row in rows if row["passages"] >= 5_000_000]
    if r and big:
        text += (f" flat_build_alone_5m: the flat index alone at 5M (final code, from the vector files); the 5M rows' "
                 f"build_peak_rss_mb ({max(big):,.0f} MB) counts file pages the earlier code mapped for reading; "
                 "docs/scale.md explains.")
    if data.get("bm25_build_alone"):
        text += " bm25_build_alone: the BM25 build alone (final code)."
    return text


run = main
"""The entry of ``python -m bench scale`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
