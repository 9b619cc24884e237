"""Answer quality and cost of each preset with the default LLM (issue 58), one row per preset.

For each ``--preset``: ``preqrag run`` (the real command, a fresh output) over the first ``--limit``
questions of ``--questions`` (a file with reference ``answer``s) with a configuration holding only
``pipeline = "NAME"``; then, per row:

* ``answer_token_f1``: SQuAD token F1 against the reference answers (bench/presets.py);
* ``answer_token_precision`` / ``answer_token_recall``: the two halves of that F1 (mean over
  answers), and ``answer_words``: the answers' mean length in words (a short answer loses recall);
* ``answer_rougeL``: ROUGE-L F-measure against them (``rouge_score``, stemmed, as bench/presets.py);
* ``degenerate_share``: answers :func:`preqrag.components.answering.degenerate` flags;
* ``copied_sentence_share``: answer sentences (:func:`preqrag.core.text.split_sentences`) holding
  :data:`preqrag.components.answering.COPY_WORDS` (12) consecutive words of one of the answer's passages
  (:func:`preqrag.components.answering.copied_sentences`), over all answer sentences;
* ``cited_sentence_share``: of the sentences a citing generator reports (``cir``, ``ginger``:
  ``Trace.citations``, one entry per sentence it wrote), the share citing a passage, else null;
* ``llm_seconds_per_question`` and ``llm_calls_per_question`` (``answers.run.json``: seconds inside
  llama.cpp and batched calls), ``seconds_per_question`` (wall seconds of the command, model loading
  included, / answered).

Rows are merged into ``--out`` by label (``preset`` + ``--label-suffix``) with the machine and date
(docs/results/preset_answers.md shows them); the 200-question rows, and the rows run beside them, go to
``--out docs/bench/preset_answers_200.json`` (docs/results/preset_answers_200.md).

    python bench/preset_answers.py --index IDX --questions ../shared/liverag-bench/smoke.jsonl \\
        --limit 12 --preset hybrid --preset cir --work WORK

``--sample 500 --head 200`` takes the ladder's fixed-seed dev sample (seed 0, as bench/presets.py)
and its first 200 questions (``--limit`` then cuts it further), written to ``WORK/questions.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import time
from pathlib import Path

from harness import command, describe, machine, merge_rows, placeholders, read_rows, utc_now, write_json
from presets import token_prf

from preqrag.components.answering import copied_sentences, degenerate
from preqrag.core.io import atomic_write_text
from preqrag.core.text import split_sentences


NOTE = ("Token F1 (with its precision and recall) and ROUGE-L against the reference answers; words: mean answer "
        "length; copied: answer sentences holding 12 consecutive words "
        "of a passage; cited: of the sentences a citing generator reports (cir, ginger), the share citing a passage. "
        "LLM calls: batched calls (one call decodes many requests together), per question. Seconds: wall time of "
        "`preqrag run` (model loading included) per answered question; the row's command is the `preqrag run` "
        "measured (script: the bench command that ran it). Rows are comparable only on the same machine and "
        "questions.")
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
    if not out.exists():
        raise SystemExit(f"{preset}: `preqrag run` exited {rc} without writing {out} (its message is above)")
    return {"preset": preset, "exit_code": rc, **score(out, questions),
            "seconds_per_question": round(wall / max(1, _answered(out)), 2), "command": " ".join(placeholders(cmd))}


def _answered(out: Path) -> int:
    return sum(1 for x in out.read_text().splitlines() if x.strip()) if out.exists() else 0


def score(out: Path, questions: str) -> dict:
    """The quality and LLM-cost columns of one ``preqrag run`` output (``out`` = its answers file)."""
    refs = {str(q["id"]): q.get("answer", "") for q in map(json.loads, Path(questions).read_text().splitlines())}
    answers = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    traces = {str(t["id"]): t for t in map(json.loads, out.with_suffix(".traces.jsonl").read_text().splitlines())}
    stats = json.loads(out.with_suffix(".run.json").read_text())
    n_sent = n_copied = n_cited = n_cite_sents = 0
    cites = False
    for a in answers:
        sents = split_sentences(a["answer"]) or [a["answer"]]
        n_sent += len(sents)
        n_copied += sum(copied_sentences(sents, [p["passage"] for p in a["passages"]]))
        c = traces[str(a["id"])].get("citations")
        if c is not None:  # the generator's own sentences, each with its cited passages
            cites = True
            n_cite_sents += len(c)
            n_cited += sum(bool(x["passage_ids"]) for x in c)
    n = max(len(answers), 1)
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rouge = sum(scorer.score(refs[str(a["id"])], a["answer"])["rougeL"].fmeasure for a in answers) / n
    prf = [token_prf(a["answer"], refs[str(a["id"])]) for a in answers]
    return {"answered": len(answers), "failed": stats["failed"],
            "answer_token_f1": round(sum(x[2] for x in prf) / n, 4),
            "answer_token_precision": round(sum(x[0] for x in prf) / n, 4),
            "answer_token_recall": round(sum(x[1] for x in prf) / n, 4),
            "answer_words": round(sum(len(a["answer"].split()) for a in answers) / n, 1),
            "answer_rougeL": round(rouge, 4),
            "degenerate_share": round(sum(degenerate(a["answer"]) is not None for a in answers) / n, 4),
            "copied_sentence_share": round(n_copied / max(n_sent, 1), 4),
            "cited_sentence_share": round(n_cited / max(n_cite_sents, 1), 4) if cites else None,
            "llm_seconds_per_question": round(stats["model_seconds"].get("llm", 0.0) / n, 2),
            "llm_calls_per_question": round(stats["model_calls"].get("llm", 0) / n, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default="../shared/liverag-bench/smoke.jsonl")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--sample", type=int, default=None, help="fixed-seed sample of the questions (seed 0)")
    ap.add_argument("--head", type=int, default=None, help="keep the first N questions of the sample")
    ap.add_argument("--preset", action="append", required=True)
    ap.add_argument("--toml", default="", help="TOML text (not a file) appended to each preset's configuration")
    ap.add_argument("--label-suffix", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", default="docs/bench/preset_answers.json")
    ap.add_argument("--rescore", action="store_true", help=(
        "run nothing: recompute the quality columns of the rows labelled PRESET + --label-suffix from the "
        "outputs left in WORK (after a change to a measure), keeping their seconds, command and date"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    data = read_rows(out)
    date = utc_now()
    questions, described = args.questions, f"first {args.limit} of {Path(args.questions).name}"
    if args.sample or args.head:
        lines = [x for x in Path(args.questions).read_text().splitlines() if x.strip()]
        if args.sample and args.sample < len(lines):
            lines = random.Random(0).sample(lines, args.sample)
        lines = lines[:args.head] if args.head else lines
        questions = str(Path(args.work) / "questions.jsonl")
        Path(args.work).mkdir(parents=True, exist_ok=True)
        atomic_write_text(questions, "\n".join(lines) + "\n")
        described = (f"first {min(args.limit, len(lines))} of the fixed-seed sample (seed 0, {args.sample or len(lines)}, "
                     f"first {len(lines)}) of {Path(args.questions).name}")
    if args.rescore:
        for preset in args.preset:
            label = preset + args.label_suffix
            row = next(r for r in data["rows"] if r["label"] == label)
            row.update(score(Path(args.work) / preset / "answers.jsonl", str(Path(args.work) / "questions.jsonl")
                             if (Path(args.work) / "questions.jsonl").exists() else args.questions))
            print(json.dumps(row), flush=True)
        data["note"] = NOTE
        write_json(out, data)
        return 0
    for preset in args.preset:
        row = measure(preset, args.index, questions, args.limit, Path(args.work), args.toml)
        row.update(label=preset + args.label_suffix, questions=described,
                   machine=describe(machine()), date=date,
                   script=command("preset_answers", argv))
        data["rows"] = merge_rows(data["rows"], [row])
        print(json.dumps(row), flush=True)
        data["note"] = NOTE
        write_json(out, data)
    return 0


run = main
"""The entry of ``python -m bench preset_answers`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
