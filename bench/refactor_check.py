"""Behaviour kept across a refactor: the preset ladder's retrieval rows of two checkouts, side by side
(issue 56, item 6: "the committed rows re-run equal").

The same bench/presets.py command runs in the checkout before the refactor and in the one after it,
over one index, with the LLM's replies shared: the first run writes them to its ``--cache-dir``
(``llm.sqlite``), the second starts from a copy of that file alone, so its LLM calls return the
same bytes while its query vectors and cross-encoder scores are computed anew. Any difference in a
row is then the code's, not the LLM's sampling or a cached score. This script pairs the two files'
rows by preset and says, per column, whether they are equal::

    git worktree add ../before BEFORE_COMMIT
    (cd ../before && PYTHONPATH=src python bench/presets.py --index IDX --questions Q --sample 500 \\
        --head 100 --presets hybrid,preqrag,dota,cir --retrieval-only --llm HuggingFaceTB/SmolLM2-135M-Instruct \\
        --cache-dir CACHE_A --label before -o BEFORE.json)
    mkdir CACHE_B && cp CACHE_A/llm.sqlite CACHE_B/
    python bench/presets.py ... --cache-dir CACHE_B --label after -o AFTER.json
    python bench/refactor_check.py --before BEFORE.json --after AFTER.json --before-commit C1 \\
        --after-commit C2 -o docs/bench/refactor_check.json

Columns compared: the ladder's document-level retrieval figures (single hit@1, hit@10, MRR@10,
multi recall@10, all@10) and the counts of fallbacks and failed questions; seconds are shown, not
compared (they are timings).

``--answers`` compares answer rows of bench/preset_answers.py instead (the LLM's answers, not
cached: greedy decoding re-run), one pair per ``--pair BEFORE_LABEL AFTER_LABEL``, the labels looked
up in the ``--rows`` files (labels unique across them), over :data:`ANSWER_COLUMNS` present in both
rows::

    python bench/refactor_check.py --answers --rows docs/bench/preset_answers.json \
        --pair "hybrid, 48 dev q" "hybrid, 48 dev q, at C2" \
        --before-commit C1 --after-commit C2 -o docs/bench/refactor_answers.json

Batched decoding is bit-stable only for the same batches: a pair must answer the same questions
with the same ``--limit`` (the first 48 of a 64-question run are not the 48-question run's answers).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import command as recorded_command
from harness import describe, machine, utc_now, write_json

COLUMNS = ("single_hit@1", "single_hit@10", "single_mrr@10", "multi_recall@10", "multi_all@10",
           "fallbacks", "failures")
"""The columns that must be equal (bench/presets.py's row keys)."""


ANSWER_COLUMNS = ("answered", "failed", "answer_token_f1", "answer_token_precision", "answer_token_recall",
                  "answer_words", "answer_rougeL", "degenerate_share", "copied_sentence_share",
                  "cited_sentence_share")
"""The answer-row columns that must be equal (bench/preset_answers.py's row keys); one missing from
either row is listed under ``not_compared``."""

RETRIEVAL_NOTE = ("Each run's LLM replies are the first run's (llm.sqlite copied alone); query vectors and "
                  "cross-encoder scores are computed in each run. equal: every compared column is the same value "
                  "in both runs.")
ANSWERS_NOTE = ("Each row pairs two bench/preset_answers.py rows: `preqrag run` answering the same questions "
                "with the same batches, the LLM decoding anew (greedy, no cache). equal: every compared column "
                "is the same value in both rows; not_compared: columns one row lacks.")
"""The JSON's ``note`` for each mode (``--note`` is appended)."""


def pair_answer_rows(before: dict, after: dict) -> dict:
    """One comparison of two bench/preset_answers.py rows: the compared columns' values before,
    ``differs`` (``{column: [before, after]}``), ``not_compared`` (columns absent from a row) and
    ``equal``; each row's label, date, machine and seconds per question (shown, not compared)."""
    both = [c for c in ANSWER_COLUMNS if c in before and c in after]
    differs = {c: [before[c], after[c]] for c in both if before[c] != after[c]}
    return {"preset": before.get("preset"), "before_label": before.get("label"), "after_label": after.get("label"),
            "n_questions": before.get("answered"), "equal": not differs, **{c: before[c] for c in both},
            "differs": differs, "not_compared": [c for c in ANSWER_COLUMNS if c not in both],
            "before_date": before.get("date"), "after_date": after.get("date"),
            "before_machine": before.get("machine"), "after_machine": after.get("machine"),
            "seconds_per_question_before": before.get("seconds_per_question"),
            "seconds_per_question_after": after.get("seconds_per_question")}


def _answer_pairs(args) -> tuple[list[dict], dict]:
    """The ``--answers`` rows, and the commands that made the compared rows (by label)."""
    by_label = {r["label"]: r for f in args.rows for r in json.loads(Path(f).read_text(encoding="utf-8"))["rows"]}
    missing = [label for pair in args.pair for label in pair if label not in by_label]
    if missing:
        raise SystemExit(f"refactor_check: no row labelled {missing[0]!r} in {', '.join(args.rows)}")
    rows = [pair_answer_rows(by_label[b], by_label[a]) for b, a in args.pair]
    commands = {label: by_label[label].get("script") for pair in args.pair for label in pair}
    return rows, commands


def pair_rows(before: list[dict], after: list[dict]) -> list[dict]:
    """One row per preset present in both lists: each compared column's value before, the columns
    whose value after differs (``differs``: ``{column: [before, after]}``, empty when the two runs
    agree to the last bit: they compute the same floats from the same inputs) and ``equal``."""
    after_by_name = {r["name"]: r for r in after}
    rows = []
    for b in before:
        a = after_by_name.get(b["name"])
        if a is None:
            continue
        differs = {c: [b.get(c), a.get(c)] for c in COLUMNS if b.get(c) != a.get(c)}
        rows.append({"preset": b["name"], "n_questions": b.get("n_questions"), "equal": not differs,
                     **{c: b.get(c) for c in COLUMNS}, "differs": differs,
                     "seconds_per_question_before": b.get("seconds_per_question"),
                     "seconds_per_question_after": a.get("seconds_per_question")})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="bench/presets.py output of the checkout before")
    ap.add_argument("--after", help="bench/presets.py output of the checkout after")
    ap.add_argument("--before-commit", default=None)
    ap.add_argument("--after-commit", default=None)
    ap.add_argument("--note", default="", help="what else the reader should know of these runs")
    ap.add_argument("--answers", action="store_true",
                    help="compare bench/preset_answers.py rows (by --pair labels), not retrieval rows")
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("BEFORE_LABEL", "AFTER_LABEL"),
                    help="with --answers: the labels of two rows to compare")
    ap.add_argument("--rows", action="append", default=[],
                    help="with --answers: a bench/preset_answers.py JSON file holding the rows (repeatable)")
    ap.add_argument("-o", "--out", default="docs/bench/refactor_check.json")
    args = ap.parse_args(argv)
    if args.answers:
        if not args.pair or not args.rows:
            ap.error("--answers needs --rows FILE and at least one --pair BEFORE_LABEL AFTER_LABEL")
        rows, commands = _answer_pairs(args)
    else:
        if not args.before or not args.after:
            ap.error("--before and --after are required (or --answers)")
        before = json.loads(Path(args.before).read_text(encoding="utf-8"))["rows"]
        after = json.loads(Path(args.after).read_text(encoding="utf-8"))["rows"]
        rows = pair_rows(before, after)
        if not rows:
            print("refactor_check: no preset is in both files", file=sys.stderr)
            return 2
        commands = {"before": before[0].get("command"), "after": after[0].get("command")}
    for r in rows:
        print(f"{r['preset']:<12} {'equal' if r['equal'] else 'DIFFERENT'}",
              *(f"{c}={b}/{a}" for c, (b, a) in r["differs"].items()))
    write_json(args.out, {
        "rows": rows, "before_commit": args.before_commit, "after_commit": args.after_commit,
        "runs": commands, "machine": describe(machine()), "date": utc_now(),
        "command": recorded_command("refactor_check", argv),
        "note": (ANSWERS_NOTE if args.answers else RETRIEVAL_NOTE) + (" " + args.note if args.note else "")})
    return 0 if all(r["equal"] for r in rows) else 1


run = main
"""The entry of ``python -m bench refactor_check`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
