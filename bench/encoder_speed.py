"""Dense passage encoding: all-MiniLM-L6-v2 on torch (fp32, bf16 autocast) vs its ONNX export in fp32
and int8 (preqrag.models.encoders.onnx_export), on the same passages of the bench corpus.

Passages are made as ``preqrag index`` makes them (the embedder's tokenizer, ``Chunker`` at
``min([chunking] max_tokens, max_seq_length - 2)`` = 254 tokens) from a fixed-seed sample of the
corpus's documents (none of them a gold document of the questions below); ``--n`` of them (seed 0)
are timed, in chunks of ``--chunk-size``: for each chunk every setting encodes it in turn (order
reversed every other chunk), one ``encode`` call each, tokenisation included. On a shared machine each
timing waits until other processes use under ``--quiet`` (10 %) of the CPU (read from /proc/stat)
and is repeated when they took more while it ran; the share they took is recorded per row. Each
setting first encodes a 64-passage warm-up (model loaded, export made if needed). Settings
(``--only`` picks by substring; ``--chunks A:B`` times only those chunks, so the matrix can be
measured in several short runs; timings and vectors are kept in ``--work``):

* ``torch-fp32-b32``: sentence-transformers, float32, batch 32 (it sorts by length itself);
* ``torch-bf16-b32``: the same under bfloat16 autocast: the torch backend's default on a CPU with
  native bf16 (``avx512_bf16``/``amx_bf16``), i.e. what indexing ran before the ONNX backend;
* ``onnx-{fp32,int8}-bB-tT``: length-sorted padded batches of B, onnxruntime intra-op threads T;
* ``onnx-{fp32,int8}-pertext-tT``: each text alone (no padding) on T Python threads sharing one
  single-threaded session: the ONNX backend's mode (``OnnxEncoder(per_text=True)``).

Every row has passages/s and tokens/s over all passages, the ratio to torch fp32 at batch 32, and
the mean and minimum cosine of its vectors to torch fp32's. The agreement part (``--part
agreement``) checks retrieval: ``--n-questions`` dev questions (fixed-seed sample), their gold
documents' passages added to the timed passages, dense top-10 (exact inner product) with query and
passage vectors of one backend vs torch fp32's: mean top-10 overlap; plus the mixed case of an
index built with torch fp32 queried by the ONNX int8 backend. The machine and its SIMD flags are
recorded.

Writes docs/bench/encoder_speed.json (docs/results/encoder_speed.md shows it).

Usage: python bench/encoder_speed.py [--part speed|agreement|all] [--only SUBSTR ...] [--chunks A:B]
       [--n 2000] [--questions ../shared/liverag-bench/dev.jsonl --n-questions 200] [--work DIR]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from harness import command as recorded_command, machine  # bench/harness.py
from preqrag.core.io import atomic_write_text

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
REFERENCE = "torch-fp32-b32"


def settings(bf16: bool) -> list[dict]:
    """The measured settings: torch fp32 (and bf16 autocast where the CPU has native bf16) at batch 32;
    ONNX int8 at batch 16/32/64 × intra-op threads 1/2 and per text on 1/2 threads; ONNX fp32 at batch
    16/32/64 on 2 threads, batch 32 on 1, and per text on 1/2 threads (the fp32 sweep is the slow part
    of the matrix and was cut to these on the shared 2-core machine)."""
    rows = [dict(id="torch-fp32-b32", backend="torch", precision="fp32", batching="padded", batch=32, threads=None)]
    if bf16:
        rows.append(dict(id="torch-bf16-b32", backend="torch", precision="bf16 autocast", batching="padded", batch=32,
                         threads=None))
    rows += [dict(id=f"onnx-fp32-b{b}-t{t}", backend="onnx", precision="fp32", batching="padded", batch=b, threads=t)
             for b, t in ((16, 2), (32, 1), (32, 2), (64, 2))]
    rows += [dict(id=f"onnx-fp32-pertext-t{t}", backend="onnx", precision="fp32", batching="per-text", batch=1,
                  threads=t) for t in (1, 2)]
    rows += [dict(id=f"onnx-int8-b{b}-t{t}", backend="onnx", precision="int8", batching="padded", batch=b, threads=t)
             for b in (16, 32, 64) for t in (1, 2)]
    rows += [dict(id=f"onnx-int8-pertext-t{t}", backend="onnx", precision="int8", batching="per-text", batch=1,
                  threads=t) for t in (1, 2)]
    return rows


def make_encoder(s: dict):
    from preqrag.core.config import EmbedderConfig
    from preqrag.models.encoders import onnx_export_encoder
    from preqrag.models.encoders.sentence_transformers import SentenceTransformerEncoder
    from preqrag.models.files import resolve

    model = resolve(MODEL)
    if s["backend"] == "torch":
        return SentenceTransformerEncoder(model.location, name=MODEL, bf16=s["precision"] != "fp32", device="cpu")
    return onnx_export_encoder(EmbedderConfig(name=MODEL), model, s["precision"], per_text=s["batching"] == "per-text",
                               threads=s["threads"])


def load_passages(corpus: str, n: int, gold_ids: set[str], seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """``n`` passages of a fixed-seed sample of documents (none of them a gold document of the
    questions) and every passage of the gold documents, chunked as the indexer does; returns
    (timed texts, gold texts, gold passages' document ids)."""
    from preqrag.index.chunking import Chunker
    from preqrag.core.config import load_config

    enc = make_encoder(dict(backend="onnx", precision="int8", batching="per-text", threads=None))
    cfg = load_config(None)
    chunker = Chunker(enc.tokenizer, min(cfg.chunking.max_tokens, enc.max_seq_length - 2), cfg.chunking.overlap_tokens)
    docs = {}
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[d["id"]] = d["text"]
    rng = random.Random(seed)
    ids = sorted(set(docs) - gold_ids)
    rng.shuffle(ids)
    timed: list[str] = []
    for start in range(0, len(ids), 400):
        for ps in chunker.split_many([(i, docs[i]) for i in ids[start:start + 400]]):
            timed += [p.text for p in ps]
        if len(timed) >= 2 * n:
            break
    rng.shuffle(timed)
    gold = [p for ps in chunker.split_many([(i, docs[i]) for i in sorted(gold_ids) if i in docs]) for p in ps]
    return timed[:n], [p.text for p in gold], [p.doc_id for p in gold]


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    total = sum(v[:8])
    return total - idle, total


def _own_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def others_share(fn):
    """Run ``fn()``; return ``(result, wall seconds, share, own CPU seconds)`` where ``share`` is the
    fraction of the machine's CPU time that other processes used meanwhile (0: alone, 0.5: another
    job kept one of two cores busy)."""
    hz = os.sysconf("SC_CLK_TCK")
    b0, t0 = _cpu_jiffies()
    c0, w0 = _own_cpu(), time.perf_counter()
    result = fn()
    wall = time.perf_counter() - w0
    b1, t1 = _cpu_jiffies()
    mine = _own_cpu() - c0
    others = max(0.0, (b1 - b0) / hz - mine)
    return result, wall, others / max((t1 - t0) / hz, 1e-9), mine


def wait_quiet(limit: float, max_wait: float) -> float:
    """Wait (sampling 2 s windows, up to ``max_wait`` s) until other processes use less than
    ``limit`` of the CPU; returns the last window's share."""
    end = time.monotonic() + max_wait
    while True:
        if limit >= 1.0:
            return 0.0
        _, _, share, _ = others_share(lambda: time.sleep(2.0))
        if share < limit or time.monotonic() > end:
            return share


def measure_chunks(chosen: list[dict], texts: list[str], lengths: list[int], chunks: range, size: int,
                   work: Path, quiet: float = 0.1, max_wait: float = 900.0, retries: int = 3) -> None:
    """Time every setting of ``chosen`` on chunks ``chunks`` of ``size`` passages, interleaved:
    for each chunk, every setting encodes it in turn (so what load other jobs still add falls on
    all settings alike). Each chunk's seconds, token count and load average go to
    ``work/timings.json`` and its vectors to ``work/vec_<setting>_<chunk>.npy``; a chunk already
    timed for a setting is timed again (the last run counts). On a shared machine each timing
    waits (up to ``max_wait`` s) until other processes use under ``quiet`` of the CPU, and is
    repeated (up to ``retries`` times) when they used more while it ran; the share they used is
    recorded (``others_cpu``)."""
    path = work / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    encoders = {}
    for s in chosen:
        encoders[s["id"]] = enc = make_encoder(s)
        enc.encode(texts[:64], is_query=False, batch_size=s["batch"])  # warm-up: load (export if needed)
    for k in chunks:
        part = texts[k * size:(k + 1) * size]
        if not part:
            break
        order = chosen if k % 2 == 0 else chosen[::-1]  # nobody always runs first or last
        for s in order:
            enc = encoders[s["id"]]
            for attempt in range(1 + retries):
                wait_quiet(quiet, max_wait)
                load = os.getloadavg()[0]
                vecs, sec, share, cpu = others_share(lambda: enc.encode(part, is_query=False, batch_size=s["batch"]))
                if share <= quiet or quiet >= 1.0:
                    break
                print(f"chunk {k} {s['id']}: other processes used {share:.0%} of the CPU; again", flush=True)
            np.save(work / f"vec_{s['id']}_{k}.npy", vecs)
            timings.setdefault(s["id"], {})[str(k)] = {"seconds": sec, "passages": len(part),
                                                       "tokens": sum(lengths[k * size:(k + 1) * size]),
                                                       "load": round(load, 2), "others_cpu": round(share, 3),
                                                       "cpu_seconds": round(cpu, 3)}
            print(f"chunk {k} {s['id']}: {len(part) / sec:.1f} passages/s (others {share:.0%} of the CPU)", flush=True)
            atomic_write_text(path, json.dumps(timings, indent=1))


def speed_rows(all_settings: list[dict], n: int, size: int, work: Path, bf16: bool) -> list[dict]:
    """One row per setting with every chunk timed: passages/s and tokens/s over all ``n`` passages,
    the mean and range of the load average, and the vectors' cosine to :data:`REFERENCE`'s."""
    path = work / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    n_chunks = -(-n // size)
    vec = {}
    rows = []
    for s in all_settings:
        t = timings.get(s["id"], {})
        if len(t) < n_chunks:
            continue
        parts = [t[str(k)] for k in range(n_chunks)]
        sec = sum(p["seconds"] for p in parts)
        loads = [p["load"] for p in parts]
        others = [p.get("others_cpu", 0.0) for p in parts]
        vec[s["id"]] = np.vstack([np.load(work / f"vec_{s['id']}_{k}.npy") for k in range(n_chunks)])
        rows.append({**s, "passages": n, "seconds": round(sec, 2), "passages_per_second": round(n / sec, 1),
                     "tokens_per_second": round(sum(p["tokens"] for p in parts) / sec),
                     "passages_per_cpu_second": round(n / sum(p.get("cpu_seconds", np.nan) for p in parts), 1),
                     "load_mean": round(float(np.mean(loads)), 2), "others_cpu_mean": round(float(np.mean(others)), 3),
                     "others_cpu_max": max(others)})
    if REFERENCE in vec:
        for r in rows:
            cos = (vec[r["id"]] * vec[REFERENCE]).sum(axis=1)
            r["mean_cos_vs_torch_fp32"] = round(float(cos.mean()), 5)
            r["min_cos_vs_torch_fp32"] = round(float(cos.min()), 5)
    base = next((r["passages_per_second"] for r in rows if r["id"] == REFERENCE), None)
    # the torch backend's own choice on this CPU (``bf16``: native bf16, autocast on): what
    # `preqrag index` ran before the ONNX backend became the default
    previous = next((r["passages_per_second"] for r in rows
                     if r["id"] == ("torch-bf16-b32" if bf16 else REFERENCE)), None)
    for r in rows:
        if base:
            r["x_torch_fp32"] = round(r["passages_per_second"] / base, 2)
        if previous:
            r["x_previous_default"] = round(r["passages_per_second"] / previous, 2)
    return rows


def agreement(texts, gold, questions, work: Path, bf16: bool, size: int) -> dict:
    """Retrieval agreement over timed + gold passages: each backend's own queries and passages vs
    torch fp32's, plus torch-fp32 passages with int8 queries (an index built before the switch).
    The timed passages' vectors are the speed rows' (``work/vec_<setting>_<chunk>.npy``) when all
    chunks of that setting were timed; the gold passages and the questions are encoded here."""
    pool = texts + gold
    variants = [dict(id="torch-fp32-b32", backend="torch", precision="fp32", batching="padded", batch=32, threads=None)]
    if bf16:
        variants.append(dict(id="torch-bf16-b32", backend="torch", precision="bf16 autocast", batching="padded",
                             batch=32, threads=None))
    variants += [dict(id="onnx-fp32-pertext-t2", backend="onnx", precision="fp32", batching="per-text", batch=1,
                      threads=2),
                 dict(id="onnx-int8-pertext-t2", backend="onnx", precision="int8", batching="per-text", batch=1,
                      threads=2),
                 dict(id="onnx-int8-b32-t2", backend="onnx", precision="int8", batching="padded", batch=32, threads=2)]
    n_chunks = -(-len(texts) // size)
    vec = {}
    for v in variants:
        path = work / f"agree_{v['id']}_{len(gold)}_{len(questions)}.npz"
        if not path.exists():
            enc = make_encoder(v)
            g = enc.encode(gold, is_query=False, batch_size=v["batch"])
            q = enc.encode(questions, is_query=True, batch_size=v["batch"])
            np.savez(path, g=g, q=q)
        z = np.load(path)
        chunks = [work / f"vec_{v['id']}_{k}.npy" for k in range(n_chunks)]
        if all(c.exists() for c in chunks):
            timed = np.vstack([np.load(c) for c in chunks])
        else:
            timed = make_encoder(v).encode(texts, is_query=False, batch_size=v["batch"])
        vec[v["id"]] = (np.vstack([timed, z["g"]]), z["q"])
        print(f"agreement: {v['id']} encoded", flush=True)

    def top10(q, p):
        return [set(r) for r in np.argsort(-(q @ p.T), axis=1)[:, :10]]

    ref_p, ref_q = vec["torch-fp32-b32"]
    ref_top = top10(ref_q, ref_p)
    out = {"passages": len(pool), "gold_passages": len(gold), "questions": len(questions), "rows": []}
    for v in variants[1:]:
        p, q = vec[v["id"]]
        cos_p, cos_q = (p * ref_p).sum(1), (q * ref_q).sum(1)
        top = top10(q, p)
        out["rows"].append({"backend": v["id"], "mean_cos_passages": round(float(cos_p.mean()), 5),
                            "min_cos_passages": round(float(cos_p.min()), 5),
                            "mean_cos_queries": round(float(cos_q.mean()), 5),
                            "min_cos_queries": round(float(cos_q.min()), 5),
                            "top10_overlap": round(float(np.mean([len(a & b) / 10 for a, b in zip(ref_top, top)])), 4)})
    q8 = vec["onnx-int8-pertext-t2"][1]
    mixed = top10(q8, ref_p)
    out["rows"].append({"backend": "torch-fp32-b32 index, onnx-int8-pertext-t2 queries",
                        "mean_cos_queries": round(float((q8 * ref_q).sum(1).mean()), 5),
                        "min_cos_queries": round(float((q8 * ref_q).sum(1).min()), 5),
                        "top10_overlap": round(float(np.mean([len(a & b) / 10 for a, b in zip(ref_top, mixed)])), 4)})
    return out


def method(data: dict) -> str:
    """How the rows were timed and what their ratio and cosine columns are (written into the JSON:
    docs/results/encoder_speed.md shows it)."""
    a = data.get("agreement")
    return (f"{data['passages']} bench passages (mean {data['mean_tokens']} tokens), chunked as `preqrag index` does. "
            f"Timed in chunks of {data.get('chunk_size')} passages, every setting on each chunk in turn (the order "
            "reversed every other chunk). The CPU was shared with another job: each timing waited until other "
            "processes used under the --quiet share of the CPU (default 10 %) and was repeated when they used more while it ran; others_cpu_max "
            "is the largest share they took during a row's timings. x_torch_fp32: passages/s over torch fp32 at "
            "batch 32; x_previous_default: over what `preqrag index` ran on this CPU before the ONNX int8 backend "
            "(torch, bf16 autocast where the CPU has native bf16, else fp32); cosines: each passage's vector against "
            "torch fp32's (batch 32)."
            + (f" agreement: retrieval on {a['questions']} dev questions over {a['passages']} passages (the timed "
               f"ones + {a['gold_passages']} of the questions' gold documents), exact dense top-10 of each backend's "
               "vectors against torch fp32's; the last row queries a torch fp32 index with ONNX int8 query vectors."
               if a else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="../shared/liverag-bench/corpus.jsonl.gz")
    ap.add_argument("--questions", default="../shared/liverag-bench/dev.jsonl")
    ap.add_argument("--n", type=int, default=2000, help="timed passages")
    ap.add_argument("--n-questions", type=int, default=200, help="dev questions (fixed-seed sample, seed 0)")
    ap.add_argument("--part", choices=("speed", "agreement", "all"), default="all")
    ap.add_argument("--only", nargs="*", default=None, help="settings whose id contains one of these")
    ap.add_argument("--chunk-size", type=int, default=250, help="passages per interleaved timing chunk")
    ap.add_argument("--quiet", type=float, default=0.1, help="time only while other processes use under this "
                    "share of the CPU (waits, then repeats a timing they disturbed)")
    ap.add_argument("--max-wait", type=float, default=900.0, help="seconds to wait for a quiet CPU per timing")
    ap.add_argument("--chunks", default=":", help="chunks timed by this run, A:B (default all): the matrix can be "
                    "measured in several short runs")
    ap.add_argument("--work", default="bench_work/encoder_speed", help="timings and vectors kept between runs")
    ap.add_argument("-o", "--out", default="docs/bench/encoder_speed.json")
    args = ap.parse_args(argv)

    from preqrag.core.io import read_questions

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    flags = cpu_flags()
    bf16 = bool(flags & {"avx512_bf16", "amx_bf16"})
    questions, _ = read_questions(args.questions)
    questions = random.Random(0).sample(questions, min(args.n_questions, len(questions)))
    gold_ids = {d for q in questions for d in (q.extra.get("gold_doc_ids") or [])}
    texts, gold, _ = load_passages(args.corpus, args.n, gold_ids)
    tok = make_encoder(dict(backend="onnx", precision="int8", batching="per-text", threads=None)).tokenizer
    lengths = [sum(e.attention_mask) for e in tok.encode_batch(texts)]  # truncated at 256, as encoded; no padding
    mean_tokens = round(float(np.mean(lengths)), 1)

    data = json.loads(out.read_text()) if out.exists() else {}
    if data.get("passages") not in (None, len(texts)) or data.get("mean_tokens") not in (None, mean_tokens):
        data = {}  # other passages: start afresh
    all_settings = settings(bf16)
    if args.part in ("speed", "all"):
        chosen = [s for s in all_settings if not args.only or any(o in s["id"] for o in args.only)]
        a, _, b = args.chunks.partition(":")
        n_chunks = -(-len(texts) // args.chunk_size)
        measure_chunks(chosen, texts, lengths, range(int(a or 0), int(b or n_chunks)), args.chunk_size, work,
                       quiet=args.quiet, max_wait=args.max_wait)
    data.update(rows=speed_rows(all_settings, len(texts), args.chunk_size, work, bf16), passages=len(texts),
                mean_tokens=mean_tokens, model=MODEL, chunk_size=args.chunk_size)
    if args.part in ("agreement", "all"):
        data["agreement"] = agreement(texts, gold, [q.question for q in questions], work, bf16, args.chunk_size)
        print(json.dumps(data["agreement"], indent=1), flush=True)
    command = recorded_command("encoder_speed", argv)
    data.update(machine=machine(), simd_flags=sorted(f for f in flags if f.startswith(("avx", "amx")) or "vnni" in f),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                commands=[c for c in data.get("commands", []) if c != command] + [command])
    data["method"] = method(data)
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench encoder_speed`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
