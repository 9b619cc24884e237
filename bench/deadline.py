"""Challenge-day deadlines (issue 13): `preqrag run --deadline D` on a question file, and what each
degradation level costs in retrieval quality. Writes docs/bench/deadline.json (docs/results/deadline.md).

Two parts:

* **runs**: for each deadline D (``--deadlines 2h,30m,10m``), ``preqrag run QUESTIONS --index IDX
  -o WORKDIR/<D>/answers.jsonl --deadline D`` on a fresh output, as a subprocess (model loading
  counts against the deadline, as on the day). Row: ``questions``, ``deadline_s``, ``wall_s`` (the
  command's wall time), ``answered``, ``failed``, ``levels`` (questions per degradation level, from
  answers.run.json), ``finished_before_deadline``, ``fallbacks`` (extractive after an LLM cut-off
  or failure), ``batches`` (per-batch plan), plus ``command``.
* **levels**: the retrieval quality of each ``[deadline] levels`` entry on a fixed-seed sample of the
  dev questions (``--quality-questions``, ``--quality-sample``), without generation: the ablation
  ladder's columns on the final ranking (bench/harness.final_retrieval_columns, ranx) and
  ``context_hit`` — a gold document among the passages the generator (or the extractive answer)
  gets; for multi-doc questions the share of gold documents there — and retrieval seconds per
  question. Each level is preqrag.run.deadline.level_pipelines' pipeline (shared models).

Usage:
  python bench/deadline.py --index IDX [--questions ../shared/liverag-bench/liverag_lcd_session1.jsonl]
         [--deadlines 2h,30m,10m] [--limit N] [--config preqrag.toml] [--workdir DIR]
         [--quality-questions ../shared/liverag-bench/dev.jsonl --quality-sample 200 | --no-quality]
         [--no-runs] [--out docs/bench/deadline.json]

Rows merge into an existing output by (label, deadline) and (label, level). Long deadlines take
that long: run them on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import command as recorded_command, final_retrieval_columns, machine  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.run.deadline import level_pipelines, parse_deadline  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.run.pipeline import Pipeline  # noqa: E402

BENCH = Path(__file__).resolve().parent.parent.parent / "shared" / "liverag-bench"


def _utc_now() -> str:
    """Now, UTC, ISO 8601 to the second (a row's and the file's ``date``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def deadline_seconds(spec: str) -> float:
    """Seconds a duration spec (``2h``, ``30m``, ``600s``) stands for."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return (parse_deadline(spec, now) - now).total_seconds()


def run_row(args, spec: str, label: str, n_questions: int) -> dict:
    """One ``preqrag run --deadline spec`` on a fresh output; its row."""
    work = Path(args.workdir or tempfile.mkdtemp(prefix="preqrag-deadline-")) / spec
    out = work / "answers.jsonl"
    for p in work.glob("answers*"):  # a fresh output: no resumed answers, no recorded deadline
        p.unlink()
    cmd = [sys.executable, "-m", "preqrag.cli", "run", str(args.questions), "--index", str(args.index),
           "-o", str(out), "--deadline", spec]
    if args.config:
        cmd += ["--config", str(args.config)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"preqrag run failed ({r.returncode}):\n{r.stderr[-3000:]}")
    stats = json.loads(out.with_name("answers.run.json").read_text())
    d = stats["deadline"]
    return {"label": label, "deadline": spec, "questions": n_questions, "deadline_s": round(deadline_seconds(spec), 1),
            "wall_s": round(wall, 1), "answered": stats["answered"], "failed": stats["failed"],
            "levels": stats["degradation_levels"], "level_names": d["level_names"],
            "finished_before_deadline": d["finished_before_deadline"], "seconds_left": d["seconds_left"],
            "fallbacks": d["fallbacks"], "batches": d["batches"],
            "date": _utc_now(),
            "command": " ".join(["preqrag", *cmd[3:]])}


def context_hit(traces, questions, index) -> float | None:
    """Mean over questions with gold documents: single-doc, 1 if a gold document is among the
    context passages; multi-doc, the share of gold documents there."""
    by_id = {str(t.id): t for t in traces}
    hits = []
    for q in questions:
        gold = set(q.extra.get("gold_doc_ids") or [])
        t = by_id.get(q.key)
        if not gold or t is None:
            continue
        docs = {index.passages[pid].doc_id for pid in t.context_ids}
        hits.append(len(gold & docs) / len(gold) if len(gold) > 1 else float(bool(gold & docs)))
    return round(sum(hits) / len(hits), 4) if hits else None


def level_rows(args, label: str) -> list[dict]:
    """Retrieval quality and seconds of every degradation level on the quality sample."""
    questions, _ = read_questions(args.quality_questions)
    if args.quality_sample and args.quality_sample < len(questions):
        questions = random.Random(0).sample(questions, args.quality_sample)
    cfg = load_config(args.config, {"run": {"trace_depth": 100}})
    base = Pipeline.from_config(args.index, cfg)
    base.warm_up()
    rows = []
    for level, pipe in enumerate(level_pipelines(base)):
        traces = []
        t0 = time.perf_counter()
        for start in range(0, len(questions), args.batch_size):
            traces += pipe.retrieve(questions[start:start + args.batch_size])
        wall = time.perf_counter() - t0
        row = {"label": label, "level": level, "name": cfg.deadline.levels[level], "n_questions": len(questions),
               **final_retrieval_columns(traces, questions),
               "context_hit": context_hit(traces, questions, base.index),
               "context_top_k": pipe.cfg.generator.context_top_k,
               "retrieval_seconds_per_question": round(wall / len(questions), 4),
               "llm_before_generation": pipe.cfg.rewriter.name != "none"}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default=str(BENCH / "liverag_lcd_session1.jsonl"))
    ap.add_argument("--deadlines", default="2h,30m,10m")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions (a smoke run)")
    ap.add_argument("--config", default=None)
    ap.add_argument("--workdir", default=None, help="where the runs' answers go (default: a temp dir)")
    ap.add_argument("--quality-questions", default=str(BENCH / "dev.jsonl"))
    ap.add_argument("--quality-sample", type=int, default=200, help="fixed-seed sample (seed 0)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--no-runs", action="store_true")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default="docs/bench/deadline.json")
    args = ap.parse_args(argv)

    qs, _ = read_questions(args.questions)
    n = min(len(qs), args.limit) if args.limit else len(qs)
    label = args.label or f"{Path(args.index).name} / {Path(args.questions).name} ({n} q)"
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": [], "levels": []}
    command = recorded_command("deadline", argv, paths=False)
    if not args.no_runs:
        for spec in args.deadlines.split(","):
            row = run_row(args, spec.strip(), label, n)
            print(json.dumps({k: v for k, v in row.items() if k != "batches"}), flush=True)
            data["rows"] = [r for r in data["rows"]
                            if not (r["label"] == label and r["deadline"] == row["deadline"])] + [row]
            _save(data, out, command)
    if not args.no_quality:
        qlabel = f"{Path(args.index).name} / {Path(args.quality_questions).name} ({args.quality_sample} q sample)"
        rows = level_rows(args, qlabel)
        data["levels"] = [r for r in data.get("levels", []) if r["label"] != qlabel] + rows
        _save(data, out, command)
    return 0


def _save(data: dict, out: Path, command: str) -> None:
    data.update({"machine": machine(),
                 "date": _utc_now(),
                 "command": command,
                 "note": ("Each run starts from a fresh output; model loading counts against the deadline. "
                          "levels: questions answered per degradation level (0 full, 1 no LLM rewriting, 2 rerank "
                          "depth cut, 3 shorter context, 4 extractive, no LLM); fallbacks: answers made extractive "
                          "after an LLM call hit the batch's cut-off or failed. Level rows: the final ranking at "
                          "document level (ranx); context hit: a gold document among the passages the answer is "
                          "written from (multi-doc: share of gold documents).")})
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")


run = main
"""The entry of ``python -m bench deadline`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
