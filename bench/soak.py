"""Soak run of `preqrag serve` (issue 25): many requests over a long time, some clients hanging up.

    python bench/soak.py --index IDX [--config CFG] --requests 1000 --clients 8 --min-seconds 600 \\
        -o docs/bench/soak.json

1. Starts ``python -m preqrag.cli serve --index IDX`` on a free 127.0.0.1 port, waits for
   ``/healthz``.
2. ``--clients`` threads send ``--requests`` requests in all, paced so that the run lasts at
   least ``--min-seconds``. Request ``i`` is, in turn: ``POST /v1/answer`` (one question,
   generation included, every ``--answer-every``-th request) or ``POST /v1/batch`` with
   ``retrieve_only: true`` and 2-4 questions (the rest; retrieve-only keeps the run affordable).
   Every ``--disconnect-every``-th request is sent on a raw socket that is closed 50 ms after
   the request is written, before the reply (a client going away mid-request).
3. Checks, for every request that was not hung up: status 200 (or 429 ``queue_full``), and
   nothing lost or duplicated: an answer's ``id`` is the request's id, a batch's ``results``
   carry exactly the request's ids in order, each once. After the run, ``/v1/stats`` must show
   an empty queue, and the server must still answer.
4. The server's resident memory (``VmRSS`` of its process) is sampled after the first 100
   requests and at the end: a leak shows as growth (the issue's bound: within 10 %).

Reported (JSON; docs/results/soak.md shows it): requests by kind and outcome, p50/p95/max latency
by kind, RSS after 100 requests and at the end and the change in %, the server's counters, the
wall time, the command, the machine and the date. Run it alone: other CPU-heavy work changes
the latencies (not the checks).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness import machine, pct  # noqa: E402
from harness import free_port, http_post, wait_ready  # noqa: E402

from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO.parent / "shared" / "liverag-bench"


NOTE = ("outcomes by request kind: ok, refused (HTTP 429, queue full), hung_up (the client closed the connection "
        "early, on purpose), wrong (another status, or ids lost, duplicated or out of order); latency in seconds "
        "by kind; rss_mb: the server's VmRSS in MiB after the first 100 requests and at the end (the issue's bound: "
        "rss_change_pct within 10 %); answers_after_run: the server still answered after the run.")
"""What the figures mean (written into the JSON; docs/results/soak.md shows it)."""


def rss_mb(pid: int) -> float:
    """Resident memory of a process (``/proc/PID/status`` VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def hang_up(port: int, path: str, body: dict) -> None:
    """Send one request on a raw socket and close it 50 ms later, before any reply."""
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + data)
        time.sleep(0.05)


def make_requests(questions: list[dict], n: int, answer_every: int, disconnect_every: int,
                  seed: int) -> list[dict]:
    """The request plan: kind, path, body and the ids expected back."""
    rng = random.Random(seed)
    plan = []
    for i in range(n):
        if i % answer_every == 0:
            q = questions[i % len(questions)]
            body = {"question": q["question"], "id": f"r{i}"}
            kind, path, ids = "answer", "/v1/answer", [f"r{i}"]
        else:
            k = rng.randint(2, 4)
            qs = [questions[(i * 4 + j) % len(questions)] for j in range(k)]
            ids = [f"r{i}.{j}" for j in range(k)]
            body = {"questions": [{"question": q["question"], "id": qid} for q, qid in zip(qs, ids)],
                    "retrieve_only": True}
            kind, path = "batch", "/v1/batch"
        plan.append({"i": i, "kind": kind, "path": path, "body": body, "ids": ids,
                     "hang_up": disconnect_every > 0 and i % disconnect_every == disconnect_every - 1})
    return plan


def check(req: dict, status: int | None, body: dict | None) -> str | None:
    """None when the reply is right for the request, else what is wrong."""
    if status == 429 and (body or {}).get("error") == "queue_full":
        return None
    if status != 200 or body is None:
        return f"status {status}: {(body or {}).get('error')}"
    if req["kind"] == "answer":
        got = [(body.get("answer") or {}).get("id")]
    else:
        got = [r.get("id") for r in body.get("results", [])]
        failed = [r for r in body.get("results", []) if r.get("error")]
        if failed:
            return f"batch results failed: {failed[0].get('error')}"
    return None if got == req["ids"] else f"ids {got} != {req['ids']}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--questions", type=Path, default=BENCH / "dev.jsonl")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--min-seconds", type=float, default=600.0)
    ap.add_argument("--answer-every", type=int, default=5)
    ap.add_argument("--disconnect-every", type=int, default=20)
    ap.add_argument("--max-queue", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rss-every", type=int, default=50, help="sample the server's RSS every N requests")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)

    questions = [{"id": q.id, "question": q.question} for q in read_questions(args.questions)[0]]
    plan = make_requests(questions, args.requests, args.answer_every, args.disconnect_every, args.seed)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="soak_serve_", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "preqrag.cli", "serve", "--index", str(args.index), "--port", str(port),
           "--max-queue", str(args.max_queue), "--timeout", str(args.timeout)]
    if args.config:
        cmd += ["--config", str(args.config)]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    t_start = time.perf_counter()
    wait_ready(server, url, log.name)
    load_s = time.perf_counter() - t_start

    records: list[dict] = []
    rss: dict[str, float] = {}
    series: list[tuple[int, float]] = []  # (requests done, server RSS MiB)
    lock = threading.Lock()
    interval = args.min_seconds * args.clients / max(1, args.requests)  # per client, between starts
    t0 = time.perf_counter()

    def client(c: int):
        mine = plan[c::args.clients]
        for n, req in enumerate(mine):
            start_at = t0 + n * interval
            time.sleep(max(0.0, start_at - time.perf_counter()))
            t = time.perf_counter()
            if req["hang_up"]:
                try:
                    hang_up(port, req["path"], req["body"])
                    rec = {"i": req["i"], "kind": req["kind"], "outcome": "hung_up"}
                except OSError as e:
                    rec = {"i": req["i"], "kind": req["kind"], "outcome": "wrong", "why": f"hang_up: {e}"}
            else:
                try:
                    status, body, _ = http_post(url + req["path"], req["body"], args.timeout)
                except Exception as e:  # noqa: BLE001 - a lost request is a finding
                    status, body = None, {"error": f"client: {type(e).__name__}: {e}"}
                why = check(req, status, body)
                rec = {"i": req["i"], "kind": req["kind"], "status": status,
                       "latency_s": round(time.perf_counter() - t, 4),
                       "outcome": "refused" if status == 429 else ("ok" if why is None else "wrong")}
                if why:
                    rec["why"] = why
            with lock:
                records.append(rec)
                if len(records) == 100:
                    rss["after_100"] = rss_mb(server.pid)
                if len(records) % args.rss_every == 0:
                    series.append((len(records), round(rss_mb(server.pid), 1)))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    time.sleep(1.0)  # let hung-up requests finish or be dropped
    rss["end"] = rss_mb(server.pid)
    with __import__("urllib.request").request.urlopen(f"{url}/v1/stats", timeout=30) as r:
        stats = json.loads(r.read())
    alive_status, alive_body, _ = http_post(f"{url}/v1/answer", {"question": questions[0]["question"], "id": "after"},
                                        args.timeout)
    server.terminate()
    server.wait(timeout=60)

    def lat(kind):
        xs = [r["latency_s"] for r in records if r["kind"] == kind and r["outcome"] == "ok"]
        return {"n": len(xs), "p50_s": pct(xs, 50), "p95_s": pct(xs, 95), "max_s": max(xs) if xs else None}

    outcomes = {k: {o: sum(1 for r in records if r["kind"] == k and r["outcome"] == o)
                    for o in ("ok", "refused", "hung_up", "wrong")} for k in ("answer", "batch")}
    wrong = [r for r in records if r["outcome"] == "wrong"]
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": "python bench/soak.py --index IDX" + (" --config CFG" if args.config else "") + " " + " ".join(
            a for a in (argv or sys.argv[1:]) if a not in (str(args.index), str(args.config), "--index", "--config")),
        "requests": len(records), "clients": args.clients, "wall_s": round(wall, 1), "load_s": round(load_s, 1),
        "outcomes": outcomes, "wrong": wrong[:20], "n_wrong": len(wrong),
        "latency": {"answer": lat("answer"), "batch_retrieve_only": lat("batch")},
        "rss_mb": {k: round(v, 1) for k, v in rss.items()},
        "rss_change_pct": round(100 * (rss["end"] - rss["after_100"]) / rss["after_100"], 2),
        "rss_series_mb": series,
        "server_stats": stats, "answers_after_run": alive_status == 200 and
        (alive_body or {}).get("answer", {}).get("id") == "after",
        "note": NOTE,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("wrong",)}, indent=2))
    ok = (not wrong and stats.get("queued") == 0 and result["answers_after_run"]
          and abs(result["rss_change_pct"]) <= 10)
    return 0 if ok else 1


run = main
"""The entry of ``python -m bench soak`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
