"""Ablation ladder of PreQRAG retrieval (issue: evaluation), written to docs/bench/ablation.json.

Rows (each a configuration over the same index and questions):
  bm25-raw        BM25 on the raw question
  dense-raw       dense retrieval only, raw question
  hybrid-union    BM25 + dense, union (round-robin order), no reranking
  hybrid-rerank   + cross-encoder reranking (default depth: 30 head candidates of the union)
  hybrid-rerank-all  the same, reranking the whole union (<= 200 candidates; the paper's setting)
  rewriting       + LLM rewrites for every question (no decomposition)
  preqrag         + decomposition of multi-doc questions (full PreQRAG retrieval)
  preqrag-rrf     full PreQRAG with RRF instead of union

Quality is measured on the "final" ranking (what the generator's context is cut from), at
document level, with preqrag.evaluation.evaluate_retrieval (ranx). Generation is not run:
seconds_per_question covers classification, rewriting, retrieval, fusion and reranking.
Each row also records the classifier's accuracy on the sample (gold: n_gold == 1 single,
>= 2 multi) and, when the base config sets run.cache_dir, how many model calls were cache
hits (those rows' seconds are then lower than a cold run's; bench/throughput.py is the
cold timing).

Usage:
  python bench/ablation.py --index IDX --questions dev.jsonl [--sample 500] [--rows bm25-raw,...]
         [--label NAME] [--out docs/bench/ablation.json]
Rows are merged into an existing output file by (name, label), so runs on different
indexes/question sets can share one table; each row records its command, machine and date.
docs/results/ablation.md shows the file (``python bench/results.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

from harness import command as recorded_command, final_retrieval_columns, machine, stage_means  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.evaluation.classification import evaluate_classification, predictions_from_traces  # noqa: E402
from preqrag.core.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.run.pipeline import Pipeline  # noqa: E402

NOTE = ("Quality on the final ranking at document level (ranx); seconds_per_question excludes generation. "
        "A row with reused_cached_outputs reused cached reranker or LLM outputs (run.cache_dir; cache_hits in "
        "the JSON): its seconds are lower than a cold run's (bench/throughput.py is the cold timing). "
        "classifier_accuracy_single / classifier_accuracy_multi: the shipped classifier's accuracy on each "
        "sample (in-sample for dev questions: it was trained on them); its cross-validated accuracy is on the "
        "classifier page (docs/results/classifier.md).")
"""What the file's figures mean (written into it; docs/results/ablation.md shows it)."""

ROWS = {
    "bm25-raw": {"rewriter": {"name": "none"}, "retrieval": {"use_dense": False}, "cross_encoder": {"name": "none"}},
    "dense-raw": {"rewriter": {"name": "none"}, "retrieval": {"use_sparse": False}, "cross_encoder": {"name": "none"}},
    "hybrid-union": {"rewriter": {"name": "none"}, "cross_encoder": {"name": "none"}},
    "hybrid-rerank": {"rewriter": {"name": "none"}},
    "hybrid-rerank-all": {"rewriter": {"name": "none"}, "cross_encoder": {"depth": 200}},
    "rewriting": {"rewriter": {"decompose": False}},
    "preqrag": {},
    "preqrag-rrf": {"fusion": {"name": "rrf"}},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--config", default=None, help="base preqrag.toml (rows override it)")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--sample", type=int, default=None, help="fixed-seed sample size (seed 0)")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--label", default=None, help="label of this corpus/question set in the table")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--cache-dir", default=None, help="run.cache_dir: reuse LLM/query/reranker outputs across rows")
    ap.add_argument("--out", default="docs/bench/ablation.json")
    args = ap.parse_args(argv)

    questions, errors = read_questions(args.questions)
    if errors:
        print(f"{len(errors)} bad question lines skipped", file=sys.stderr)
    if args.sample and args.sample < len(questions):
        questions = random.Random(0).sample(questions, args.sample)
    label = args.label or f"{Path(args.index).name} / {Path(args.questions).name} ({len(questions)} q)"
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {}
    data = {"rows": data} if isinstance(data, list) else data  # a bare list of rows before the note
    rows = data.get("rows", [])
    command = recorded_command("ablation", argv)
    for name in args.rows.split(","):
        overrides = {k: dict(v) for k, v in ROWS[name].items()}
        overrides.setdefault("run", {})["trace_depth"] = 100
        if args.cache_dir:
            overrides["run"]["cache_dir"] = args.cache_dir
        cfg = load_config(args.config, overrides, pipeline="preqrag")  # rows are changes to PreQRAG
        pipeline = Pipeline.from_config(args.index, cfg)
        if not cfg.retrieval.use_sparse or name != "bm25-raw":
            if pipeline.index.dense is None:
                print(f"skip {name}: index has no dense part", file=sys.stderr)
                continue
        traces = []
        t0 = time.perf_counter()
        for start in range(0, len(questions), args.batch_size):
            traces += pipeline.retrieve(questions[start:start + args.batch_size])
        wall = time.perf_counter() - t0
        pred_multi = sum(t.classification.question_type == "multi" for t in traces)
        cls = evaluate_classification(predictions_from_traces(traces), questions)
        row = {"name": name, "label": label, "n_questions": len(questions),
               **final_retrieval_columns(traces, questions),
               "seconds_per_question": round(wall / len(questions), 4),
               "seconds_per_question_by_stage": stage_means([t.seconds for t in traces]),
               "predicted_multi_share": round(pred_multi / len(traces), 3),
               "fallbacks": sum(bool(t.fallbacks) for t in traces),
               "classifier": cfg.classifier.name,
               "classifier_accuracy_single": cls["accuracy_single"],
               "classifier_accuracy_multi": cls["accuracy_multi"],
               "cache_hits": cache_hits(pipeline),
               "config_overrides": ROWS[name]}
        row["reused_cached_outputs"] = reused(row)
        row.update(command=command, machine=machine(),
                   date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if not (r["name"] == name and r.get("label") == label)] + [row]
        atomic_write_text(out, json.dumps({**data, "note": NOTE, "rows": rows}, indent=1))
    return 0


def reused(row: dict) -> bool:
    """Whether a row's reranker or LLM outputs came (partly) from run.cache_dir."""
    return any(v["hits"] for k, v in row.get("cache_hits", {}).items() if k in ("reranker", "llm"))


def cache_hits(pipeline: Pipeline) -> dict:
    """Cache hits/misses of the pipeline's cached components (empty without run.cache_dir)."""
    out = {}
    cross_encoder = next((step.reranker for step in pipeline.rerank_chain
                          if getattr(step, "name", None) == "cross-encoder"), None)
    parts = {"reranker": cross_encoder, "llm": pipeline.llm,
             "embedder": getattr(pipeline.index.dense, "encoder", None)}
    for name, obj in parts.items():
        store = getattr(obj, "store", None)
        if store is not None:
            out[name] = {"hits": store.hits, "misses": store.misses}
    return out


run = main
"""The entry of ``python -m bench ablation`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
