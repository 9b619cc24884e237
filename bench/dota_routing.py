"""DoTA-RAG namespace routing: how much of the index a routed question searches, and what it costs
in recall (DoTA-RAG §2.2: "shrinking the average search space by 92%"). Written to
docs/bench/dota_routing.json (docs/results/dota_routing.md shows it).

For each question: the router's namespaces, by ``--router``:

* ``dota``: the preset's rewriter (typo-fixing rewrite, 4 votes at temperature 0.6 over
  WebOrganizer's 24 topics), then the parts of the topics nearest the question, its BM25 top
  passages' parts and the voted topics' parts, within ``[dota] route_budget`` of the passages
  (:class:`preqrag.systems.dota.RoutedDotaRewriter`);
* ``votes``: the paper's choice alone: the 2 most voted topics, whole (§2.2);
* ``parts``: the parts without LLM votes (no LLM call: similarity and BM25 only);
* ``embedding``: the 2 topics whose descriptions are most similar to the question's embedding
  (an LLM-free stand-in for the votes);

then

* fraction searched: passages in the routed namespaces / all passages (1.0 when no vote parsed:
  the whole index is searched);
* gold in namespaces: share of gold documents whose topic is among the routed namespaces (the
  recall routing can lose before retrieval starts);
* dense hit@100: a gold document among the routed dense top-100, against unrouted;
* dense search seconds (query embeddings precomputed; FAISS only), routed vs unrouted.

On an index that holds none of the questions' documents (bench/scale.py's synthetic corpus, for
the search time at scale) the gold columns are null and ``gold_in_index`` is false.

Usage:
  python bench/dota_routing.py --index IDX --questions smoke.jsonl [--router dota|embedding]
         [--limit N] [--config CFG] [--out docs/bench/dota_routing.json]
Rows are merged into the output by (router, index, questions).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import numpy as np

from harness import command, machine, merge_rows, read_rows, write_json  # noqa: E402

NOTE = ("fraction_searched_mean: passages in the routed namespaces / all passages (1.0 when no vote parsed: the "
        "whole index is searched); search_space_reduction: 1 - that; gold_in_namespaces: share of gold documents "
        "whose namespace was routed (empty where the index holds no gold document, a synthetic corpus); "
        "dense_hit100_routed / _unrouted: a gold document in the dense top 100 searched within the routed "
        "namespaces / the whole index; the module docstring of bench/dota_routing.py defines every column.")
"""What the columns mean (written into the JSON; docs/results/dota_routing.md shows it)."""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--index", required=True, type=Path)
    p.add_argument("--questions", required=True, type=Path)
    p.add_argument("--router", choices=["dota", "votes", "parts", "embedding"], default="dota")
    p.add_argument("--sample", type=int, default=None, help="fixed-seed sample (seed 0, as bench/presets.py)")
    p.add_argument("--head", type=int, default=None, help="keep the first N questions of the sample")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--index-label", default="IDX", help="How the row names the index (no machine paths).")
    p.add_argument("--config", type=Path, default=None, help="Overrides on top of the dota preset.")
    p.add_argument("--repeat", type=int, default=5, help="Timing repetitions of the dense searches.")
    p.add_argument("--out", type=Path, default=Path("docs/bench/dota_routing.json"))
    args = p.parse_args(argv)

    from preqrag.core.config import load_config
    from preqrag.systems.dota import load_topics
    from preqrag.systems.dota.topics import FACET, PART_FACET, TOPIC_NAMES, topic_text
    from preqrag.index.embedded import Index
    from preqrag.models.llm import load_llm

    cfg = load_config(args.config, pipeline="dota")
    index = Index.open(args.index, cfg)
    t0 = time.perf_counter()
    topics = load_topics(index, parts_per_topic=cfg.dota.route_parts)
    topic_seconds = time.perf_counter() - t0
    index.dense.add_facet(FACET, topics.names, topics.labels)
    index.dense.add_facet(PART_FACET, topics.part_names, topics.parts)
    qs = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.sample and args.sample < len(qs):
        import random

        qs = random.Random(0).sample(qs, args.sample)
    qs = qs[:args.head] if args.head else qs
    qs = qs[:args.limit] if args.limit else qs
    texts = [q["question"] for q in qs]

    t0 = time.perf_counter()
    fallbacks = 0
    votes_valid = votes_total = None
    if args.router in ("dota", "votes", "parts"):
        from preqrag.systems.dota import DotaRewriter, RoutedDotaRewriter

        dcfg = cfg.dota.model_copy(update={"route_votes": 0}) if args.router == "parts" else cfg.dota
        llm = load_llm(cfg.llm, cache_dir=cfg.run.cache_dir)
        rewriter = (DotaRewriter(llm, dcfg) if args.router == "votes"
                    else RoutedDotaRewriter(llm, dcfg, index, route=True))
        plans = []
        if args.router == "parts":  # no LLM call: the question itself, routed by similarity and BM25
            from preqrag.core.records import QueryPlan, SubQuery

            plans = rewriter.route_plans([QueryPlan(question_type="single", rewriter="dota",
                                                    sub_queries=[SubQuery(text=t, sparse=t, dense=t)]) for t in texts])
        else:
            for i in range(0, len(texts), cfg.run.batch_size):
                batch = texts[i:i + cfg.run.batch_size]
                plans += rewriter.plan(batch, ["single"] * len(batch))
        filters = [p.sub_queries[0].filters for p in plans]
        queries = [p.sub_queries[0].dense for p in plans]
        fallbacks = sum(any(f.startswith("route: no valid vote") for f in p.fallbacks) for p in plans)
        if dcfg.route_votes:
            votes_total = dcfg.route_votes * len(plans)
            votes_valid = votes_total - sum(f.startswith("route vote") for p in plans for f in p.fallbacks)
    else:
        tv = index.encoder.encode([topic_text(n) for n in TOPIC_NAMES], is_query=True)
        qv = index.encoder.encode(texts, is_query=True)
        top = np.argsort(-(qv @ tv.T), axis=1)[:, :cfg.dota.route_top_n]
        filters = [{FACET: [TOPIC_NAMES[j] for j in row]} for row in top]
        queries = texts
    route_seconds = (time.perf_counter() - t0) / len(texts)

    masks = [index.dense.filter_mask(f) if f else None for f in filters]
    fraction = [float(m.mean()) if m is not None else 1.0 for m in masks]
    rows_of_doc: dict[str, list[int]] = {}
    for i, pid in enumerate(index.passage_ids):
        rows_of_doc.setdefault(index.passages[pid].doc_id, []).append(i)
    inside = [[m is None or bool(m[rows_of_doc.get(g, [])].any()) for g in q["gold_doc_ids"]]
              for q, m in zip(qs, masks)]  # per question: is each gold document in the searched rows
    gold_in = [np.mean(x) for x in inside]
    all_gold_in = [all(x) for x in inside]
    # an index without these questions' documents (bench/scale.py's synthetic corpus) times routing only
    has_gold = any(g in rows_of_doc for q in qs for g in q["gold_doc_ids"])

    vectors = index.encoder.encode(queries, is_query=True)

    def timed(fn):
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t)
        return out, best / len(queries)

    def routed_search():
        out = []
        for v, m in zip(vectors, masks):
            out += index.dense.search_vectors(v[None, :], 100, m)
        return out

    def full_search():
        return [r for v in vectors for r in index.dense.search_vectors(v[None, :], 100)]

    routed_rank, routed_s = timed(routed_search)
    full_rank, full_s = timed(full_search)

    def hit(rankings):
        if not has_gold:
            return None
        return float(np.mean([bool({index.passages[pid].doc_id for pid in r.ids} & set(q["gold_doc_ids"]))
                              for q, r in zip(qs, rankings)]))

    row = {
        "router": args.router, "index": args.index_label, "questions": str(args.questions), "n_questions": len(qs),
        "n_passages": len(index.passage_ids),
        "llm": cfg.llm.model if args.router in ("dota", "votes") else None, "embedder": cfg.embedder.name,
        "route_budget": cfg.dota.route_budget if args.router in ("dota", "parts") else None,
        "route_parts": len(topics.part_names), "route_bm25_depth": cfg.dota.route_bm25_depth,
        "fraction_searched_mean": round(float(np.mean(fraction)), 4),
        "search_space_reduction": round(1 - float(np.mean(fraction)), 4),
        "no_valid_vote": fallbacks, "votes_valid": votes_valid, "votes_total": votes_total,
        "gold_in_namespaces": round(float(np.mean(gold_in)), 4) if has_gold else None,
        "all_gold_in_namespaces": round(float(np.mean(all_gold_in)), 4) if has_gold else None,
        "dense_hit100_routed": _round(hit(routed_rank)), "dense_hit100_unrouted": _round(hit(full_rank)),
        "gold_in_index": has_gold,
        "dense_search_ms_routed": round(routed_s * 1000, 3), "dense_search_ms_unrouted": round(full_s * 1000, 3),
        "route_seconds_per_question": round(route_seconds, 3), "topic_assignment_seconds": round(topic_seconds, 2),
        "passages_per_topic": topics.counts(),
        "command": command("dota_routing", argv),
        "date": datetime.date.today().isoformat(), "machine": machine(),
    }
    data = read_rows(args.out)
    data["rows"] = merge_rows(data["rows"], [row], key=("router", "index", "questions", "n_questions", "llm", "route_budget"))
    data["note"] = NOTE
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, data, indent=2)
    print(json.dumps({k: v for k, v in row.items() if k not in ("passages_per_topic", "machine")}, indent=2))
    return 0


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


run = main
"""The entry of ``python -m bench dota_routing`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    main()
