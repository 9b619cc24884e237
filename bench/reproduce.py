"""Reproduce README's headline figures from a fresh checkout: one command, pinned inputs.

Runs, with the default configuration (or ``--config``), the steps behind README's figures, each
through the bench script that measures it, and writes one row per figure group to ``--out``
(default docs/bench/reproduce.json; rendered by bench/results.py as docs/results/reproduce.md):

1. ``index``: ``preqrag index --corpus CORPUS --index WORK/index`` (README's command; skipped with
   ``--index``, which reuses a built index). Row: passages, seconds, passages/s, peak RSS of the
   build process.
2. ``retrieval``: bench/presets.py ``--retrieval-only`` for each of ``--presets`` on the fixed-seed
   dev sample (seed 0, ``--sample``, then the first ``--head``): README's presets table. One row per
   preset: single hit@1 / hit@10 / MRR@10, multi recall@10 / all@10, retrieval seconds per question.
3. ``answers``: bench/answers.py ``contexts`` then ``answer --batch 32`` (as ``preqrag run``) on the
   same questions: README's answer figures (token F1, ROUGE-L, degenerate share, generation seconds
   per question as a share of batched calls).
4. ``throughput``: bench/throughput.py, ``preqrag run`` over the first ``--limit`` questions of
   ``--session-questions``: README's questions/hour.

Every row records its **inputs as content hashes** — sha256 of the corpus file, the question file(s),
the index's ``manifest.json`` and the resolved configuration (``load_config(...).model_dump()`` as
sorted JSON, so defaults and ``$PREQRAG_LLM_MODEL`` are pinned too) — beside the exact command, the
machine and the date. The bench scripts' own outputs stay in ``--work``; a rerun with the same
``--work`` reuses a built index and the answers already made.

``--readme FILE`` rewrites the presets table between ``<!-- reproduce:presets -->`` and
``<!-- /reproduce:presets -->`` in FILE from the retrieval rows (README.md after a full run).

``--quick``: the smoke corpus and questions (8 of them), ``hybrid`` only, 4 session questions — a
few minutes on 2 cores, and what tests/e2e/test_reproduce.py runs (with its own small index).
The full run over the bench corpus takes hours on 2 CPU cores (index ~20 min, each LLM preset's
rewriting 3–60 s per question); ``--steps`` and ``--presets`` pick parts.

    python bench/reproduce.py --work bench_work/reproduce            # full
    python bench/reproduce.py --quick --work bench_work/reproduce-quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness import config_sha256, describe, input_hashes, machine, merge_rows, read_rows, utc_now, write_json

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT.parent / "shared" / "liverag-bench"
STEPS = ("index", "retrieval", "answers", "throughput")
FULL = {"corpus": BENCH / "corpus.jsonl.gz", "questions": BENCH / "dev.jsonl", "sample": 500, "head": 200,
        "session_questions": BENCH / "liverag_lcd_session1.jsonl", "limit": 100,
        "presets": "hybrid,preqrag,preqrag-keep,dota,ginger,cir"}
"""README's inputs: the bench corpus, the ladder's dev sample (seed 0, 500, first 200), 100 session-1 questions."""
QUICK = {"corpus": BENCH / "smoke_corpus.jsonl.gz", "questions": BENCH / "smoke.jsonl", "sample": 60, "head": 8,
         "session_questions": BENCH / "smoke.jsonl", "limit": 4, "presets": "hybrid"}
"""``--quick``: the smoke set, small enough for the tests."""
RETRIEVAL_COLUMNS = ("single_hit@1", "single_hit@10", "single_mrr@10", "multi_recall@10", "multi_all@10",
                     "seconds_per_question")
ANSWER_COLUMNS = ("answer_token_f1", "answer_rougeL", "degenerate_share", "context_hit",
                  "generate_seconds_per_question", "n_questions")
MARK_BEGIN, MARK_END = "<!-- reproduce:presets -->", "<!-- /reproduce:presets -->"


def _rel(p) -> str:
    """A path as the command line should show it: relative to the repository when inside it."""
    p = Path(p).resolve()
    rel = os.path.relpath(p, ROOT)
    return rel if not rel.startswith("../..") else str(p)  # ../shared/... beside the repository, else absolute


def run_timed(cmd: list[str]) -> float:
    """Run ``cmd`` in the repository root (its output passed through); seconds; raises on failure."""
    t = time.perf_counter()
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    return round(time.perf_counter() - t, 2)


def _shown(cmd: list[str]) -> str:
    """The command line as recorded in a row: ``python`` for this interpreter."""
    return " ".join(["python", *cmd[1:]])


def _config_args(config: str | None) -> list[str]:
    return ["--config", _rel(config)] if config else []


def step_index(a, work: Path) -> tuple[Path, list[dict]]:
    """Build (or reuse) the index; returns it and the ``index`` row (empty when reused)."""
    if a.index:
        return Path(a.index), []
    idx = work / "index"
    if (idx / "manifest.json").exists():  # built by an earlier run with this --work: its row is kept
        return idx, []
    cmd = [sys.executable, "-m", "preqrag.cli", "index", "--corpus", _rel(a.corpus), "--index", _rel(idx),
           *_config_args(a.config)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    seconds = run_timed(cmd)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    manifest = json.loads((idx / "manifest.json").read_text())
    n = manifest.get("n_passages")
    return idx, [{"name": "index", "passages": n, "seconds": seconds,
                  "passages_per_second": round(n / seconds, 1) if n and seconds else None,
                  "peak_rss_mb": round(peak / 1024, 1) if peak > before else None,
                  "command": "preqrag " + " ".join(cmd[3:])}]


def step_retrieval(a, idx: Path, work: Path) -> list[dict]:
    """bench/presets.py --retrieval-only; one row per preset."""
    out = work / "presets.json"
    cmd = [sys.executable, "bench/presets.py", "--index", _rel(idx), "--questions", _rel(a.questions),
           "--sample", str(a.sample), "--head", str(a.head), "--presets", a.presets, "--retrieval-only",
           "--label", "reproduce", "-o", _rel(out), *_config_args(a.config)]
    run_timed(cmd)
    rows = [r for r in json.loads(out.read_text())["rows"] if r.get("label") == "reproduce"]
    return [{"name": f"retrieval: {r['name']}", "preset": r["name"], "llm": r.get("llm"),
             "n_questions": r.get("n_questions"), **{c: r.get(c) for c in RETRIEVAL_COLUMNS},
             "command": _shown(cmd)} for r in rows]


def step_answers(a, idx: Path, work: Path) -> list[dict]:
    """bench/answers.py contexts + answer (batched as `preqrag run`); one row."""
    ctx, out = work / "contexts.jsonl", work / "answers.json"
    c1 = [sys.executable, "bench/answers.py", "contexts", "--index", _rel(idx), "--questions", _rel(a.questions),
          "--sample", str(a.sample), "--head", str(a.head), "--contexts", _rel(ctx), *_config_args(a.config)]
    if not ctx.exists():
        run_timed(c1)
    c2 = [sys.executable, "bench/answers.py", "answer", "--contexts", _rel(ctx), "--head", str(a.head),
          "--label", "reproduce", "--batch", "32", "--default", "--work", _rel(work / "answers"), "-o", _rel(out)]
    for s in a.answer_set:
        c2 += ["--set", s]
    run_timed(c2)
    row = next(r for r in json.loads(out.read_text())["rows"] if r.get("label") == "reproduce")
    return [{"name": "answers", "llm": row.get("llm"), **{c: row.get(c) for c in ANSWER_COLUMNS},
             "command": _shown(c1) + " && " + _shown(c2)}]


def step_throughput(a, idx: Path, work: Path) -> list[dict]:
    """bench/throughput.py over the first ``limit`` session questions; one row."""
    run_dir, out = work / "run", work / "throughput.json"
    shutil.rmtree(run_dir, ignore_errors=True)  # the script measures a fresh run only
    run_dir.mkdir(parents=True)
    cmd = [sys.executable, "bench/throughput.py", "--index", _rel(idx), "--questions", _rel(a.session_questions),
           "-o", _rel(run_dir / "answers.jsonl"), "--limit", str(a.limit), "--out", _rel(out),
           *_config_args(a.config)]
    run_timed(cmd)
    r = json.loads(out.read_text())
    row = r["rows"][-1] if isinstance(r.get("rows"), list) else r
    stages = row.get("seconds_per_question_by_stage") or {}
    return [{"name": "throughput", "n_questions": row.get("answered"), "wall_seconds": row.get("wall_seconds"),
             "questions_per_hour": row.get("questions_per_hour"),
             "seconds_per_question": round(sum(stages.values()), 3) if stages else None,
             "command": _shown(cmd)}]


def readme_table(rows: list[dict], what: dict[str, str] | None = None) -> list[str]:
    """The README presets table from the retrieval rows; ``what``: preset -> its description
    (kept from the table being replaced)."""
    from preqrag.core.config import load_config

    what, default = what or {}, load_config(None).pipeline
    lines = ["| preset | what | single hit@10 | multi recall@10 | retrieval s/question | LLM |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if r["name"].startswith("retrieval: "):
            name = f"`{r['preset']}`" + (" (default)" if r["preset"] == default else "")
            lines.append(f"| {name} | {what.get(r['preset'], '')} | {r['single_hit@10']:.3f} | "
                         f"{r['multi_recall@10']:.3f} | {r['seconds_per_question']:.2f} | {r.get('llm') or 'none'} |")
    return lines


def _descriptions(block: str) -> dict[str, str]:
    """preset -> the second cell of its row in a Markdown table (``| `name` (default) | what | ...``)."""
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            out[cells[0].split("`")[1]] = cells[1]
    return out


def write_readme(path: Path, rows: list[dict]) -> None:
    """Replace the table between the reproduce markers of ``path`` with :func:`readme_table`,
    keeping each preset's description."""
    text = path.read_text(encoding="utf-8")
    if MARK_BEGIN not in text or MARK_END not in text:
        raise SystemExit(f"{path}: no {MARK_BEGIN} ... {MARK_END} block to rewrite")
    head, rest = text.split(MARK_BEGIN, 1)
    block, tail = rest.split(MARK_END, 1)
    from preqrag.core.io import atomic_write_text

    table = readme_table(rows, _descriptions(block))
    atomic_write_text(path, head + MARK_BEGIN + "\n" + "\n".join(table) + "\n" + MARK_END + tail)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the smoke set (see QUICK)")
    ap.add_argument("--work", required=True, help="the bench scripts' outputs and the index (a rerun reuses them)")
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated, of: " + ", ".join(STEPS))
    ap.add_argument("--index", default=None, help="an index already built (skips the index step)")
    ap.add_argument("--config", default=None, help="a preqrag.toml; default: the default configuration")
    for k in ("corpus", "questions", "session_questions", "presets"):
        ap.add_argument("--" + k.replace("_", "-"), default=None)
    for k in ("sample", "head", "limit"):
        ap.add_argument("--" + k, type=int, default=None)
    ap.add_argument("--answer-set", action="append", default=[], help="a --set for bench/answers.py answer")
    ap.add_argument("--readme", default=None, help="rewrite this file's presets table from the retrieval rows")
    ap.add_argument("--out", default=None, help="rows (default: docs/bench/reproduce.json; --quick: WORK/reproduce.json)")
    a = ap.parse_args(argv)
    for k, v in (QUICK if a.quick else FULL).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    unknown = set(steps) - set(STEPS)
    if unknown:
        ap.error(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    work = Path(a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out = Path(a.out) if a.out else (work / "reproduce.json" if a.quick else ROOT / "docs" / "bench" / "reproduce.json")
    idx, rows = step_index(a, work)  # every other step needs the index
    inputs = {**input_hashes(corpus=a.corpus, questions=a.questions, session_questions=a.session_questions, index=idx),
              "config_sha256": config_sha256(a.config)}  # corpus_sha256, ..., index_manifest_sha256, config_sha256
    for name, fn in (("retrieval", step_retrieval), ("answers", step_answers), ("throughput", step_throughput)):
        if name in steps:
            rows += fn(a, idx, work)
    date = utc_now()
    m = machine()
    label = "quick (smoke set)" if a.quick else "full (bench corpus)"
    for r in rows:
        r.update(label=label, **inputs, machine=m, date=date)
    data = read_rows(out)
    data["rows"] = merge_rows(data["rows"], rows, key=("name", "label"))
    data["note"] = ("Inputs are content hashes: corpus, question files, the index's manifest.json and the resolved "
                    "configuration (sorted JSON of every setting). Commands are as run, from the repository root.")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, data)
    if a.readme:
        write_readme(Path(a.readme), rows)
    print(f"{len(rows)} rows -> {out} ({describe(m)})")
    return 0


run = main
"""The entry of ``python -m bench reproduce`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
