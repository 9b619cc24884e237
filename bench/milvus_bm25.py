"""Issue 11: Milvus's BM25 against bm25s, and Milvus dense against FAISS flat, on the dev sample.

Loads an embedded index into a Milvus collection (``preqrag.index.milvus.load_collection``; resumable, so a
killed run continues), then retrieves the top ``--top-k`` passages of every question of the fixed-seed
sample (``random.Random(0).sample``, as bench/ablation.py) with four first-stage retrievers on the raw
question, no reranking:

  bm25s        the embedded index's BM25 (bm25s, English stop words, Snowball stemmer)
  milvus-bm25  Milvus's BM25 Function (standard analyzer: lowercase, no stemming, no stop words)
  faiss-flat   the embedded index's dense retrieval
  milvus-dense Milvus dense search over the same vectors

Row: the ablation ladder's document-level columns (bench/harness.final_retrieval_columns), the mean
overlap of the top-10 passage sets with the embedded retriever of the same kind, and per-query latency
p50 / p95 (ms; one query per call). Milvus Lite is a pure-Python stand-in: its latency says nothing of
a Milvus server. Writes ``--out`` (JSON; docs/results/milvus.md shows it).

Usage:
  python bench/milvus_bm25.py --index IDX --questions ../shared/liverag-bench/dev.jsonl --sample 500
         --uri /tmp/milvus/bench.db [--collection bench] [--out docs/bench/milvus.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

from harness import command, final_retrieval_columns, gold_traces, machine, pct  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.index.embedded import Index  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.index.milvus import MilvusIndex, load_collection  # noqa: E402


def timed(retriever, texts: list[str], k: int):
    out, ms = [], []
    for t in texts:
        t0 = time.perf_counter()
        (r,) = retriever.search([t], k)
        ms.append((time.perf_counter() - t0) * 1000)
        out.append(r)
    return out, ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--uri", required=True, help="Milvus URL or Milvus Lite file")
    ap.add_argument("--collection", default="bench")
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("-o", "--out", default="docs/bench/milvus.json")
    args = ap.parse_args(argv)

    cfg = load_config(None)
    mcfg = cfg.model_copy(update={"index": cfg.index.model_copy(
        update={"backend": "milvus", "uri": args.uri, "collection": args.collection})})
    t0 = time.perf_counter()
    manifest = load_collection(args.index, mcfg, progress=lambda d, t: print(f"\rloaded {d}/{t}", end="",
                                                                              file=sys.stderr, flush=True))
    load_s = time.perf_counter() - t0
    print(file=sys.stderr)
    embedded = Index.open(args.index, cfg)
    t0 = time.perf_counter()
    milvus = MilvusIndex.open(mcfg)
    open_s = time.perf_counter() - t0

    questions, _ = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    texts = [q.question for q in questions]
    first_ms = None
    t0 = time.perf_counter()
    milvus.sparse.search([texts[0]], 10)  # Milvus Lite builds its BM25 structures on the first query
    first_ms = (time.perf_counter() - t0) * 1000
    embedded.sparse.search([texts[0]], 10)
    embedded.dense.search([texts[0]], 10)
    milvus.dense.search([texts[0]], 10)

    rows, tops = [], {}
    for name, retriever, ref in (("bm25s", embedded.sparse, None), ("milvus-bm25", milvus.sparse, "bm25s"),
                                 ("faiss-flat", embedded.dense, None), ("milvus-dense", milvus.dense, "faiss-flat")):
        found, ms = timed(retriever, texts, args.top_k)
        tops[name] = [set(r.ids[:10]) for r in found]
        overlap = None
        if ref:
            overlap = sum(len(a & b) / max(1, len(b)) for a, b in zip(tops[name], tops[ref])) / len(texts)
        cols = final_retrieval_columns(gold_traces(questions, found), questions)
        row = {"retriever": name, **{k: None if v is None else round(v, 4) for k, v in cols.items()},
               "top10_overlap_with": ref, "top10_overlap": None if overlap is None else round(overlap, 4),
               "p50_ms": round(pct(ms, 50), 2), "p95_ms": round(pct(ms, 95), 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)

    data = {"rows": rows, "questions": len(questions), "passages": manifest["n_passages"], "index": str(args.index),
            "uri": args.uri, "load_seconds": round(load_s, 1), "open_seconds": round(open_s, 2),
            "first_bm25_query_ms": round(first_ms, 1), "machine": machine(),
            "versions": {m: __import__("importlib.metadata").metadata.version(m) for m in ("pymilvus", "milvus-lite")},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command("milvus_bm25", argv, paths=False),
            "note": note(args.top_k)}
    out = Path(args.out)
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


def note(top_k: int) -> str:
    """What the rows are (written into the JSON; docs/results/milvus.md shows it)."""
    return (f"Top-{top_k} passages of each question, raw question, no reranking; top10_overlap: mean overlap of the "
            "top-10 passage sets with the embedded retriever named in top10_overlap_with; p50_ms / p95_ms: one query "
            "per call. load_seconds: this run's load into Milvus (0 if resumed complete). Milvus Lite is a "
            "pure-Python stand-in: its latencies say nothing about a Milvus server.")


run = main
"""The entry of ``python -m bench milvus_bm25`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
