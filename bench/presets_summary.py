"""The preset ladder's summary in docs/presets.md, written from docs/bench/llm_presets.json.

For every (preset, LLM, index) the row measured on the most questions (the ladder's heads are nested
heads of one fixed-seed dev sample, so a larger head holds the smaller ones): retrieval columns, and
the answer columns where that preset and LLM were answered. The block between the markers
``<!-- bench/presets_summary.py: begin -->`` and ``... end -->`` in docs/presets.md is replaced; each
row's own command and machine stay in the JSON.

Usage:
  python bench/presets_summary.py [--json docs/bench/llm_presets.json] [--doc docs/presets.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import md_table  # noqa: E402

BEGIN, END = "<!-- bench/presets_summary.py: begin -->", "<!-- bench/presets_summary.py: end -->"


def _index(label: str) -> str:
    """The index part of a row label ("full / dev.jsonl (200 q), ..." -> "full")."""
    return label.split(" / ")[0]


def _f(x, digits=3):
    return None if x is None else f"{x:.{digits}f}"


def _short(llm: str | None) -> str:
    return {"HuggingFaceTB/SmolLM2-135M-Instruct": "SmolLM2-135M", None: "–"}.get(llm, llm)


def summary(rows: list[dict]) -> list[str]:
    """Markdown lines: the retrieval table and the answer table."""
    best: dict[tuple, dict] = {}
    answers: dict[tuple, dict] = {}
    for r in rows:
        if r.get("multi_recall@10") is None:
            continue  # classifier-only rows
        key = (r["name"], r.get("llm"), _index(r.get("label", "")))
        # the largest head; of equal heads the later row (the JSON is in measurement order)
        if key not in best or r["n_questions"] >= best[key]["n_questions"]:
            best[key] = r
        if r.get("answer_token_f1") is not None and (key not in answers
                                                     or r["n_questions"] >= answers[key]["n_questions"]):
            answers[key] = r
    ret = [{"preset": f"`{k[0]}`", "LLM": _short(k[1]), "index": k[2], "q": r["n_questions"],
            "single hit@1": _f(r.get("single_hit@1")), "single hit@10": _f(r.get("single_hit@10")),
            "single MRR@10": _f(r.get("single_mrr@10")), "multi recall@10": _f(r.get("multi_recall@10")),
            "multi all@10": _f(r.get("multi_all@10")), "date": r.get("date", "")}
           for k, r in sorted(best.items(), key=lambda kv: (kv[0][2], kv[0][0], str(kv[0][1])))]
    ans = [{"preset": f"`{k[0]}`", "LLM": _short(k[1]), "index": k[2], "q": r["n_questions"],
            "context hit": _f(r.get("context_hit")), "token F1": _f(r.get("answer_token_f1")),
            "ROUGE-L": _f(r.get("answer_rougeL")), "s/question": _f(r.get("seconds_per_question"), 2)}
           for k, r in sorted(answers.items(), key=lambda kv: (kv[0][2], kv[0][0], str(kv[0][1])))]
    return (["Retrieval (final ranking, document level), the largest head measured per preset, LLM and index "
             "(the latest of equal heads):", ""]
            + md_table(ret, list(ret[0]) if ret else [])
            + ["", "Answers (token F1 and ROUGE-L against the dev reference answers), the largest head answered "
               "(the latest of equal heads):", ""]
            + md_table(ans, list(ans[0]) if ans else []))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, default=Path("docs/bench/llm_presets.json"))
    ap.add_argument("--doc", type=Path, default=Path("docs/presets.md"))
    args = ap.parse_args(argv)
    rows = json.loads(args.json.read_text(encoding="utf-8"))["rows"]
    text = args.doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{args.doc}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    args.doc.write_text(head + BEGIN + "\n\n" + "\n".join(summary(rows)) + "\n\n" + END + tail, encoding="utf-8")
    return 0


run = main
"""The entry of ``python -m bench presets_summary`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
