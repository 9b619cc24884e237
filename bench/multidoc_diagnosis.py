"""Where multi-document questions lose a gold document, stage by stage (issue 55, item 2).

For each index (``--index LABEL=DIR``, e.g. the bench corpus and ``corpus_plus``) the ``hybrid`` preset
retrieves (no LLM) the fixed-seed dev sample (seed 0, ``--sample`` 500, first ``--head`` 200, as
bench/presets.py) with every stage's ranking kept whole (``[run] trace_depth`` 400). For each gold
document of each multi-document question (two gold documents) it records which stages hold a passage
of it:

* ``bm25@100`` / ``dense@100``: the BM25 / dense top-100 passages of the question;
* ``either@100``: either of them (what fusion can see);
* ``fused``: the fused list (``union``: every candidate; its head of ``[cross_encoder] depth`` is reranked);
* ``rerank_cut``: the cross-encoder's input, the fused list's first ``[cross_encoder] depth`` (30) passages;
* ``top10``: the first 10 distinct documents of the final (reranked) ranking: multi recall@10;
* ``top3``: the documents of the first ``[generator] context_top_k`` (3) passages, the generator's context.

Each gold document is then counted at the **first stage it is missing from** (``lost at``, from
``either@100`` on: BM25 and dense are alternatives), per
DataMorgana ``answer_type`` (``multi-aspect``, ``comparison``, ``three-doc``, and all). Shares are of gold
documents (two per question). docs/results/multidoc_diagnosis.md shows the JSON.

    python bench/multidoc_diagnosis.py --index corpus=IDX --index corpus_plus=IDX_PLUS \\
        --questions ../shared/liverag-bench/dev.jsonl -o docs/bench/multidoc_diagnosis.json
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections import Counter, defaultdict
from pathlib import Path

from harness import add_dev_sample_args, command, dev_sample, machine

from preqrag.core.config import load_config
from preqrag.core.io import atomic_write_text
from preqrag.run.pipeline import Pipeline
from preqrag.core.records import docs_in_order

STAGES = ("bm25@100", "dense@100", "either@100", "fused", "rerank_cut", "top10", "top3")
LOSS_STAGES = STAGES[2:]
"""The pipeline's sequence, where a gold document can be lost (BM25 and dense are alternatives:
a document in either top 100 reaches fusion)."""


def stage_docs(trace, depth: int, top_k: int) -> dict[str, set[str]]:
    """Stage name → the set of documents present there, for one question's trace."""
    def ids(stage: str) -> list[str]:
        return [pid for r in trace.rankings.get(stage, []) for pid in r.ids]

    sparse, dense, fused, reranked = ids("sparse"), ids("dense"), ids("merged"), ids("final")
    out = {"bm25@100": set(docs_in_order(sparse[:100])), "dense@100": set(docs_in_order(dense[:100])),
           "fused": set(docs_in_order(fused)), "rerank_cut": set(docs_in_order(fused[:depth])),
           "top10": set(docs_in_order(reranked)[:10]), "top3": set(docs_in_order(reranked[:top_k]))}
    out["either@100"] = out["bm25@100"] | out["dense@100"]
    return out


def diagnose(index: str, questions, batch_size: int) -> dict:
    cfg = load_config(None, {"run": {"trace_depth": 400}}, pipeline="hybrid")
    pipeline = Pipeline.from_config(index, cfg)
    pipeline.warm_up()
    multi = [q for q in questions if len(q.extra.get("gold_doc_ids") or []) == 2]
    traces = []
    for start in range(0, len(multi), batch_size):
        traces += pipeline.retrieve(multi[start:start + batch_size])
    present: dict[str, Counter] = defaultdict(Counter)
    lost: dict[str, Counter] = defaultdict(Counter)
    golds: Counter = Counter()
    for q, t in zip(multi, traces):
        kinds = ("all", q.extra.get("answer_type") or "unknown")
        docs = stage_docs(t, cfg.cross_encoder.depth, cfg.generator.context_top_k)
        for g in q.extra["gold_doc_ids"]:
            where = next((s for s in LOSS_STAGES if g not in docs[s]), "kept")
            for k in kinds:
                golds[k] += 1
                lost[k][where] += 1
                for s in STAGES:
                    present[k][s] += g in docs[s]
    rows = []
    for k in sorted(golds, key=lambda k: (k != "all", k)):
        row = {"answer_type": k, "questions": golds[k] // 2, "gold_docs": golds[k]}
        row.update({f"in {s}": round(present[k][s] / golds[k], 3) for s in STAGES})
        row.update({f"lost at {s}": round(lost[k][s] / golds[k], 3) for s in LOSS_STAGES})
        row["kept in top3"] = round(lost[k]["kept"] / golds[k], 3)
        rows.append(row)
    return {"multi_questions": len(multi), "reranker_depth": cfg.cross_encoder.depth,
            "context_top_k": cfg.generator.context_top_k, "rows": rows}


def method(reranker_depth: int) -> str:
    """What the columns mean (written into the JSON; docs/results/multidoc_diagnosis.md shows it)."""
    return ("`in S`: share of the gold documents present at stage S; `lost at S`: share first missing at S, in the "
            "pipeline's order (either@100: in neither retriever's top 100, what fusion can see; then fused, "
            "rerank_cut, top10, top3). Stages: bm25@100 / dense@100 (top-100 passages), fused (the union), "
            f"rerank_cut (the fused list's first {reranker_depth} passages: the cross-encoder's input), top10 (first "
            "10 documents of the final ranking), top3 (the generator's context). Shares are of gold documents (two "
            "per question), per DataMorgana answer_type.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", action="append", required=True, help="LABEL=DIR (repeat: one per corpus)")
    add_dev_sample_args(ap)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("-o", "--out", default="docs/bench/multidoc_diagnosis.json")
    args = ap.parse_args(argv)
    questions, described = dev_sample(args)
    corpora = []
    for spec in args.index:
        label, _, path = spec.partition("=")
        c = {"label": label, **diagnose(path, questions, args.batch_size)}
        print(json.dumps(c, indent=1), flush=True)
        corpora.append(c)
    out = Path(args.out)
    data = {"corpora": corpora, "questions": described,
            "machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command("multidoc_diagnosis", argv),
            "method": method(corpora[0]["reranker_depth"])}
    atomic_write_text(out, json.dumps(data, indent=1) + "\n")
    return 0


run = main
"""The entry of ``python -m bench multidoc_diagnosis`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    raise SystemExit(main())
