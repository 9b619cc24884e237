"""Answer quality and generation seconds per answering configuration (issue 40), on fixed contexts.

Two steps, so that every configuration answers from the same passages:

1. ``contexts``: the retrieval pipeline of ``--config`` (default: the default configuration)
   runs every stage but generation for the fixed-seed dev sample (seed 0, ``--sample``, then the
   first ``--head``, as bench/presets.py) and writes, per question, its context passages (the
   ``generator.context_top_k`` head of the final ranking: id, document id, text), its gold
   documents and reference answer to a JSONL file.
2. ``answer``: the generator of the default configuration plus ``--set`` overrides (e.g.
   ``--set llm.model=qwen2.5-coder-1.5b --set generator.context_tokens=384``) answers the first
   ``--head`` questions of that file, ``--batch`` at a time in one ``generate`` call (default 1:
   one at a time; ``--batch 32`` as ``preqrag run`` with ``[run] batch_size = 32``: the LLM decodes
   their answers together, :mod:`preqrag.models.llm.batching`), and merges one row per ``--label`` into ``--out`` (JSON; docs/results/answers.md shows it):

   * ``answer_token_f1`` (SQuAD token F1) and ``answer_rougeL`` (ROUGE-L F, stemmed) against
     the reference answers;
   * ``context_hit``: gold documents among the passages in the prompt (multi-document
     questions: the share of their gold documents);
   * ``degenerate_share``: answers that loop (:func:`preqrag.components.answering.degenerate` on the
     LLM's reply, before the repair), are empty or a list of numbers, or repeat the question
     (word-set Jaccard with the question >= 0.8);
   * ``supported_share``: answer sentences (pysbd) that a context passage supports by the
     calibrated citation attribution (:mod:`preqrag.components.citations`: the bundled MiniLM
     cross-encoder, logit >= 2.5, calibrated on dev reference answers disjoint from the smoke
     questions, docs/results/citations.md);
   * ``prompt_tokens_mean`` (the user message in the LLM's tokenizer; the chat template adds ~30) and
     ``generate_seconds_per_question`` (wall time of the generator's call; batched: the call's wall
     time divided by its questions, a per-question share), on ``machine``.

   Answers are kept per label in ``--work`` (one JSONL per label): an interrupted run resumes.

    python bench/answers.py contexts --index IDX --questions ../shared/liverag-bench/dev.jsonl \\
        --sample 500 --head 200 --contexts CTX.jsonl [--config CONFIG]
    python bench/answers.py answer --contexts CTX.jsonl --head 50 --label "1.5B full" \\
        --set llm.model=qwen2.5-coder-1.5b [--set generator.context_tokens=384] [--default]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

from harness import command, describe, machine, merge_rows, read_rows, utc_now, write_json  # noqa: E402
from presets import token_f1  # noqa: E402

from preqrag.core.io import read_questions  # noqa: E402

COLUMNS = ["label", "llm", "n_questions", "answer_token_f1", "answer_rougeL", "context_hit", "degenerate_share",
           "supported_share", "prompt_tokens_mean", "answer_tokens_mean", "generate_seconds_per_question", "batch",
           "default", "machine"]


def _set(pairs: list[str]) -> dict:
    """``["a.b=1", "c.d=x"]`` -> ``{"a": {"b": 1}, "c": {"d": "x"}}`` (values parsed as JSON when they are)."""
    out: dict = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def contexts(args) -> None:
    from preqrag.core.config import load_config
    from preqrag.run.pipeline import Pipeline

    questions, errors = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    questions = questions[:args.head] if args.head else questions
    cfg = load_config(args.config)
    pipeline = Pipeline.from_config(args.index, cfg)
    out = Path(args.contexts)
    done = {json.loads(line)["id"] for line in out.open(encoding="utf-8")} if out.exists() else set()
    todo = [q for q in questions if str(q.id) not in done]
    with out.open("a", encoding="utf-8") as fh:
        for i in range(0, len(todo), 8):
            batch = todo[i:i + 8]
            for q, o in zip(batch, pipeline.prepare(batch)):
                if o.failure is not None:
                    print(f"{q.id}: {o.failure}", file=sys.stderr)
                    continue
                passages = [pipeline.index.passages[pid] for pid in o.trace.context_ids]
                fh.write(json.dumps({"id": str(q.id), "question": q.question, "answer": q.extra.get("answer"),
                                     "gold_doc_ids": q.extra.get("gold_doc_ids") or [],
                                     "passages": [{"id": p.id, "doc_id": p.doc_id, "text": p.text} for p in passages],
                                     }) + "\n")
            fh.flush()
            print(f"{min(i + 8, len(todo))}/{len(todo)}", file=sys.stderr)


def answer(args) -> None:
    from rouge_score import rouge_scorer

    from preqrag.components import registry as components
    from preqrag.components.answering import degenerate, restates_question
    from preqrag.components.citations import load_attributor, split_sentences
    from preqrag.components.registry import Context
    from preqrag.core.config import load_config
    from preqrag.core.contracts import LLMError

    overrides = _set(args.set)
    cfg = load_config(None, overrides)
    items = [json.loads(line) for line in Path(args.contexts).open(encoding="utf-8")][:args.head]
    ctx = Context(cfg=cfg)
    generator = components.build("generator", cfg.generator.name, ctx)
    llm = ctx.get_llm()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cache = work / (re.sub(r"[^A-Za-z0-9._-]+", "_", args.label) + ".jsonl")
    have = {}
    if cache.exists():
        for line in cache.open(encoding="utf-8"):
            r = json.loads(line)
            have[r["id"]] = r
    # prompt warm-up: the first call pays llama.cpp's graph allocation, not the configuration
    llm.warm_up()
    count = getattr(llm, "count_tokens", None)
    todo = [it for it in items if it["id"] not in have]
    with cache.open("a", encoding="utf-8") as fh:
        for start in range(0, len(todo), args.batch):
            group = todo[start:start + args.batch]
            t0 = time.perf_counter()
            gens = generator.generate([it["question"] for it in group], [[p["text"] for p in it["passages"]] for it in group])
            dt = time.perf_counter() - t0
            for it, g in zip(group, gens):
                failed = isinstance(g.answer, LLMError)
                rec = {"id": it["id"], "answer": "" if failed else g.answer, "error": str(g.answer) if failed else None,
                       "final_prompt": g.final_prompt, "fallbacks": list(g.fallbacks), "truncations": g.truncations,
                       "n_passages": g.n_passages if g.n_passages is not None else len(it["passages"]),
                       # one question at a time: its own call's wall time; batched: the per-question share
                       "seconds": round(dt / len(group), 3), "batch": len(group), "batch_seconds": round(dt, 3),
                       "prompt_tokens": count(g.final_prompt) if count else None,
                       "answer_tokens": count(g.answer) if count and not failed else None}
                fh.write(json.dumps(rec) + "\n")
                have[it["id"]] = rec
            fh.flush()
            print(f"{len(have)}/{len(items)} {dt:.1f}s for {len(group)} {rec['answer'][:100]!r}", file=sys.stderr)

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    attributor = load_attributor()
    f1, rouge, hit, degen, secs, ptoks, atoks, supported, sentences = [], [], [], 0, [], [], [], 0, 0
    items_sents = []
    for it in items:
        r = have[it["id"]]
        ans = r["answer"]
        f1.append(token_f1(ans, it["answer"] or ""))
        rouge.append(scorer.score(it["answer"] or "", ans)["rougeL"].fmeasure)
        shown = {p["doc_id"] for p in it["passages"][:r["n_passages"]]}
        gold = set(it["gold_doc_ids"])
        if gold:
            hit.append(len(gold & shown) / len(gold))
        loop = any("degenerate answer" in f for f in r["fallbacks"])
        degen += bool(loop or not re.findall(r"[A-Za-z]{2,}", ans) or degenerate(ans)
                      or restates_question(ans, it["question"]))
        secs.append(r["seconds"])
        if r["prompt_tokens"] is not None:
            ptoks.append(r["prompt_tokens"])
        if r["answer_tokens"] is not None:
            atoks.append(r["answer_tokens"])
        items_sents.append((split_sentences(ans), [p["text"] for p in it["passages"][:r["n_passages"]]]))
    for cites in attributor.attribute_many(items_sents):
        sentences += len(cites)
        supported += sum(bool(c) for c in cites)

    def mean(xs):
        return round(sum(xs) / len(xs), 4) if xs else None

    row = {"label": args.label, "llm": os.path.basename(cfg.llm.model) if os.path.isabs(cfg.llm.model) else cfg.llm.model, "n_questions": len(items),
           "answer_token_f1": mean(f1), "answer_rougeL": mean(rouge), "context_hit": mean(hit),
           "degenerate_share": round(degen / len(items), 4), "supported_share":
               round(supported / sentences, 4) if sentences else None,
           "prompt_tokens_mean": mean(ptoks), "answer_tokens_mean": mean(atoks),
           "generate_seconds_per_question": mean(secs), "batch": args.batch, "default": bool(args.default),
           "overrides": overrides, "machine": describe(machine()),
           "date": utc_now(), "command": command("answers", args.argv)}
    out = Path(args.out)
    data = read_rows(out)
    data["rows"] = merge_rows(data["rows"], [row], key=("label", "n_questions", "machine"))
    if row["default"]:  # one default row per machine (an AVX2 and an AVX-512 figure of the same default)
        for r in data["rows"]:
            if r is not row and r["machine"] == row["machine"]:
                r["default"] = False
    data.update(method=METHOD, context_passages=CONTEXTS_NOTE)
    write_json(out, data)
    print(json.dumps({k: row[k] for k in COLUMNS}, indent=1))


METHOD = ("Each row one answering configuration on the same context passages; quality against the dev reference "
          "answers, seconds of the generator's call per question (batch 1: one question at a time on one llama.cpp "
          "context; batch N: N questions per call, their answers decoded together, the call's wall time divided by "
          "N), on the machine named.")
"""What a row is (written into the JSON; docs/results/answers.md shows it)."""
CONTEXTS_NOTE = ("Context passages: `bench/answers.py contexts` with the `hybrid` preset (BM25 + dense, union, "
                 "cross-encoder depth 30, top-3) over the full bench corpus indexed with the WordLlama embedder "
                 "(`[embedder] name = \"wordllama\"`: the index builds in minutes on 2 cores), the fixed-seed dev "
                 "sample (seed 0, 500, first 200); rows with fewer questions use its first N.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("contexts")
    c.add_argument("--index", required=True)
    c.add_argument("--questions", required=True)
    c.add_argument("--config")
    c.add_argument("--sample", type=int, default=500)
    c.add_argument("--head", type=int, default=200)
    c.add_argument("--contexts", required=True)
    a = sub.add_parser("answer")
    a.add_argument("--contexts", required=True)
    a.add_argument("--head", type=int, default=200)
    a.add_argument("--label", required=True)
    a.add_argument("--set", action="append", default=[])
    a.add_argument("--default", action="store_true", help="this row is the shipped default")
    a.add_argument("--batch", type=int, default=1, help="questions per generate call (answered together)")
    a.add_argument("--work", default="bench_work/answers", help="per-label answer files (resume)")
    a.add_argument("-o", "--out", default="docs/bench/answers.json")
    ap.set_defaults(argv=argv)  # the recorded command's arguments (None: sys.argv[1:])
    args = ap.parse_args(argv)
    {"contexts": contexts, "answer": answer}[args.step](args)
    return 0


run = main
"""The entry of ``python -m bench answers`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
