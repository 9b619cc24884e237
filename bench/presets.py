"""Preset ladder (issue 10): every system preset over the same index and question sample.

For each preset (``pipeline = NAME``; rows may add overrides) the questions are answered
end to end, and the row records:

* retrieval of the final ranking at document level (the ablation ladder's columns:
  single hit@1 / hit@10 / MRR@10, multi recall@10 / all@10; preqrag.evaluation, ranx);
* answer-level figures that need no capable judge: **context hit** (a gold document among
  the generator's passages; for multi-doc questions the share of gold documents there),
  **token F1** against the reference answer (SQuAD's normalisation: lower case, no
  punctuation/articles, bag of tokens) and **ROUGE-L** F-measure (``rouge-score``, stemmed);
* for presets that cite, the share of answer sentences with at least one valid citation
  and the citations removed as invalid;
* seconds per question per stage (from the traces) and in total.

A 135M LLM writes weak answers: the answer-level columns say little about the presets
with a capable LLM, and the docs say so.

    python bench/presets.py --index IDX --questions ../shared/liverag-bench/dev.jsonl --sample 100 \\
        --presets preqrag,preqrag-keep,hybrid --cache-dir CACHE -o docs/bench/presets.json

``--retrieval-only`` skips generation (retrieval columns and seconds only). ``--head N`` keeps
the first N questions of the fixed-seed sample (a nested subset: answer-level rows on the first
50 of the sample of 500 see only questions the retrieval rows saw). Besides the presets of
:mod:`preqrag.core.presets`, ``--presets`` takes the baselines in :data:`BASELINES` (plain BM25 on
the raw question), so the ladder's "never worse than BM25" check is in the same file. Rows
merge into an existing output file by (name, label); each row keeps its own command and machine.
docs/results/<out>.md shows the file (``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
import time
from collections import Counter
from pathlib import Path

from harness import PLACEHOLDERS, describe, final_retrieval_columns, machine, stage_means  # noqa: E402
from harness import command as recorded_command, merge_rows, read_rows, utc_now, write_json  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.core.io import read_questions  # noqa: E402
from preqrag.run.pipeline import Pipeline  # noqa: E402


NOTE = ("Each row's machine says where it ran; rows without one come from an earlier session's 2-core AMD EPYC "
        "(seconds are comparable only between rows of the same machine). A 135M LLM writes weak rewrites and answers: "
        "answer-level columns say little about the presets with a capable LLM. llm-classifier rows: the LLM "
        "classifier (classifier.name = \"llm\"), gold single = one gold document.")
"""What the rows mean: written into a new file (a file's own ``note`` is kept); docs/results/ shows it."""


def normalize_answer(text: str) -> list[str]:
    """SQuAD v1.1 evaluation normalisation (Rajpurkar et al., 2016, official script):
    lower case, drop punctuation and the articles a/an/the, split on whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return text.split()


def token_prf(prediction: str, reference: str) -> tuple[float, float, float]:
    """SQuAD token precision, recall and F1 between two answers (bag-of-tokens overlap of
    :func:`normalize_answer`'s tokens); ``(0, 0, 0)`` when either is empty or nothing is shared."""
    p, r = normalize_answer(prediction), normalize_answer(reference)
    common = Counter(p) & Counter(r)
    same = sum(common.values())
    if not p or not r or same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(p), same / len(r)
    return precision, recall, 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 between two answers (bag-of-tokens overlap; :func:`token_prf`)."""
    return token_prf(prediction, reference)[2]


def recorded_config(cfg) -> dict:
    """``cfg`` as JSON for a row, with ``run.cache_dir`` written as the CACHE placeholder (as in
    the command), so that docs/bench holds no machine paths."""
    data = cfg.model_dump(mode="json")
    if data["run"].get("cache_dir"):
        data["run"]["cache_dir"] = PLACEHOLDERS["--cache-dir"]
    return data


def fallback_kind(fallback: str) -> str:
    """What a trace fallback is: ``parse`` (the LLM reply did not parse: ``unparsable ...``,
    an ``empty`` reply), ``llm-error`` (the call failed), ``degenerate`` (a looping answer
    repaired), ``cut`` (a prompt or question cut to fit) or ``sense`` (it parsed but made no
    sense: unrelated, too long, repeated, unknown namespace, ...)."""
    text = fallback.lower()
    # "unparsable" alone is also a per-line reason of GINGER's rewrite checks (a line with no
    # letter or digit inside a reply that parsed): that one is sense
    if ("unparsable json" in text or "unparsable: no" in text or "unparsable reply" in text
            or text.rstrip().endswith(": empty") or "no tags" in text
            or (text.rstrip().endswith(": unparsable") and not text.startswith("rewrites"))):
        return "parse"
    if "llm error" in text or "llm: error" in text:
        return "llm-error"
    if "degenerate answer" in text:
        return "degenerate"
    if " cut " in text or "cut to" in text or "no sentence fits" in text:
        return "cut"
    return "sense"


def fallback_stage(fallback: str) -> str:
    """The step a fallback belongs to: its first label (``sparse``, ``decompose``,
    ``rewrite``, ``rewrites``, ``answer``, ``route`` for every routing vote, ``classify``),
    ``generate/<step>`` for a generator's own steps (``generate/nuggets``, ``generate/summary``)."""
    parts = [x.strip() for x in fallback.split(":")]
    head = re.sub(r"\s*vote \d+$", "", parts[0])
    if head == "generate" and len(parts) > 2:
        head = "generate/" + re.sub(r"\s+\d+$", "", parts[1])
    return head


def fallback_counts(traces) -> dict[str, dict[str, int]]:
    """``{kind: {stage: count}}`` over every fallback of ``traces`` (also the classifier's)."""
    out: dict[str, dict[str, int]] = {}
    for t in traces:
        items = list(t.fallbacks)
        if t.classification is not None and t.classification.fallback:
            items.append("classify: " + t.classification.fallback)
        for f in items:
            kind, stage = fallback_kind(f), fallback_stage(f)
            out.setdefault(kind, {})
            out[kind][stage] = out[kind].get(stage, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def classifier_row(questions, cfg, label: str, command: str) -> dict:
    """The LLM classifier (``classifier.name = "llm"``, the configured LLM) on ``questions``:
    accuracy on gold single (one gold document) and multi (two) questions, parse fallbacks (the
    rules decided) and seconds per question."""
    from preqrag.components.classifiers.llm import LLMClassifier
    from preqrag.models.llm import load_llm

    llm = load_llm(cfg.llm, cfg.run.cache_dir)
    llm.warm_up()
    t0 = time.perf_counter()
    out = []
    for start in range(0, len(questions), 16):
        out += LLMClassifier(llm).classify([q.question for q in questions[start:start + 16]])
    wall = time.perf_counter() - t0
    gold = ["multi" if len(q.extra.get("gold_doc_ids") or []) > 1 else "single" for q in questions]
    acc = {}
    for kind in ("single", "multi"):
        idx = [i for i, g in enumerate(gold) if g == kind]
        acc[f"classifier_{kind}_accuracy"] = round(sum(out[i].question_type == kind for i in idx) / len(idx), 4) \
            if idx else None
    return {"name": "llm-classifier", "label": label, "llm": cfg.llm.model, "n_questions": len(questions), **acc,
            "classifier_accuracy": round(sum(o.question_type == g for o, g in zip(out, gold)) / len(gold), 4),
            "parse_fallbacks": {"classify": sum(o.fallback is not None for o in out)},
            "seconds_per_question": round(wall / len(questions), 4), "command": command}


BASELINES: dict[str, tuple[str | None, dict]] = {
    "bm25": (None, {"rewriter": {"name": "none"}, "retrieval": {"use_dense": False}, "rerank": {"chain": []}}),
}
"""Rows that are not presets: name → (preset it starts from, overrides)."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--sample", type=int, default=None, help="fixed-seed sample (seed 0, as bench/ablation.py)")
    ap.add_argument("--seed", type=int, default=0, help=(
        "the sample's seed: 0 is the ladder's sample; 1 a second dev sample, to check that a change carries over"))
    ap.add_argument("--presets", default="preqrag,preqrag-keep,hybrid")
    ap.add_argument("--config", default=None, help="a TOML applied on top of each preset")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--retrieval-only", action="store_true")
    ap.add_argument("--head", type=int, default=None, help="keep the first N questions of the sample")
    ap.add_argument("--label", default=None)
    ap.add_argument("--llm", default=None, help=(
        "[llm] model for every row (e.g. qwen2.5-coder-0.5b after `preqrag models install`); rows are "
        "keyed by (preset, label, llm)"))
    ap.add_argument("--llm-classifier", action="store_true", help=(
        "also a row for the LLM classifier's single/multi accuracy with this LLM"))
    ap.add_argument("-o", "--out", default="docs/bench/presets.json")
    args = ap.parse_args(argv)
    command = recorded_command("presets", argv)

    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    questions, errors = read_questions(args.questions)
    if args.sample and args.sample < len(questions):
        questions = random.Random(args.seed).sample(questions, args.sample)
    if args.head:
        questions = questions[:args.head]
    label = args.label or f"{Path(args.index).name} / {Path(args.questions).name} ({len(questions)} q)"
    out = Path(args.out)
    data = read_rows(out)

    def save(row: dict) -> None:
        row.setdefault("machine", describe(machine()))  # rows of one file may come from several machines
        row.setdefault("date", utc_now())
        data["rows"] = merge_rows(data["rows"], [row], key=("name", "label", "llm"))
        data.update({"machine": machine(), "date": utc_now(), "command": command})
        data.setdefault("note", NOTE)
        write_json(out, data)

    llm_override = {"llm": {"model": args.llm}} if args.llm else {}
    if args.llm_classifier:
        cfg = load_config(args.config, {**llm_override, "run": {"cache_dir": args.cache_dir}})
        row = classifier_row(questions, cfg, label, command)
        print(json.dumps(row), flush=True)
        save(row)
    for name in [n for n in args.presets.split(",") if n]:
        overrides = {"run": {"trace_depth": 100, **({"cache_dir": args.cache_dir} if args.cache_dir else {})}}
        preset, extra = BASELINES.get(name, (name, {}))
        cfg = load_config(args.config, {**extra, **llm_override, **overrides}, pipeline=preset)
        pipeline = Pipeline.from_config(args.index, cfg)
        pipeline.warm_up()
        traces, answers, failures = [], {}, 0
        t0 = time.perf_counter()
        for start in range(0, len(questions), args.batch_size):
            batch = questions[start:start + args.batch_size]
            if args.retrieval_only:
                traces += pipeline.retrieve(batch)
                continue
            for o in pipeline.answer(batch):
                if o.trace is not None:
                    traces.append(o.trace)
                if o.answer is not None:
                    answers[o.question.key] = o.answer
                else:
                    failures += 1
        wall = time.perf_counter() - t0
        counts = fallback_counts(traces)
        row = {"name": name, "label": label, "llm": cfg.llm.model, "n_questions": len(questions),
               **({"sample_seed": args.seed} if args.seed else {}),
               **final_retrieval_columns(traces, questions),
               "seconds_per_question": round(wall / len(questions), 4),
               "seconds_per_question_by_stage": stage_means([t.seconds for t in traces]),
               "fallbacks": sum(bool(t.fallbacks) for t in traces), "failures": failures,
               "parse_fallbacks": counts.get("parse", {}), "fallbacks_by_kind": counts,
               "config": recorded_config(cfg), "command": command}
        if not args.retrieval_only:
            by_id = {str(t.id): t for t in traces}
            ctx_hit, f1, rouge, cited, sentences, removed = [], [], [], 0, 0, 0
            for q in questions:
                a = answers.get(q.key)
                gold = set(q.extra.get("gold_doc_ids") or [])
                if a is None:
                    continue
                docs = {d for p in a.passages for d in p.doc_IDs}
                if gold:
                    ctx_hit.append(len(gold & docs) / len(gold) if len(gold) > 1 else float(bool(gold & docs)))
                ref = q.extra.get("answer")
                if isinstance(ref, str) and ref.strip():
                    f1.append(token_f1(a.answer, ref))
                    rouge.append(scorer.score(ref, a.answer)["rougeL"].fmeasure)
                t = by_id.get(q.key)
                if t is not None and t.citations is not None:
                    sentences += len(t.citations)
                    cited += sum(bool(c.passage_ids) for c in t.citations)
                    removed += t.removed_citations
            row.update({"answered": len(answers),
                        "context_hit": round(sum(ctx_hit) / len(ctx_hit), 4) if ctx_hit else None,
                        "answer_token_f1": round(sum(f1) / len(f1), 4) if f1 else None,
                        "answer_rougeL": round(sum(rouge) / len(rouge), 4) if rouge else None,
                        "cited_sentence_share": round(cited / sentences, 4) if sentences else None,
                        "removed_citations": removed if sentences else None})
        print(json.dumps({k: v for k, v in row.items() if k != "config"}), flush=True)
        save(row)
    return 0


run = main
"""The entry of ``python -m bench presets`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
