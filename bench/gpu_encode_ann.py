"""Issue 24 on a GPU machine: the default learned encoder's rate on one GPU, and whether its vectors
reach the 5M ANN target (p50 <= 10 ms at recall@10 >= 0.95 against flat) on a 1M subset.

Corpus: the first N documents of bench/scale.py's seeded synthetic corpus (``generate(source, N,
seed=0)``: the 5M rows' corpus is the same generator, so its first 1M documents are these). Each
document is encoded as one passage (the model truncates at its 256 tokens; the production chunker
splits a few longer documents in two, which this bench does not).

Encoder: preqrag's own ``SentenceTransformerEncoder`` (all-MiniLM-L6-v2, ``[embedder] device``) on
CUDA in float16. Rates by batch size on the first ``--rate-sample`` passages, then all N at
``--batch-size``; the vectors go to ``v_*.npy`` files, from which ``preqrag.retrieval.dense.build_faiss``
builds each index type exactly as ``preqrag index`` does (``bench/scale.py``'s ``type_config``).

Search: ``DenseRetriever.search_vectors`` one query at a time on the CPU with FAISS limited to
``--search-threads`` (2: the development machine's cores; the 5M rows were measured there), over the
200 fixed-seed dev questions of bench/scale.py, encoded by the same GPU encoder. Sweeps: HNSW
``efSearch``, IVF ``nprobe``. Builds use all the machine's cores (seconds labelled with them).

Phases (the device tool carries at most 64 MiB a call, so the inputs travel in two calls):
  python bench/gpu_encode_ann.py stage --texts T.xz --n 1000000 --work W       # CPU: the corpus
  python bench/gpu_encode_ann.py run --model M --queries Q.json --work W --out OUT  # GPU + FAISS
  python bench/gpu_encode_ann.py pack --index IDX --questions dev.jsonl --dir D   # here: inputs
  python bench/gpu_encode_ann.py record --result OUT/gpu_ann.json --sample OUT/sample.npz -o docs/bench/gpu_ann.json
``record`` checks the GPU's float16 vectors against this machine's float32 ones (same texts, the
bundled model) and writes the JSON (docs/results/gpu_ann.md shows it: ``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import lzma
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEP = "\n\x01"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
SWEEP = {"hnsw": ("hnsw_ef_search", (16, 32, 64, 128, 256, 512)),
         "ivf-sq8": ("ivf_nprobe", (16, 32, 64, 128, 256)),
         "ivf-pq+rflat": ("ivf_nprobe", (16, 32, 64, 128, 256)),
         "ivf-pq": ("ivf_nprobe", (32, 128))}


def _pct(xs, p):
    return float(np.percentile(np.asarray(xs), p))


# ------------------------------------------------------------------------------------------ here
def pack(index: Path, questions: Path, out: Path, queries: int = 200) -> None:
    """Write the inputs: the source index's passage texts (xz), the 200 bench queries, the model in fp16."""
    import pyarrow.parquet as pq
    import safetensors.numpy as stn

    from preqrag.core.io import read_questions
    from preqrag.models.files import resolve

    out.mkdir(parents=True, exist_ok=True)
    texts = pq.read_table(index / "passages.parquet", columns=["text"]).column("text").to_pylist()
    (out / "texts.xz").write_bytes(lzma.compress(SEP.join(texts).encode(), preset=6))
    qs, _ = read_questions(str(questions))
    qs = [q.question for q in random.Random(0).sample(qs, min(queries, len(qs)))]  # bench/scale.py's queries
    (out / "queries.json").write_text(json.dumps(qs))
    src = Path(resolve(MODEL).location)
    model = out / "model"
    for f in src.rglob("*"):
        if f.is_file() and f.name not in ("model.safetensors", "README.md", ".gitattributes", "data_config.json"):
            dst = model / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read_bytes())
    weights = stn.load_file(str(src / "model.safetensors"))
    stn.save_file({k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in weights.items()},
                  str(model / "model.safetensors"))


# ------------------------------------------------------------------------------------------ device
def stage(texts_xz: Path, n: int, work: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scale import generate

    src = work / "source"
    src.mkdir(parents=True, exist_ok=True)
    texts = lzma.decompress(texts_xz.read_bytes()).decode().split(SEP)
    pq.write_table(pa.table({"text": texts}), src / "passages.parquet")
    t = time.perf_counter()
    gen = generate(src, n, 0, work / "corpus.parquet")
    (work / "corpus.json").write_text(json.dumps({**gen, "documents": n, "generate_s": time.perf_counter() - t}))
    print(json.dumps({"staged": n, "seconds": round(time.perf_counter() - t, 1)}), flush=True)


def encode_and_search(model: Path, queries: Path, work: Path, out: Path, batch_size: int, rate_sample: int,
                      search_threads: int, kinds: list[str], deadline_s: float, cosine_sample: int = 2000) -> None:
    import faiss
    import pyarrow.parquet as pq
    import torch

    from harness import machine
    from scale import type_config

    from preqrag.models.encoders.sentence_transformers import SentenceTransformerEncoder
    from preqrag.retrieval.dense import DenseRetriever, build_faiss

    t_start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    res = {"machine": machine(), "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "torch": torch.__version__, "faiss": faiss.__version__, "corpus": json.loads((work / "corpus.json").read_text()),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}

    def save():
        tmp = out / "gpu_ann.json.tmp"
        tmp.write_text(json.dumps(res, indent=1))
        tmp.replace(out / "gpu_ann.json")

    texts = pq.read_table(work / "corpus.parquet", columns=["text"]).column("text").to_pylist()
    n = len(texts)
    enc = SentenceTransformerEncoder(str(model), MODEL, device="auto")
    t = time.perf_counter()
    enc.warm_up()
    enc.encode(texts[:64], is_query=False)
    res["encoder"] = {"device": enc.device, "load_s": round(time.perf_counter() - t, 2),
                      "max_seq_length": enc.max_seq_length}
    sample = texts[:cosine_sample]
    np.savez_compressed(out / "sample.npz", vectors=enc.encode(sample, is_query=False, batch_size=256),
                        texts=np.asarray(sample, dtype=object).astype(str))
    rates = []
    for bs in (32, 128, 512, 1024):
        if enc.device == "cpu" and bs > 32:
            break
        chunk = texts[:rate_sample]
        torch.cuda.synchronize() if enc.device.startswith("cuda") else None
        t = time.perf_counter()
        enc.encode(chunk, is_query=False, batch_size=bs)
        s = time.perf_counter() - t
        rates.append({"batch_size": bs, "passages": len(chunk), "seconds": round(s, 2),
                      "passages_per_s": round(len(chunk) / s, 1)})
        print(json.dumps(rates[-1]), flush=True)
    res["rates"] = rates
    save()
    vec_dir = work / "vectors"
    vec_dir.mkdir(exist_ok=True)
    rows = 65_536
    t = time.perf_counter()
    files = []
    for i, lo in enumerate(range(0, n, rows)):
        f = vec_dir / f"v_{i:05d}.npy"
        np.save(f, enc.encode(texts[lo:lo + rows], is_query=False, batch_size=batch_size))
        files.append(f)
    s = time.perf_counter() - t
    res["encode_all"] = {"passages": n, "batch_size": batch_size, "seconds": round(s, 1),
                         "passages_per_s": round(n / s, 1), "note": "includes writing the .npy files"}
    print(json.dumps(res["encode_all"]), flush=True)
    qs = json.loads(queries.read_text())
    qvec = enc.encode(qs, is_query=True)
    res["queries"] = len(qs)
    del texts
    save()

    ids = [f"syn-{i}" for i in range(n)]
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    build = {}
    t = time.perf_counter()
    build["flat"] = {"info": build_faiss(files, work / "flat.faiss"), "seconds": round(time.perf_counter() - t, 1)}
    faiss.omp_set_num_threads(search_threads)
    flat = DenseRetriever(work / "flat.faiss", ids, enc)
    truth = [set(r.ids) for r in flat.search_vectors(qvec, 10)]

    def measure(ret):
        ret.search_vectors(qvec[:2], 10)
        ms = []
        for i in range(len(qvec)):
            t0 = time.perf_counter()
            ret.search_vectors(qvec[i:i + 1], 10)
            ms.append((time.perf_counter() - t0) * 1000)
        found = ret.search_vectors(qvec, 10)
        recall = float(np.mean([len(a & set(b.ids)) / max(1, len(a)) for a, b in zip(truth, found)]))
        return {"dense_p50_ms": round(_pct(ms, 50), 3), "dense_p95_ms": round(_pct(ms, 95), 3),
                "recall@10_vs_flat": round(recall, 4)}

    res["rows"] = [{"dense_index": "flat", "setting": None, "value": None, **measure(flat),
                    "build_seconds": build["flat"]["seconds"]}]
    save()
    for kind in kinds:
        if time.perf_counter() - t_start > deadline_s:
            res.setdefault("skipped", []).append(kind)
            continue
        cfg = type_config(kind, qvec.shape[1])
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        t = time.perf_counter()
        info = build_faiss(files, work / f"{kind}.faiss", cfg)
        bs = round(time.perf_counter() - t, 1)
        faiss.omp_set_num_threads(search_threads)
        ret = DenseRetriever(work / f"{kind}.faiss", ids, enc, cfg=cfg)
        field, values = SWEEP[kind]
        for v in values:
            ret.cfg = cfg.model_copy(update={field: v})
            row = {"dense_index": kind, "setting": field, "value": v, **measure(ret), "build_seconds": bs,
                   "factory": info["factory"], "disk_mb": round((work / f"{kind}.faiss").stat().st_size / 2**20, 1)}
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
        save()
    res["search_threads"] = search_threads
    res["build_threads"] = os.cpu_count()
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    save()


# ------------------------------------------------------------------------------------------ record
def record(result: Path, sample: Path, out: Path, command: str) -> None:
    from preqrag.models.encoders.sentence_transformers import SentenceTransformerEncoder
    from preqrag.core.io import atomic_write_text
    from preqrag.models.files import resolve

    res = json.loads(result.read_text())
    z = np.load(sample)
    cpu = SentenceTransformerEncoder(resolve(MODEL).location, MODEL, device="cpu", bf16=False)
    ref = cpu.encode(list(z["texts"]), is_query=False, batch_size=32)
    cos = (ref * z["vectors"]).sum(axis=1)
    res["fp16_vs_cpu_fp32"] = {"passages": int(len(cos)), "cosine_min": round(float(cos.min()), 6),
                               "cosine_mean": round(float(cos.mean()), 6),
                               "note": "GPU float16 vectors against this machine's float32 vectors of the same texts"}
    res["command"] = command
    res.update(notes(res))
    atomic_write_text(out, json.dumps(res, indent=1) + "\n")


def notes(res: dict) -> dict:
    """``method`` (what was measured, how) and ``conclusion`` (the settings meeting the 5M target at
    1M) of a result, written into the JSON: docs/results/gpu_ann.md shows them."""
    method = (f"Encoder: {MODEL} through preqrag's SentenceTransformerEncoder on {res['encoder']['device']} (float16). "
              f"Corpus: the first {res['corpus']['documents']:,} documents of bench/scale.py's synthetic corpus (seed 0), "
              "one passage each. rates: encoding rate by batch size (passages of the corpus; tokenisation included); "
              "encode_all: all passages at one batch size, writing the vector files included. fp16_vs_cpu_fp32: the "
              "GPU's float16 vectors against the development CPU's float32 vectors of the same texts. rows: dense "
              f"search of one query on the CPU (FAISS with {res.get('search_threads', 2)} threads; builds with "
              f"{res.get('build_threads')}), {res['queries']} dev questions, recall@10 against flat on the same vectors.")
    if res.get("skipped"):
        method += (f" skipped: not started before --deadline-s (the encoding took {res['encode_all']['seconds']} s of "
                   "the call).")
    ok = [r for r in res["rows"] if r["dense_index"] != "flat" and r["recall@10_vs_flat"] >= 0.95
          and r["dense_p50_ms"] <= 10]
    conclusion = ("Settings measured here that meet the 5M target's two numbers (p50 <= 10 ms, recall@10 >= 0.95) "
                  "at 1M: " + (", ".join(f"{r['dense_index']} {r['setting']}={r['value']} ({r['recall@10_vs_flat']}, "
                                         f"{r['dense_p50_ms']} ms)" for r in ok) or "none") + ".")
    return {"method": method, "conclusion": conclusion}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--index", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--dir", required=True)
    p = sub.add_parser("stage")
    p.add_argument("--texts", required=True)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--work", required=True)
    p = sub.add_parser("run")
    p.add_argument("--model", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--rate-sample", type=int, default=65_536)
    p.add_argument("--search-threads", type=int, default=2)
    p.add_argument("--kinds", default="ivf-sq8,ivf-pq+rflat,hnsw,ivf-pq")
    p.add_argument("--deadline-s", type=float, default=480, help="skip index types not started by then")
    p.add_argument("--cosine-sample", type=int, default=2000, help="passages whose vectors come back for `record`")
    p = sub.add_parser("record")
    p.add_argument("--result", required=True)
    p.add_argument("--sample", required=True)
    p.add_argument("--command", default="")
    p.add_argument("-o", "--out", default="docs/bench/gpu_ann.json")
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        pack(Path(a.index), Path(a.questions), Path(a.dir))
    elif a.cmd == "stage":
        stage(Path(a.texts), a.n, Path(a.work))
    elif a.cmd == "run":
        encode_and_search(Path(a.model), Path(a.queries), Path(a.work), Path(a.out), a.batch_size,
                          a.rate_sample, a.search_threads, a.kinds.split(","), a.deadline_s, a.cosine_sample)
    else:
        record(Path(a.result), Path(a.sample), Path(a.out), a.command)
    return 0


run = main
"""The entry of ``python -m bench gpu_encode_ann`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
