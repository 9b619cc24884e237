"""Bounded load run of `preqrag serve` (not a test), compared with `preqrag run` on the same questions.

  python bench/serve_load.py --index /tmp/smoke_idx [--config CFG] [--requests 200] [--clients 16] \
      [--max-queue 64] [-o /tmp/serve_load] [--out docs/bench/serve.json]

1. Starts ``python -m preqrag.cli serve --index IDX [--config CFG] --max-queue Q`` on a free
   127.0.0.1 port and waits for ``/healthz`` (start-up and model loading are timed apart).
2. Sends ``--requests`` ``POST /v1/answer`` requests from ``--clients`` concurrent clients
   (threads, one request at a time each, no retry). Request i asks question ``i mod n`` of
   ``--questions`` (default: ``shared/liverag-bench/smoke.jsonl`` beside the repository)
   with the unique id ``r{i}``.
3. Checks that every request was answered (200) or refused with 429 ``queue_full`` and
   nothing else, and that no answer is lost or duplicated: the answered ids are exactly the
   ids of the 200 responses, each once, each with its own question.
4. Stops the server, then runs ``preqrag run`` over the same ``--requests`` questions (a
   JSONL of the same ids and texts) with the same configuration.

Reported (``--out`` JSON, rendered as docs/results/serve.md): answered / refused / other, p50 / p95 / max
latency of answered requests, wall seconds from the first request to the last reply,
questions/hour of the server (answered / that wall time) and of ``preqrag run`` (answered /
its ``answers.run.json`` wall seconds, model loading excluded in both), mean micro-batch
size, the command of each figure, the machine and the date; rendered as docs/results/serve.md.

Run it alone on the machine: llama.cpp uses every core, so any other CPU-heavy process
changes the figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness import free_port, http_post, machine, pct, wait_ready  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO.parent / "shared" / "liverag-bench"


def load_run(url: str, requests: list[dict], clients: int, timeout: float) -> tuple[list[dict], float]:
    """Send every request from ``clients`` threads; one record per request, and the wall time."""
    todo: queue.Queue = queue.Queue()
    for r in requests:
        todo.put(r)
    records: list[dict] = []
    lock = threading.Lock()

    def client():
        while True:
            try:
                r = todo.get_nowait()
            except queue.Empty:
                return
            t = time.perf_counter()
            try:
                status, body, headers = http_post(f"{url}/v1/answer", r, timeout)
            except Exception as e:  # noqa: BLE001 - a lost request is a finding, not a crash
                status, body, headers = None, {"error": "client", "message": f"{type(e).__name__}: {e}"}, {}
            rec = {"id": r["id"], "question": r["question"], "status": status,
                   "latency_s": time.perf_counter() - t, "error": (body or {}).get("error"),
                   "answer_id": ((body or {}).get("answer") or {}).get("id"),
                   "answer_question": ((body or {}).get("answer") or {}).get("question"),
                   "batch_size": ((body or {}).get("served") or {}).get("batch_size"),
                   "retry_after": headers.get("Retry-After") or headers.get("retry-after")}
            with lock:
                records.append(rec)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return records, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default=str(BENCH / "smoke.jsonl"))
    ap.add_argument("--config", default=None)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-queue", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=3600.0, help="per request, client and server side")
    ap.add_argument("-o", "--workdir", default=str(Path(tempfile.gettempdir()) / "preqrag-serve-load"))
    ap.add_argument("--out", default="docs/bench/serve.json")
    ap.add_argument("--run-questions", type=int, default=None, help=(
        "answer only the first N requests' questions with `preqrag run` (questions/hour is a rate; the default "
        "runs all of them)"))
    args = ap.parse_args(argv)

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    qs, _ = read_questions(args.questions)
    requests = [{"id": f"r{i}", "question": qs[i % len(qs)].question} for i in range(args.requests)]
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    # ---- 1-3: the server under load
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve_cmd = [sys.executable, "-m", "preqrag.cli", "serve", "--index", args.index, "--port", str(port),
                 "--max-queue", str(args.max_queue), "--timeout", str(args.timeout), "--log-level", "warning"]
    if args.config:
        serve_cmd += ["--config", args.config]
    log = open(work / "serve.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(serve_cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(proc, url, work / "serve.log")
        ready_s = time.perf_counter() - t0
        records, wall = load_run(url, requests, args.clients, args.timeout)
        with urllib.request.urlopen(f"{url}/v1/stats", timeout=10) as r:
            stats = json.loads(r.read())
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

    answered = [r for r in records if r["status"] == 200]
    refused = [r for r in records if r["status"] == 429 and r["error"] == "queue_full"]
    other = [r for r in records if r not in answered and r not in refused]
    answer_ids = [r["answer_id"] for r in answered]
    duplicated = len(answer_ids) - len(set(answer_ids))
    mismatched = [r["id"] for r in answered if r["answer_id"] != r["id"] or r["answer_question"] != r["question"]]
    lost = sorted({q["id"] for q in requests} - {r["id"] for r in records})
    lat = [r["latency_s"] for r in answered]
    serve = {
        "command": " ".join(["preqrag"] + serve_cmd[3:]),
        "load_command": f"python bench/serve_load.py --index {args.index} --requests {args.requests} "
                        f"--clients {args.clients} --max-queue {args.max_queue}"
                        + (f" --config {args.config}" if args.config else ""),
        "startup_seconds": round(ready_s, 1), "requests": len(requests), "clients": args.clients,
        "answered": len(answered), "refused_429": len(refused), "other": len(other),
        "other_examples": other[:5], "lost": lost, "duplicated": duplicated, "mismatched": mismatched,
        "wall_seconds": round(wall, 1),
        "latency_p50_s": round(pct(lat, 50), 2) if lat else None,
        "latency_p95_s": round(pct(lat, 95), 2) if lat else None,
        "latency_max_s": round(max(lat), 2) if lat else None,
        "latency_mean_s": round(statistics.mean(lat), 2) if lat else None,
        "questions_per_hour": round(len(answered) / wall * 3600, 1),
        "mean_batch_size": stats.get("mean_batch_size"), "mean_batch_seconds": stats.get("mean_batch_seconds"),
        "worker_stats": stats,
    }

    # the server's figures are kept even if the batch run below is interrupted
    atomic_write_text(work / "serve_part.json", json.dumps({"date": date, "machine": machine(), "serve": serve},
                                                           indent=1) + "\n")
    print(json.dumps({k: v for k, v in serve.items() if k not in ("worker_stats", "other_examples")}), flush=True)

    # ---- 4: preqrag run on the same questions
    qfile = work / "questions.jsonl"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in requests[:args.run_questions]), encoding="utf-8")
    out = work / "answers.jsonl"
    for p in work.glob("answers*"):
        p.unlink()
    run_cmd = ["preqrag", "run", str(qfile), "--index", args.index, "-o", str(out)]
    if args.config:
        run_cmd += ["--config", args.config]
    t0 = time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "preqrag.cli", *run_cmd[1:]]).returncode
    run_wall = time.perf_counter() - t0
    run_stats = json.loads((work / "answers.run.json").read_text())
    run = {"command": " ".join(run_cmd), "exit_code": rc, "answered": run_stats["answered"],
           "failed": run_stats["failed"], "wall_seconds_process": round(run_wall, 1),
           "wall_seconds_answering": run_stats["wall_seconds"],
           "questions_per_hour": round(run_stats["answered"] / run_stats["wall_seconds"] * 3600, 1),
           "seconds_per_question": round(run_stats["wall_seconds"] / max(1, run_stats["answered"]), 3)}

    result = {"date": date, "machine": machine(), "questions_file": args.questions, "serve": serve, "run": run,
              "config": load_config(args.config).model_dump(mode="json"),
              "note": ("Concurrent clients keep the server's queue full enough for micro-batches of up to "
                       "run.batch_size questions, the same batched stage calls as `preqrag run`; a request's "
                       "latency is mostly queueing (it waits for the micro-batches ahead of it). "
                       "serve questions/hour: answered / first request to last reply; `preqrag run`: answered / "
                       "its answering seconds (answers.run.json), model loading excluded in both.")}
    out_path = Path(args.out)
    atomic_write_text(out_path, json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=1))
    ok = not other and not lost and not duplicated and not mismatched
    return 0 if ok else 1


run = main
"""The entry of ``python -m bench serve_load`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
