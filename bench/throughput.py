"""Throughput of `preqrag run` (issue: throughput), written to docs/bench/throughput.json (docs/results/throughput.md).

Runs the real command ``preqrag run QUESTIONS --index IDX -o OUT [--config CFG]`` in a
subprocess, measures its wall time from launch to exit (Python start-up, index opening
and model loading included), and combines it with what the run recorded:

* ``OUT.run.json`` (preqrag.run.runner): seconds inside model inference by kind (embedder,
  cross-encoder, LLM; see preqrag.core.timing);
* ``OUT.traces.jsonl``: per-question seconds of every stage.

Reported: ``questions_per_hour`` (answered questions / wall hours),
``non_model_overhead_fraction`` = 1 − model-inference seconds / wall seconds (of the whole
command), ``seconds_per_question_by_stage`` (mean over answered questions), the resolved
configuration, the machine and the date.

Usage:
  python bench/throughput.py --index IDX \
      --questions ../shared/liverag-bench/liverag_lcd_session1.jsonl -o OUT/answers.jsonl \
      [--config CFG] [--limit N] [--out docs/bench/throughput.json]

The output answer file must not exist yet (a resumed run would not measure a full run).
Run it alone on the machine: llama.cpp busy-waits, so any other CPU-heavy process slows
the LLM down many times over.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import time
from pathlib import Path

from harness import machine, stage_means  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.core.io import atomic_write_text  # noqa: E402
from preqrag.run.runner import sidecar, stats_path  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("-o", "--output", required=True, help="answers.jsonl to create (must not exist)")
    ap.add_argument("--config", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default="docs/bench/throughput.json")
    args = ap.parse_args(argv)

    output = Path(args.output)
    if output.exists():
        ap.error(f"{output} exists; a throughput figure needs a fresh run (delete it or pick another path)")
    output.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["preqrag", "run", args.questions, "--index", args.index, "-o", str(output)]
    if args.config:
        cmd += ["--config", args.config]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    rc = subprocess.run(cmd).returncode
    wall = time.perf_counter() - t0
    stats = json.loads(stats_path(output).read_text())
    traces = [json.loads(line) for line in sidecar(output, "traces").read_text().splitlines() if line.strip()]
    by_stage = stage_means([t["seconds"] for t in traces])
    model_total = stats["model_seconds_total"]
    answered = stats["answered"]
    result = {
        "command": " ".join(cmd), "exit_code": rc, "date": date, "machine": machine(),
        "questions": stats["total"], "answered": answered, "failed": stats["failed"],
        "wall_seconds": round(wall, 1),
        "startup_seconds": round(wall - stats["wall_seconds"], 1),
        "questions_per_hour": round(answered / wall * 3600, 1),
        "seconds_per_question": round(wall / max(answered, 1), 3),
        "non_model_overhead_fraction": round(1 - model_total / wall, 4),
        "model_seconds": stats["model_seconds"], "model_calls": stats["model_calls"],
        "seconds_per_question_by_stage": by_stage,
        "questions_with_fallback": sum(bool(t["fallbacks"]) for t in traces),
        "predicted_multi": sum(t["classification"]["question_type"] == "multi" for t in traces),
        "config": load_config(args.config).model_dump(mode="json"),
        "note": ("wall_seconds: launch to exit (imports, index opening and model loading included); "
                 "startup_seconds: before the first batch; non_model_overhead_fraction: 1 - seconds inside "
                 "model inference / wall seconds; seconds_per_question_by_stage: means over answered questions "
                 "from the traces (a batched stage's time divided by its batch size)."),
    }
    out = Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=1))
    return rc


run = main
"""The entry of ``python -m bench throughput`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
