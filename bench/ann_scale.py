"""Issue 24: dense index types at millions of passages, vectors only — docs/bench/ann_scale.json.

bench/scale.py measures a size with the whole production build (chunking, passage store, BM25 and
encoding: 89 min at 5M passages on 2 cores, before any approximate type is built). The ANN target
(p50 <= 10 ms with recall@10 >= 0.95 against exact search) needs only the vectors, so this script
skips the rest:

1. **Corpus**: :func:`scale.generate` with the same ``--source`` and ``--seed`` as scale.py, so the
   documents are those of scale.py's row of that size. Not timed.
2. **Vectors**: :func:`preqrag.index.embedded.encode_passages` (the production encoding step, resumable
   2,048-row shards) with ``[embedder] name = "wordllama"``, one passage per document. scale.py's
   production build chunks first; at 5M it split 14,388 of 5,000,000 documents (0.29 %) into two
   passages, so its vectors differ from these by those rows. Passages/s recorded.
3. **Exact reference**: the ``flat`` type (:func:`preqrag.retrieval.dense.build_faiss` writes it
   straight from the shards), searched memory-mapped for ``--queries`` dev questions (the same
   fixed-seed sample as scale.py; encoded once with WordLlama).
4. **Each type** in ``--types`` (``hnsw``, ``hnsw-sq8``, ``ivf-sq8``, ``ivf-pq``, ``T+rflat`` = ``refine = "flat"``;
   :func:`scale.type_config`): built in a child process from the shard files (seconds, the child's
   peak RSS = its own ``VmHWM``, bench/harness.py's ``peak_mb``), then served in another child: :class:`DenseRetriever` opens it
   memory-mapped (``open_seconds``) and searches the query vectors one at a time at each search-time
   setting of :data:`SWEEP` (p50 / p95 ms of one ``search_vectors`` call, query encoding excluded;
   FAISS's OpenMP threads left at the machine's default), recall@10 = mean share of the exact top-10
   found. ``serve_rss_mb`` = the serving child's ``RssAnon`` after its queries (memory-mapped pages not
   counted, as the serving target says).

Usage:
  python bench/ann_scale.py --source IDX --questions ../shared/liverag-bench/dev.jsonl \\
         --size 5000000 --types ivf-pq+rflat,ivf-sq8 --workdir WORK [--queries 200] [--seed 0] \\
         [--hnsw-ef-construction 64] [--reuse-base] [-o docs/bench/ann_scale.json]
Everything in ``WORKDIR/N`` is kept and reused by a later call with the same size (corpus, vector
shards, built types: delete a file to redo its step); an interrupted build resumes from its checkpoint
(:func:`~preqrag.retrieval.dense.build_faiss`, every 10 minutes), its ``build_seconds`` the sum of the
calls. ``--reuse-base`` makes a ``T+rflat`` type from a kept ``T.faiss`` built with the same settings
(:func:`child_refine`: the refine build's own last step) instead of building ``T`` again. Rows merge
into OUT by (passages, dense_index, hnsw_ef_construction).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from harness import command as recorded_command, machine, pct, recall_vs  # noqa: E402
from harness import RowIds, peak_mb, status_mb, vector_shards  # noqa: E402
from scale import generate, type_config  # noqa: E402

HERE = Path(__file__).resolve()
TARGET = {"recall@10": 0.95, "p50_ms": 10.0}
"""Issue 24's ANN target at 5M passages."""
NOTE = ("Vectors: WordLlama (static, 256-d) of bench/scale.py's synthetic corpus (--from-scale: the chunked "
        "passages of a kept scale.py size, with its built types, whose build figures are in scale.json; else one "
        f"passage per document). Target (issue 24): recall@10 >= {TARGET['recall@10']} against exact search at "
        f"p50 <= {TARGET['p50_ms']:g} ms. sweep: one query at a time at each search-time setting (p50 / p95 ms of "
        "one search, query encoding excluded), recall@10 against flat, meets_target: both numbers met.")
"""What the file's figures mean (written into it; docs/results/ann_scale.md shows it)."""
SWEEP = {
    "hnsw": [{"hnsw_ef_search": e} for e in (16, 32, 64, 128, 256, 512, 768, 1024)],
    "ivf": [{"ivf_nprobe": p} for p in (16, 32, 64, 128, 256, 512, 1024)],
    "rflat": [{"ivf_nprobe": p, "refine_k_factor": k} for k in (16, 64) for p in (32, 64, 128, 256, 512, 1024)],
    # HNSW candidates = max(efSearch, k_factor x 10): small factors, the breadth set by efSearch
    "hnsw+rflat": [{"hnsw_ef_search": e, "refine_k_factor": k} for k in (2, 4) for e in (256, 512, 768, 1024)],
}
"""Search-time settings measured per type (defaults: efSearch 128, nprobe 32, k_factor 16)."""


def _sweep(kind: str) -> list[dict]:
    if kind.endswith("+rflat"):
        return SWEEP["hnsw+rflat"] if kind.startswith("hnsw") else SWEEP["rflat"]
    return SWEEP["hnsw"] if kind.startswith("hnsw") else SWEEP["ivf"] if kind.startswith("ivf") else [{}]


# ---------------------------------------------------------------------------------------- children
def child_build(work: str, kind: str, ef_construction: str = "", reuse_base: str = "") -> None:
    """Child: build ``kind`` from the shard files; seconds, file size and own peak RSS on stdout.
    ``ef_construction``: HNSW types' efConstruction when given (else the configuration's default).
    ``reuse_base`` (``"1"``): a ``T+rflat`` type is made from the kept ``T.faiss`` (:func:`child_refine`)."""
    from preqrag.retrieval.dense import build_faiss

    d = Path(work)
    files = vector_shards(d)
    dim = np.load(files[0], mmap_mode="r").shape[1]
    cfg = type_config(kind, dim)
    if ef_construction and kind.startswith("hnsw"):
        cfg = cfg.model_copy(update={"hnsw_ef_construction": int(ef_construction)})
    if reuse_base and kind.endswith("+rflat"):
        return child_refine(d, kind, cfg, files, dim)
    t = time.perf_counter()
    info = build_faiss(files, d / f"{kind}.faiss", cfg)  # resumes from a checkpoint an interrupted call left
    info["hnsw_ef_construction"] = cfg.hnsw_ef_construction if kind.startswith("hnsw") else None
    # a resumed build: the interrupted calls' seconds are added; the peak is this call's (an index
    # built in memory only grows, so the last call's peak is the build's)
    before = info.get("resumed", {}).get("seconds_before", 0.0)
    print(json.dumps({"info": info, "build_seconds": round(time.perf_counter() - t + before, 1),
                      "build_peak_rss_mb": peak_mb()}))


def child_refine(d: Path, kind: str, cfg, files: list[Path], dim: int) -> None:
    """Child (``--reuse-base``): ``T+rflat`` from the kept build of its base type ``T``, without
    building ``T`` again. :func:`~preqrag.retrieval.dense.build_faiss` with ``refine = "flat"``
    builds ``T``'s part in memory exactly as for ``T`` (same factory string, training sample and
    efConstruction) and then streams the exact vectors after it with ``write_flat_index(...,
    base=...)``; this child reads ``T.faiss`` into memory (as the build holds it at that point) and
    runs that same last step. ``build_seconds`` = ``T``'s build + this write; the peak = the larger
    of ``T``'s build peak and this child's. Refused when ``T.build.json`` records other settings."""
    import faiss

    from preqrag.retrieval.dense import factory_string, write_flat_index

    base_kind = kind.removesuffix("+rflat")
    base_built = json.loads((d / f"{base_kind}.build.json").read_text())
    n = sum(np.load(f, mmap_mode="r").shape[0] for f in files)
    base_spec = factory_string(base_kind, n, dim, cfg.model_copy(update={"refine": "none"}))
    info = dict(base_built["info"])
    want_efc = cfg.hnsw_ef_construction if kind.startswith("hnsw") else None
    if info.get("factory") != base_spec or info.get("hnsw_ef_construction") != want_efc:
        raise SystemExit(f"{base_kind}.build.json: {info.get('factory')} efConstruction "
                         f"{info.get('hnsw_ef_construction')}, not {base_spec} efConstruction {want_efc}")
    t = time.perf_counter()
    base = faiss.read_index(str(d / f"{base_kind}.faiss"))
    write_flat_index(files, d / f"{kind}.faiss", dim, n, base=base)
    seconds, peak = time.perf_counter() - t, peak_mb()
    info.update({"type": kind, "factory": factory_string(base_kind, n, dim, cfg),
                 "base_reused": {"file": f"{base_kind}.faiss", "build_seconds": base_built["build_seconds"],
                                 "build_peak_rss_mb": base_built["build_peak_rss_mb"],
                                 "refine_write_seconds": round(seconds, 1), "refine_write_peak_rss_mb": peak}})
    print(json.dumps({"info": info, "build_seconds": round(base_built["build_seconds"] + seconds, 1),
                      "build_peak_rss_mb": max(base_built["build_peak_rss_mb"], peak)}))


def child_serve(work: str, kind: str) -> None:
    """Child: open ``kind`` memory-mapped, search the query vectors at each setting; top-10 rows."""
    from preqrag.retrieval.dense import DenseRetriever

    d = Path(work)
    q = np.load(d / "queries.npy")
    n = sum(np.load(f, mmap_mode="r").shape[0] for f in vector_shards(d))
    base = type_config(kind, q.shape[1])
    t = time.perf_counter()
    dense = DenseRetriever(d / f"{kind}.faiss", RowIds(n), encoder=None, cfg=base)
    dense.warm_up()
    open_s = time.perf_counter() - t
    # first-call costs and page faults out of the figures: every query once at the sweep's widest
    # setting (touches the pages the timed searches will read; the index file stays memory-mapped)
    dense.cfg = base.model_copy(update=_sweep(kind)[-1])
    dense.search_vectors(q, 10)
    rows = []
    for setting in _sweep(kind):
        dense.cfg = base.model_copy(update=setting)
        ms = []
        for i in range(len(q)):
            t0 = time.perf_counter()
            dense.search_vectors(q[i:i + 1], 10)
            ms.append((time.perf_counter() - t0) * 1000)
        top = [[int(x) for x in r.ids] for r in dense.search_vectors(q, 10)]
        rows.append({"setting": setting, "dense_p50_ms": round(pct(ms, 50), 3), "dense_p95_ms": round(pct(ms, 95), 3),
                     "top10": top})
    print(json.dumps({"open_seconds": round(open_s, 3), "settings": rows, "serve_rss_mb": status_mb("RssAnon"),
                      "factory": _factory(dense.faiss_index),
                      "serve_peak_rss_mb": peak_mb()}))


def _factory(index) -> str:
    """A FAISS index's type in index_factory terms, read back from the file (for linked indexes)."""
    import faiss

    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexRefine):
        return _factory(index.base_index) + ",RFlat"
    if isinstance(index, faiss.IndexHNSW):
        storage = "SQ8" if isinstance(faiss.downcast_index(index.storage), faiss.IndexScalarQuantizer) else "Flat"
        return f"HNSW{index.hnsw.nb_neighbors(1)},{storage}"
    if isinstance(index, faiss.IndexIVFScalarQuantizer):
        return f"IVF{index.nlist},SQ8"
    if isinstance(index, faiss.IndexIVFPQ):
        return f"IVF{index.nlist},PQ{index.pq.M}x{index.pq.nbits}"
    return "Flat" if isinstance(index, faiss.IndexFlat) else type(index).__name__


def _child(args: list[str]) -> dict:
    p = subprocess.run([sys.executable, str(HERE), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"child failed ({p.returncode}): {' '.join(args)}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout)


# ---------------------------------------------------------------------------------------- parent
def vectors(source: Path, d: Path, n: int, seed: int) -> dict:
    """Corpus and vector shards of size ``n`` in ``d`` (each step skipped when already there)."""
    from preqrag.core.config import EmbedderConfig
    from preqrag.models.encoders import load_encoder
    from preqrag.index.embedded import encode_passages

    corpus = d / "corpus.parquet"
    if not corpus.exists():
        tmp = d / "corpus.parquet.tmp"
        gen = generate(source, n, seed, tmp)
        (d / "corpus.json").write_text(json.dumps(gen))  # before the rename: a kept corpus always has it
        tmp.replace(corpus)
    gen = json.loads((d / "corpus.json").read_text())
    enc = load_encoder(EmbedderConfig(name="wordllama"))
    (d / "vectors").mkdir(exist_ok=True)
    had = sum(np.load(f, mmap_mode="r").shape[0] for f in vector_shards(d))  # rows encoded by earlier calls
    t = time.perf_counter()
    files = encode_passages(corpus, d / "vectors", enc, batch_size=EmbedderConfig(name="wordllama").batch_size)
    s = time.perf_counter() - t
    done = d / "vectors.json"
    if not done.exists():  # the rate of this call's encoding (a resumed one: the rows it added)
        rows = sum(np.load(f, mmap_mode="r").shape[0] for f in files)
        rate = {"passages": rows, "seconds_this_call": round(s, 1), "encoded_this_call": rows - had,
                "passages_per_second": round((rows - had) / s, 1) if rows > had else None}
        done.write_text(json.dumps(rate))
    return {"corpus": gen, "encoding": json.loads(done.read_text()), "encoder": enc}


def from_scale(scale_dir: Path, d: Path) -> dict:
    """Link a kept bench/scale.py size directory's vectors and built types into ``d`` (no corpus,
    no encoding): ``vectors/v_*.npy`` (its flat index's rows: chunked passages), ``idx/dense.faiss``
    as ``flat``, and each ``KIND.faiss`` it built; their build figures are scale.json's."""
    from preqrag.core.config import EmbedderConfig
    from preqrag.models.encoders import load_encoder

    links = {"vectors": scale_dir / "vectors", "flat.faiss": scale_dir / "idx" / "dense.faiss"}
    links.update({f.name: f for f in scale_dir.glob("*.faiss")})
    for name, target in links.items():
        if not (d / name).exists():
            (d / name).symlink_to(target.resolve())
            if name.endswith(".faiss"):
                (d / name.replace(".faiss", ".build.json")).write_text(json.dumps(
                    {"info": {"n": None, "factory": None}, "build_seconds": None, "build_peak_rss_mb": None,
                     "built_by": "bench/scale.py (its row in scale.json)"}))
    return {"corpus": {"from_scale": True}, "encoding": None,
            "encoder": load_encoder(EmbedderConfig(name="wordllama"))}


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        {"_build": child_build, "_serve": child_serve}[sys.argv[1]](*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", help="an index directory: its passages are resampled (as in bench/scale.py)")
    ap.add_argument("--questions", default=str(HERE.parent.parent.parent / "shared" / "liverag-bench" / "dev.jsonl"))
    ap.add_argument("--size", type=int, default=5_000_000, help="documents (= passages here)")
    ap.add_argument("--types", default="ivf-pq+rflat,ivf-sq8,hnsw")
    ap.add_argument("--hnsw-ef-construction", type=int, default=None,
                    help="HNSW types' efConstruction (default: the configuration's, 200); recorded in the row")
    ap.add_argument("--reuse-base", action="store_true",
                    help="make a T+rflat type from the kept T.faiss (built with the same settings) instead of "
                         "building T again: the refine build's own last step (child_refine)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", required=False)
    ap.add_argument("-o", "--out", default="docs/bench/ann_scale.json")
    ap.add_argument("--from-scale", help="a size directory bench/scale.py kept (--keep): use its vectors and built "
                    "types instead of generating, encoding and building")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not ((args.source or args.from_scale) and args.workdir):
        ap.error("--workdir and --source (or --from-scale) are required")

    from preqrag.core.io import atomic_write_text, read_questions

    d = Path(args.workdir) / str(args.size)
    d.mkdir(parents=True, exist_ok=True)
    v = from_scale(Path(args.from_scale), d) if args.from_scale else vectors(Path(args.source), d, args.size, args.seed)
    print(f"{args.size}: vectors {v['encoding']}", file=sys.stderr, flush=True)
    qs, _ = read_questions(args.questions)
    qs = [q.question for q in random.Random(0).sample(qs, min(args.queries, len(qs)))]  # scale.py's sample
    np.save(d / "queries.npy", v["encoder"].encode(qs, is_query=True))
    command = recorded_command("ann_scale", argv)
    data = json.loads(out.read_text()) if out.exists() else {"rows": []}
    exact = None
    from preqrag.core.config import IndexConfig

    want_efc = args.hnsw_ef_construction or IndexConfig().hnsw_ef_construction
    for kind in ["flat"] + [k for k in args.types.split(",") if k != "flat"]:
        built_file = d / f"{kind}.build.json"
        # a kept HNSW build made with another efConstruction is rebuilt, not reported under this one
        stale = (kind.startswith("hnsw") and built_file.exists()
                 and json.loads(built_file.read_text())["info"].get("hnsw_ef_construction", want_efc) != want_efc)
        if stale or not (d / f"{kind}.faiss").exists() or not built_file.exists():
            efc = str(args.hnsw_ef_construction) if args.hnsw_ef_construction else ""
            built_file.write_text(json.dumps(_child(["_build", str(d), kind, efc, "1" if args.reuse_base else ""])))
        built = json.loads(built_file.read_text())
        served = _child(["_serve", str(d), kind])
        if kind == "flat":
            exact = [set(t) for t in served["settings"][0]["top10"]]
        sweep = []
        for s in served.pop("settings"):
            found = s.pop("top10")
            s["recall@10"] = round(recall_vs(exact, found), 4)
            s["meets_target"] = s["recall@10"] >= TARGET["recall@10"] and s["dense_p50_ms"] <= TARGET["p50_ms"]
            sweep.append(s)
        n = built["info"]["n"] or sum(np.load(f, mmap_mode="r").shape[0] for f in vector_shards(d))
        row = {"passages": int(n), "dense_index": kind, "factory": built["info"]["factory"] or served["factory"],
               "hnsw_ef_construction": built["info"].get("hnsw_ef_construction"),
               "build_seconds": built["build_seconds"], "build_peak_rss_mb": built["build_peak_rss_mb"],
               "disk_mb": round((d / f"{kind}.faiss").stat().st_size / 2**20, 1), **served, "sweep": sweep,
               "embedder": "wordllama", "encoding": v["encoding"], "corpus": v["corpus"], "queries": len(qs),
               "machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "command": command}
        print(json.dumps({k: row[k] for k in ("passages", "dense_index", "build_seconds", "build_peak_rss_mb",
                                                "open_seconds", "serve_rss_mb", "sweep")}), flush=True)
        key = (row["passages"], kind, row["hnsw_ef_construction"])  # HNSW rows of other efConstruction kept
        data["rows"] = [r for r in data["rows"]
                        if (r["passages"], r["dense_index"], r.get("hnsw_ef_construction")) != key]
        data["rows"].append(row)
        data["rows"].sort(key=lambda r: (r["passages"], r["dense_index"], r.get("hnsw_ef_construction") or 0))
        data["note"] = NOTE
        atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench ann_scale`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
