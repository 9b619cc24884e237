"""`preqrag run` through the OpenAI-compatible backend against a real local llama.cpp server.

  python bench/openai_backend.py --index IDX --questions Q.jsonl --limit 24 -o /tmp/oai \
      [--out docs/bench/openai_backend.json]

Starts ``python -m llama_cpp.server`` with the bundled SmolLM2-135M GGUF on a free port (2
threads), then answers the same first ``--limit`` questions twice with ``[llm] backend =
"openai"`` (concurrency 4, the client's retries): once sequentially (``run.overlap = false``)
and once overlapped (retrieval of batch i+1 while batch i generates). Reports wall seconds,
questions/hour, time with LLM requests in flight, and the answers' agreement between the
two runs. On a 2-core machine the server and the cross-encoder share the cores, so overlap
cannot gain much here; on a GPU server it hides the CPU stages behind generation.
docs/results/openai_backend.md shows the JSON (``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness import command, machine  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.core.io import atomic_write_text  # noqa: E402
from preqrag.run.pipeline import Pipeline  # noqa: E402
from preqrag.models.files import resolve  # noqa: E402
from preqrag.run.runner import run_questions  # noqa: E402


NOTE = ("Client: concurrency 4, the default retries. The same questions answered twice: overlap no (run.overlap = "
        "false, sequential) and yes (retrieval of batch i+1 while batch i generates); llm_in_flight_seconds: time with "
        "LLM requests in flight; identical_answers: answers equal between the two runs (of limit).")
"""What the rows are (written into the JSON; docs/results/openai_backend.md shows it)."""


def start_server() -> tuple[subprocess.Popen, str]:
    from preqrag.models.llm.llama_build import server_env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gguf = resolve("HuggingFaceTB/SmolLM2-135M-Instruct").location
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "smollm2",
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                             "--n_threads", str(os.cpu_count() or 2), "--flash_attn", "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=server_env())
    url = f"http://127.0.0.1:{port}"
    for _ in range(360):
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("llama_cpp.server did not start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--limit", type=int, default=24)
    ap.add_argument("-o", "--workdir", required=True)
    ap.add_argument("--out", default="docs/bench/openai_backend.json")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    proc, url = start_server()
    rows = []
    try:
        for overlap in (False, True):
            out = work / f"answers.overlap-{str(overlap).lower()}.jsonl"
            for p in work.glob(f"{out.stem}*"):
                p.unlink()
            cfg = load_config(None, {"llm": {"backend": "openai", "base_url": f"{url}/v1", "model": "smollm2",
                                             "concurrency": 4}, "run": {"overlap": overlap}})
            t0 = time.perf_counter()
            summary = run_questions(Pipeline.from_config(args.index, cfg), args.questions, out, limit=args.limit)
            wall = time.perf_counter() - t0
            rows.append({"overlap": overlap, "answered": summary.answered, "failed": summary.failed,
                         "wall_seconds": round(wall, 1),
                         "questions_per_hour": round(summary.answered / wall * 3600, 1),
                         "llm_in_flight_seconds": round(summary.model_seconds.get("llm", 0.0), 1),
                         "cross_encoder_seconds": round(summary.model_seconds.get("cross-encoder", 0.0), 1),
                         "answers": str(out)})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    a, b = ([json.loads(x)["answer"] for x in open(r["answers"], encoding="utf-8")] for r in rows)
    same = sum(x == y for x, y in zip(a, b))
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "questions": args.questions, "limit": args.limit,
              "server": "python -m llama_cpp.server (llama-cpp-python 0.3.36), SmolLM2-135M-Instruct Q4_1, 2 threads",
              "rows": rows, "identical_answers": same, "note": NOTE,
              "command": command("openai_backend", argv)}
    out = Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench openai_backend`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
