"""Approximate dense indexes against exact search on real passage vectors (issue 11 §3).

    python bench/ann.py --index IDX --questions ../shared/liverag-bench/dev.jsonl --sample 500 \\
        [--types flat,hnsw,ivf-sq8,ivf-pq,ivf-pq+rflat] [--sweep] [-o docs/bench/ann.json]

``IDX`` is an index built with the default flat dense index; its vectors are read back
(``reconstruct_n``) and each type of :class:`preqrag.core.config.IndexConfig` is built from them with
its default settings (:func:`preqrag.retrieval.dense.build_faiss`) in a temporary directory.
The sample's questions are encoded once with the index's embedder. For each type the row
records: build seconds, file size, ``open_seconds`` (memory-mapped open), recall@10 against
flat (share of the exact top-10 passages found, averaged over questions), dense-only retrieval
at document level on the sample (single hit@10 / MRR@10, multi recall@10; the ladder's
definitions, :func:`bench.harness.final_retrieval_columns`), and search latency p50 / p95 in
ms for batches of 1 and of 16 queries (query encoding excluded; ``faiss.omp_set_num_threads``
left at the machine's default). A type ``T+rflat`` is ``T`` with ``refine = "flat"``.

``--sweep``: per type, also the search-time setting at other values (HNSW ``hnsw_ef_search``, IVF
``ivf_nprobe``: :data:`SWEEP`), one row each with recall@10 against flat and batch-1 latency, so
the settings that reach a recall target can be read off (issue 24: recall@10 >= 0.95 at p50 <= 10 ms).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import final_retrieval_columns, gold_traces, machine, pct, recall_vs  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.index.embedded import Index  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.retrieval.dense import DenseRetriever, build_faiss  # noqa: E402
from scale import type_config  # noqa: E402  (the scale rows' types: "+rflat", pq_m dividing dim)


SWEEP = {"hnsw": ("hnsw_ef_search", (16, 32, 64, 256, 512)), "ivf-sq8": ("ivf_nprobe", (8, 16, 64, 128, 256)),
         "ivf-pq": ("ivf_nprobe", (8, 16, 64, 128, 256))}
"""Values measured by ``--sweep`` besides the default (hnsw_ef_search 128, ivf_nprobe 32)."""


def latency_ms(r: DenseRetriever, vectors: np.ndarray, batch: int, k: int = 10, rounds: int = 200) -> tuple[float, float]:
    """p50 / p95 milliseconds of one ``search_vectors`` call on ``batch`` queries."""
    times = []
    for i in range(rounds):
        start = (i * batch) % max(1, len(vectors) - batch)
        q = vectors[start:start + batch]
        t = time.perf_counter()
        r.search_vectors(q, k)
        times.append((time.perf_counter() - t) * 1000)
    return round(pct(times, 50), 3), round(pct(times, 95), 3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--types", default="flat,hnsw,ivf-sq8,ivf-pq")
    ap.add_argument("--sweep", action="store_true", help="also other hnsw_ef_search / ivf_nprobe values (SWEEP)")
    ap.add_argument("--top-k", type=int, default=100, help="passages retrieved for the document-level columns")
    ap.add_argument("-o", "--out", default="docs/bench/ann.json")
    args = ap.parse_args(argv)
    import faiss

    cfg = load_config(None)
    index = Index.open(args.index, cfg)
    flat = faiss.read_index(str(Path(args.index) / "dense.faiss"))
    vectors = flat.reconstruct_n(0, flat.ntotal)
    del flat
    questions, _ = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    qvec = index.encoder.encode([q.question for q in questions], is_query=True, batch_size=32)
    ids = index.passage_ids
    rows, sweep, exact_top = [], [], None
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.types.split(","):
            icfg = type_config(kind, vectors.shape[1])
            path = Path(tmp) / f"{kind}.faiss"
            t = time.perf_counter()
            info = build_faiss(vectors, path, icfg)
            build_s = time.perf_counter() - t
            t = time.perf_counter()
            r = DenseRetriever(path, ids, index.encoder, cfg=icfg)
            r.warm_up()
            open_s = time.perf_counter() - t
            found = r.search_vectors(qvec, args.top_k)
            top10 = [set(x.ids[:10]) for x in found]
            if kind == "flat":
                exact_top = top10
            recall = recall_vs(exact_top, top10) if exact_top is not None else None
            b1 = latency_ms(r, qvec, 1)
            b16 = latency_ms(r, qvec, 16, rounds=50)
            row = {"dense_index": kind, "factory": info["factory"], "passages": info["n"],
                   "build_seconds": round(build_s, 2), "size_mb": round(path.stat().st_size / 2**20, 1),
                   "open_seconds": round(open_s, 4), "recall@10_vs_flat": None if recall is None else round(recall, 4),
                   **{f"dense_only_{k}": None if v is None else round(v, 4) for k, v in final_retrieval_columns(gold_traces(questions, found),
                                                                                questions).items()},
                   "p50_ms_batch1": b1[0], "p95_ms_batch1": b1[1], "p50_ms_batch16": b16[0],
                   "p95_ms_batch16": b16[1], "settings": icfg.model_dump()}
            print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)
            rows.append(row)
            field, values = SWEEP.get(kind.partition("+")[0], (None, ()))
            for v in values if args.sweep else ():
                r.cfg = icfg.model_copy(update={field: v})
                top10 = [set(x.ids[:10]) for x in r.search_vectors(qvec, 10)]
                b1 = latency_ms(r, qvec, 1)
                sweep.append({"dense_index": kind, "setting": field, "value": v,
                              "recall@10_vs_flat": round(recall_vs(exact_top, top10), 4),
                              "p50_ms_batch1": b1[0], "p95_ms_batch1": b1[1]})
                print(json.dumps(sweep[-1]), flush=True)
    data = {"rows": rows, "sweep": sweep, "embedder": cfg.embedder.name, "questions": len(questions),
            "index": "IDX", "machine": machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python bench/ann.py " + " ".join(argv or sys.argv[1:]).replace(args.index, "IDX"),
            "note": note(rows)}
    out = Path(args.out)
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


def note(rows: list[dict]) -> str:
    """What the file's figures mean (written into it; docs/results/ann.md shows it)."""
    s = rows[0]["settings"] if rows else {}
    return ("Each row: one dense index type built from the index's vectors with its default settings "
            f"(search: hnsw_ef_search {s.get('hnsw_ef_search')}, ivf_nprobe {s.get('ivf_nprobe')}); recall@10_vs_flat: "
            "share of the exact top-10 passages found; dense_only_*: dense retrieval alone at document level; "
            "latencies in ms for batches of 1 and 16 queries, query encoding excluded. sweep: the same types at "
            "other values of their search-time setting, recall@10 against flat and batch-1 latency.")


run = main
"""The entry of ``python -m bench ann`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
