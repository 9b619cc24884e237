"""Every LLM step that parses its output, run alone on dev questions: parse fallbacks and seconds.

Issue 22's target is 0 parse fallbacks per step over 100 dev questions with SmolLM2. This script
runs each structured step directly (no index needed), on the fixed-seed dev sample (seed 0, as
bench/presets.py; ``--head N`` keeps its first N), with the gold documents' text standing in for
retrieved passages where a step needs passages:

* ``classify``: the LLM classifier (choice single | multi), with its accuracy against the gold
  type (one gold document = single);
* ``preqrag``: PreQRAG's rewriter on the gold type (2 rewrites for single, 2 sub-questions for
  multi);
* ``dota``: DoTA-RAG's typo-fixing rewrite and 4 routing votes;
* ``ginger``: GINGER's intermediate answer and 3 rewrites;
* ``nuggets``: GINGER's nugget detection on the first gold document (first 1,200 characters);
* ``cir``: CIR's cited answer over the gold documents (each cut to 96 tokens).

For each step: calls, parse fallbacks (the reply did not parse), sense fallbacks (it parsed but
made no sense: unrelated, too long, repeated, ...), LLM errors, and seconds per question.
Rows go to ``--out`` (JSON, merged by (llm, label); docs/results/llm_steps.md shows it).

    python bench/llm_steps.py --questions ../shared/liverag-bench/dev.jsonl \\
        --corpus ../shared/liverag-bench/corpus.jsonl.gz --sample 500 --head 50 [--llm qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import random
import sys
import time
from pathlib import Path

from harness import command as recorded_command, machine  # noqa: E402
from presets import fallback_kind  # noqa: E402

from preqrag.core.io import atomic_write_text  # noqa: E402

STEPS = ("classify", "preqrag", "dota", "ginger", "nuggets", "cir")


NOTE = ("Each step run alone on dev questions (the gold documents' text as its passages); parse_fallbacks: the "
        "reply did not parse; sense_fallbacks: it parsed but made no sense (unrelated, too long, repeated, ...); "
        "accuracy (classify), routed (dota), sentences and removed_citations (cir): the step's own figures.")
"""What the columns mean (written into the JSON; docs/results/llm_steps.md shows it)."""


def gold_texts(corpus: Path, ids: set[str]) -> dict[str, str]:
    """``{doc id: text}`` of the documents ``ids`` (one pass over the JSONL(.gz) corpus)."""
    out: dict[str, str] = {}
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["id"] in ids:
                out[d["id"]] = d["text"]
    return out


def count(fallbacks: list[str], row: dict) -> None:
    for f in fallbacks:
        kind = fallback_kind(f)
        key = {"parse": "parse_fallbacks", "llm-error": "llm_errors"}.get(kind, "sense_fallbacks")
        row[key] += 1
        if kind == "parse" and len(row["parse_examples"]) < 3:
            row["parse_examples"].append(f[:160])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", required=True)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--sample", type=int, default=500)
    ap.add_argument("--head", type=int, default=100)
    ap.add_argument("--llm", default=None, help="[llm] model (default: the bundled SmolLM2-135M)")
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--out", default="docs/bench/llm_steps.json")
    args = ap.parse_args(argv)

    from preqrag.components.classifiers.llm import LLMClassifier
    from preqrag.core.config import load_config
    from preqrag.systems.dota.planning import DotaRewriter
    from preqrag.systems.cir.generator import CIRGenerator
    from preqrag.systems.ginger.nuggets import NUGGET_FORMAT, NUGGET_SYSTEM, NUGGET_USER, nugget_schema, parse_nugget_reply
    from preqrag.systems.ginger.rewriting import GingerRewriter
    from preqrag.core.io import read_questions
    from preqrag.models.llm import load_llm
    from preqrag.systems.preqrag.rewriting import PreQRAGRewriter

    questions, _ = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    questions = questions[:args.head]
    cfg = load_config(None, {"llm": {"model": args.llm}} if args.llm else {})
    llm = load_llm(cfg.llm)
    llm.warm_up()
    texts = [q.question for q in questions]
    gold = ["multi" if len(q.extra.get("gold_doc_ids") or []) > 1 else "single" for q in questions]
    docs = gold_texts(args.corpus, {d for q in questions for d in q.extra.get("gold_doc_ids") or []})
    passages = [[docs[d] for d in q.extra.get("gold_doc_ids") or [] if d in docs] for q in questions]
    command = recorded_command("llm_steps", argv, paths=False)
    label = f"{Path(args.questions).name} sample {args.sample}, first {len(questions)}"
    rows = []
    for step in args.steps.split(","):
        row = {"step": step, "llm": cfg.llm.model, "label": label, "questions": len(questions), "calls": 0,
               "parse_fallbacks": 0, "sense_fallbacks": 0, "llm_errors": 0, "parse_examples": []}
        t0 = time.perf_counter()
        for start in range(0, len(questions), 8):
            qs, gs, ps = texts[start:start + 8], gold[start:start + 8], passages[start:start + 8]
            if step == "classify":
                out = LLMClassifier(llm).classify(qs)
                row["calls"] += len(qs)
                row["correct"] = row.get("correct", 0) + sum(c.question_type == g for c, g in zip(out, gs))
                count(["classify: " + c.fallback for c in out if c.fallback], row)
            elif step == "preqrag":
                plans = PreQRAGRewriter(llm, cfg.rewriter).plan(qs, gs)
                row["calls"] += sum(2 if g == "single" else 1 for g in gs)
                count([f for p in plans for f in p.fallbacks], row)
            elif step == "dota":
                plans = DotaRewriter(llm, cfg.dota).plan(qs, gs)
                row["calls"] += len(qs) * (1 + cfg.dota.route_votes)
                row["routed"] = row.get("routed", 0) + sum(bool(p.sub_queries[0].filters) for p in plans)
                count([f for p in plans for f in p.fallbacks], row)
            elif step == "ginger":
                plans = GingerRewriter(llm, cfg.ginger, cfg.rewriter).plan(qs, gs)
                row["calls"] += 2 * len(qs)
                count([f for p in plans for f in p.fallbacks if not f.startswith("rewrite: question cut")], row)
            elif step == "nuggets":
                for q, p in zip(qs, ps):
                    passage = p[0][:1200] if p else ""
                    fit = nugget_schema(passage, getattr(llm, "count_tokens", None), 256)
                    if fit is None:
                        continue
                    schema, budget = fit
                    user = NUGGET_USER.format(query=q, passage=passage) + NUGGET_FORMAT
                    (reply,) = llm.chat_many([[{"role": "system", "content": NUGGET_SYSTEM},
                                               {"role": "user", "content": user}]], max_tokens=budget, schema=schema)
                    row["calls"] += 1
                    if isinstance(reply, str):
                        _, rejected = parse_nugget_reply(reply, passage, 0)
                        count([f"generate: nuggets: {r}" for r in rejected], row)
                    else:
                        count([f"generate: nuggets: llm error: {reply}"], row)
            elif step == "cir":
                gen_cfg = cfg.generator.model_copy(update={"max_passage_tokens": 96, "max_new_tokens": 256})
                out = CIRGenerator(llm, gen_cfg, cfg.cir).generate(qs, [p or [""] for p in ps])
                row["calls"] += len(qs)
                count([f for g in out for f in g.fallbacks], row)
                row["sentences"] = row.get("sentences", 0) + sum(len(g.citations or []) for g in out)
                row["removed_citations"] = row.get("removed_citations", 0) + sum(g.removed_citations for g in out)
        row["seconds_per_question"] = round((time.perf_counter() - t0) / len(questions), 3)
        if step == "classify":
            row["accuracy"] = round(row.pop("correct") / len(questions), 4)
        row["command"] = command
        print(json.dumps(row), flush=True)
        rows.append(row)

    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": []}
    keys = {(r["step"], r["llm"], r["label"]) for r in rows}
    data["rows"] = [r for r in data["rows"] if (r["step"], r["llm"], r["label"]) not in keys] + rows
    data.update({"machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")})
    data["note"] = NOTE
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench llm_steps`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
