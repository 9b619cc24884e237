"""Answer quality and cost of each preset with the default LLM (issue 58), one row per preset.

For each ``--preset``: ``preqrag run`` (the real command, a fresh output) over the first ``--limit``
questions of ``--questions`` (a file with reference ``answer``s) with a configuration holding only
``pipeline = "NAME"``; then, per row:

* ``answer_token_f1``: SQuAD token F1 against the reference answers (bench/presets.py);
* ``degenerate_share``: answers :func:`preqrag.answering.degenerate` flags;
* ``copied_sentence_share``: answer sentences (:func:`preqrag.text.split_sentences`) holding
  :data:`preqrag.answering.COPY_WORDS` (12) consecutive words of one of the answer's passages
  (:func:`preqrag.answering.copied_sentences`), over all answer sentences;
* ``cited_sentence_share``: answer sentences with a citation, for generators that cite (``cir``,
  ``ginger``: ``Trace.citations``), else null;
* ``llm_seconds_per_question`` and ``llm_calls_per_question`` (``answers.run.json``: seconds inside
  llama.cpp and batched calls), ``seconds_per_question`` (wall seconds of the command, model loading
  included, / answered).

Rows are merged into ``--out`` by label (``preset`` + ``--label-suffix``) with the machine and date
(docs/results/preset_answers.md shows them).

    python bench/preset_answers.py --index IDX --questions ../shared/liverag-bench/smoke.jsonl \\
        --limit 12 --preset hybrid --preset cir --work WORK
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from _common import describe, machine, placeholders
from presets import token_f1

from preqrag.answering import copied_sentences, degenerate
from preqrag.io import atomic_write_text
from preqrag.text import split_sentences


NOTE = ("Token F1 against the reference answers; copied: answer sentences holding 12 consecutive words of a passage; "
        "cited: sentences with a citation (generators that cite). Seconds: wall time of `preqrag run` (model loading "
        "included) per answered question; the row's command is the `preqrag run` measured (script: the bench "
        "command that ran it).")
"""What the columns mean (written into the JSON; docs/results/preset_answers.md shows it)."""


def measure(preset: str, index: str, questions: str, limit: int, work: Path, extra_toml: str) -> dict:
    out = work / preset / "answers.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    for f in out.parent.glob("answers*"):
        f.unlink()
    cfg = out.parent / "preset.toml"
    cfg.write_text(f'pipeline = "{preset}"\n{extra_toml}')
    cmd = ["preqrag", "run", questions, "--index", index, "-o", str(out), "--config", str(cfg), "--limit", str(limit)]
    t0 = time.perf_counter()
    rc = subprocess.run(cmd).returncode
    wall = time.perf_counter() - t0
    refs = {str(q["id"]): q.get("answer", "") for q in map(json.loads, Path(questions).read_text().splitlines())}
    answers = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    traces = {str(t["id"]): t for t in map(json.loads, out.with_suffix(".traces.jsonl").read_text().splitlines())}
    stats = json.loads(out.with_suffix(".run.json").read_text())
    n_sent = n_copied = n_cited = 0
    cites = False
    for a in answers:
        sents = split_sentences(a["answer"]) or [a["answer"]]
        n_sent += len(sents)
        n_copied += sum(copied_sentences(sents, [p["passage"] for p in a["passages"]]))
        c = traces[str(a["id"])].get("citations")
        if c is not None:
            cites = True
            n_cited += sum(bool(x["passage_ids"]) for x in c)
    n = max(len(answers), 1)
    return {"preset": preset, "exit_code": rc, "answered": len(answers), "failed": stats["failed"],
            "answer_token_f1": round(sum(token_f1(a["answer"], refs[str(a["id"])]) for a in answers) / n, 4),
            "degenerate_share": round(sum(degenerate(a["answer"]) is not None for a in answers) / n, 4),
            "copied_sentence_share": round(n_copied / max(n_sent, 1), 4),
            "cited_sentence_share": round(n_cited / max(n_sent, 1), 4) if cites else None,
            "llm_seconds_per_question": round(stats["model_seconds"].get("llm", 0.0) / n, 2),
            "llm_calls_per_question": round(stats["model_calls"].get("llm", 0) / n, 2),
            "seconds_per_question": round(wall / n, 2),
            "command": " ".join(placeholders(cmd))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default="../shared/liverag-bench/smoke.jsonl")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--preset", action="append", required=True)
    ap.add_argument("--toml", default="", help="more TOML appended to each preset's configuration")
    ap.add_argument("--label-suffix", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", default="docs/bench/preset_answers.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": []}
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for preset in args.preset:
        row = measure(preset, args.index, args.questions, args.limit, Path(args.work), args.toml)
        row.update(label=preset + args.label_suffix, questions=f"first {args.limit} of {Path(args.questions).name}",
                   machine=describe(machine()), date=date,
                   script="python bench/preset_answers.py " + " ".join(placeholders(sys.argv[1:] if argv is None else argv)))
        data["rows"] = [r for r in data["rows"] if r["label"] != row["label"]] + [row]
        print(json.dumps(row), flush=True)
        data["note"] = NOTE
        atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
