"""Ablation ladder of PreQRAG retrieval (issue: evaluation), written to docs/bench/ablation.json + .md.

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
indexes/question sets can share one table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

from _common import describe, final_retrieval_columns, machine, md_table, stage_means  # noqa: E402

from preqrag.config import load_config  # noqa: E402
from preqrag.evaluation.classification import evaluate_classification, predictions_from_traces  # noqa: E402
from preqrag.io import atomic_write_text, read_questions  # noqa: E402
from preqrag.pipeline import Pipeline  # noqa: E402

ROWS = {
    "bm25-raw": {"rewriter": {"name": "none"}, "retrieval": {"use_dense": False}, "reranker": {"name": "none"}},
    "dense-raw": {"rewriter": {"name": "none"}, "retrieval": {"use_sparse": False}, "reranker": {"name": "none"}},
    "hybrid-union": {"rewriter": {"name": "none"}, "reranker": {"name": "none"}},
    "hybrid-rerank": {"rewriter": {"name": "none"}},
    "hybrid-rerank-all": {"rewriter": {"name": "none"}, "reranker": {"depth": 200}},
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
    rows = json.loads(out.read_text()) if out.exists() else []
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
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if not (r["name"] == name and r.get("label") == label)] + [row]
        atomic_write_text(out, json.dumps(rows, indent=1))
    write_markdown(rows, out.with_suffix(".md"), " ".join(sys.argv))
    return 0


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


def classifier_cv_line() -> str:
    """The classifier's cross-validated accuracy from docs/bench/classifier.json, if present."""
    p = Path(__file__).parent.parent / "docs" / "bench" / "classifier.json"
    if not p.exists():
        return ""
    d = json.loads(p.read_text())
    chosen = d.get("chosen")
    cand = d.get("candidates", {}).get(chosen)
    rules = d.get("candidates", {}).get("rules (published)", {})
    if not cand:
        return ""
    return (f"Question classifier (default `learned`, {chosen}), 5-fold CV on all dev questions "
            f"(docs/bench/classifier.md): single {cand['single']:.3f}, multi {cand['multi']:.3f}; "
            f"the published rules: {rules.get('single', float('nan')):.3f} / {rules.get('multi', float('nan')):.3f}. The per-row columns below are the shipped classifier's "
            f"accuracy on each sample (in-sample for dev: it was trained on dev).")


def write_markdown(rows: list[dict], path: Path, command: str) -> None:
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    star = lambda r: "*" if any(v["hits"] for k, v in r.get("cache_hits", {}).items()  # noqa: E731
                                if k in ("reranker", "llm")) else ""
    lines = ["# Retrieval ablation ladder", "",
             f"Machine: {describe(machine())}. "
             f"Date: {datetime.date.today().isoformat()}.", "",
             f"Command{'s' if chr(10) in command else ' (last)'}: {command}", "",
             "Quality on the final ranking at document level; seconds/question exclude generation "
             "(rows marked * reused cached model outputs, so their seconds are lower than a cold run's).", "",
             classifier_cv_line(), ""]
    cols = ["row", "single hit@1", "single hit@10", "single MRR@10", "multi recall@10", "multi all@10",
            "classifier acc. single / multi", "s/question"]
    for label in dict.fromkeys(r["label"] for r in rows):
        table = [{"row": r["name"], "single hit@1": fmt(r["single_hit@1"]), "single hit@10": fmt(r["single_hit@10"]),
                  "single MRR@10": fmt(r["single_mrr@10"]), "multi recall@10": fmt(r["multi_recall@10"]),
                  "multi all@10": fmt(r.get("multi_all@10")),
                  "classifier acc. single / multi": f"{fmt(r.get('classifier_accuracy_single'))} / "
                                                    f"{fmt(r.get('classifier_accuracy_multi'))}",
                  "s/question": f"{r['seconds_per_question']:.3f}{star(r)}"} for r in rows if r["label"] == label]
        lines += [f"## {label}", "", *md_table(table, cols), ""]
    atomic_write_text(path, "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
