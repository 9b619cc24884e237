"""Would exact re-scoring lift an HNSW type's recall at scale? A probe on bench/ann_scale.py's kept files.

Written when preqrag built ``refine = "flat"`` for IVF types only; it led to ``hnsw-sq8`` + refine
(measured end to end by ``bench/ann_scale.py --types hnsw-sq8+rflat --reuse-base``). It asks whether
the same re-scoring would help an HNSW type without building one: it opens ``KIND.faiss`` and ``flat.faiss`` of an ``ann_scale.py`` size
directory memory-mapped (as :class:`preqrag.retrieval.dense.DenseRetriever` opens them), wraps them
in FAISS's ``IndexRefine`` (the base's ``k_factor × k`` candidates re-scored with the exact
vectors), and searches the directory's query vectors one at a time at each (efSearch, k_factor);
recall@10 against exact search (flat, batched). Not a preqrag index type: a measurement that says
whether making one is worth it. Writes OUT (JSON) and prints it.

Usage: python bench/ann_refine_probe.py --workdir WORK/ann/5000000 --base hnsw-sq8 [-o OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import numpy as np

from harness import RowIds, command, machine, pct, recall_vs, vector_shards  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", required=True, help="an ann_scale.py size directory (WORK/N)")
    ap.add_argument("--base", default="hnsw-sq8")
    ap.add_argument("--ef-search", default="256,512,1024")
    ap.add_argument("--k-factor", default="1,4,16")
    ap.add_argument("-o", "--out", default="docs/bench/ann_refine_probe.json")
    args = ap.parse_args(argv)

    import faiss

    from preqrag.core.config import IndexConfig
    from preqrag.core.io import atomic_write_text
    from preqrag.retrieval.dense import DenseRetriever

    d = Path(args.workdir)
    q = np.load(d / "queries.npy")
    n = sum(np.load(f, mmap_mode="r").shape[0] for f in vector_shards(d))
    flat = DenseRetriever(d / "flat.faiss", RowIds(n), encoder=None, cfg=IndexConfig()).faiss_index
    base = DenseRetriever(d / f"{args.base}.faiss", RowIds(n), encoder=None,
                          cfg=IndexConfig(dense_index=args.base)).faiss_index
    exact = [set(r) for r in flat.search(q, 10)[1].tolist()]
    refined = faiss.IndexRefine(base, flat)
    rows = []
    for ef in [int(x) for x in args.ef_search.split(",")]:
        for kf in [int(x) for x in args.k_factor.split(",")]:
            params = faiss.IndexRefineSearchParameters(k_factor=float(kf),
                                                       base_index_params=faiss.SearchParametersHNSW(efSearch=ef))
            refined.search(q, 10, params=params)  # warm-up: touches the pages the timed searches read
            ms, found = [], []
            for i in range(len(q)):
                t = time.perf_counter()
                ids = refined.search(q[i:i + 1], 10, params=params)[1][0]
                ms.append((time.perf_counter() - t) * 1000)
                found.append([int(x) for x in ids])
            rows.append({"hnsw_ef_search": ef, "k_factor": kf, "dense_p50_ms": round(pct(ms, 50), 3),
                         "dense_p95_ms": round(pct(ms, 95), 3), "recall@10": round(recall_vs(exact, found), 4)})
            print(json.dumps(rows[-1]), flush=True)
    out = {"passages": n, "base": args.base, "queries": len(q), "rows": rows, "machine": machine(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": command("ann_refine_probe", argv)}
    atomic_write_text(Path(args.out), json.dumps(out, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench ann_refine_probe`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
