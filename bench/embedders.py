"""Compare the bundled embedders: indexing throughput and dense-retrieval quality.

For each embedder: index a corpus (timing the dense-encoding phase → passages/s and
tokens/s), then run dense-only retrieval on the raw questions and report document-level
hit@10 (single-gold) and recall@10 (multi-gold). Writes docs/bench/embedders.json
(docs/results/embedders.md shows it).

Usage: python bench/embedders.py --corpus smoke_corpus.jsonl.gz --questions smoke.jsonl [--workdir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

from harness import command

from preqrag.core.config import load_config
from preqrag.evaluation import evaluate_retrieval
from preqrag.index.embedded import build_index
from preqrag.core.io import atomic_write_text, read_questions
from preqrag.run.pipeline import Pipeline

EMBEDDERS = ["sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default="docs/bench/embedders.json")
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="preqrag-emb-"))
    questions, _ = read_questions(args.questions)
    rows = []
    for name in EMBEDDERS:
        cfg = load_config(None, {"embedder": {"name": name}, "rewriter": {"name": "none"},
                                 "retrieval": {"use_sparse": False}, "cross_encoder": {"name": "none"},
                                 "run": {"trace_depth": 100}})
        idx = work / name.replace("/", "__")
        shutil.rmtree(idx, ignore_errors=True)
        manifest = build_index(args.corpus, idx, cfg)
        pipeline = Pipeline.from_config(idx, cfg)
        texts = [p.text for p in pipeline.index.passages.values()]
        tokens = sum(pipeline.index.encoder.count_tokens(t) for t in texts)
        traces = []
        for start in range(0, len(questions), 16):
            traces += pipeline.retrieve(questions[start:start + 16])
        block = evaluate_retrieval(traces, questions, stages=["final"])["metrics"]["final"]["breakdown"]["all"]["all"]
        enc_s = manifest["seconds"]["dense"]
        row = {"embedder": name, "max_tokens": manifest["chunking"]["max_tokens"],
               "n_passages": manifest["n_passages"], "avg_tokens_per_passage": round(tokens / len(texts), 1),
               "encode_seconds": enc_s, "passages_per_second": round(manifest["n_passages"] / enc_s, 2),
               "tokens_per_second": round(tokens / enc_s, 1),
               "dense_single_hit@10": block["single"].get("hit@10"),
               "dense_single_mrr@10": block["single"].get("mrr@10"),
               "dense_multi_recall@10": block["multi"].get("recall@10"),
               "query_seconds_per_question": round(sum(t.seconds.get("dense", 0) for t in traces) / len(traces), 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    result = {"corpus": args.corpus, "questions": args.questions, "n_questions": len(questions),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores", "date": datetime.date.today().isoformat(),
              "command": command("embedders", argv, paths=False), "rows": rows}
    out = Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=1))
    return 0


run = main
"""The entry of ``python -m bench embedders`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
