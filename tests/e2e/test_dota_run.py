"""The ``dota`` preset end to end: ``preqrag run`` with ``pipeline = "dota"`` and the bundled models."""

from __future__ import annotations

import json

import numpy as np

from conftest import TEST_OVERRIDES, config_toml, run_cli
from preqrag.core.config import load_config
from preqrag.systems.dota.topics import FILE, TOPIC_NAMES
from preqrag.index.embedded import Index
from preqrag.core.records import LiveRAGAnswer, Trace


def test_dota_preset_end_to_end(small_index, small_corpus, tmp_path):
    """``preqrag run`` with ``pipeline = "dota"`` and the bundled models: schema-valid LiveRAG
    answers, traces with every slot (routing may fall back with a 135M LLM: recorded)."""
    questions = small_corpus[2][3:4]  # a multi-document question (DoTA plans every question alike)
    qpath = tmp_path / "q.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    cfg = tmp_path / "dota.toml"
    cfg.write_text(config_toml({
        **TEST_OVERRIDES, "pipeline": "dota", "cross_encoder": {"depth": 20, "max_length": 128}, "generator": {"max_new_tokens": 24},
        "dota": {"route_max_new_tokens": 48, "rewrite_max_new_tokens": 48, "context_tokens": 600}}),
        encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", str(qpath), "--index", str(small_index),
                        "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [LiveRAGAnswer.model_validate_json(line) for line in out.read_text().splitlines()]
    traces = {str(t.id): t for t in (Trace.model_validate_json(line) for line in
                                     out.with_name("answers.traces.jsonl").read_text().splitlines())}
    assert len(answers) == 1 and len(traces) == 1
    with np.load(small_index / FILE) as z:
        topics, part_of, part_names = z["labels"], z["parts"], [str(n) for n in z["part_names"]]
    ids = Index.open(small_index, load_config(cfg)).passage_ids
    row = {pid: i for i, pid in enumerate(ids)}
    assert len(topics) == len(ids)
    for a in answers:
        t = traces[str(a.id)]
        assert a.final_prompt.startswith("You are a helpful assistant.\n\nContext:\n")
        assert a.final_prompt.endswith(f"\n\nQuestion:\n{a.question}")
        assert 1 <= len(a.passages) <= 10 and len(a.answer.split()) <= 300
        assert set(t.rankings) == {"sparse", "dense", "merged", "pruned", "reranked", "final"}
        assert all(len(r) <= 100 for r in t.rankings["dense"])
        assert all(len(r) <= 20 for r in t.rankings["pruned"] + t.rankings["reranked"])
        assert t.context_ids == t.rankings["final"][0].ids[:10]
        assert set(t.seconds) >= {"classify", "rewrite", "sparse", "dense", "fusion", "bm25-prune", "rerank",
                                  "generate"}
        assert t.plan.rewriter == "dota" and len(t.plan.sub_queries) == 1
        assert all(f.split(":")[0].split(" vote")[0] in {"rewrite", "route", "classify", "dense", "generate"} for f in t.fallbacks)
        # the votes are constrained to the 24 names: they parse (no 'no valid vote' fallback)
        assert not [f for f in t.fallbacks if "unparsable" in f or "no valid vote" in f], t.fallbacks
        parts = t.plan.sub_queries[0].filters["namespace"]
        routing = t.plan.routing
        assert parts and routing is not None and routing.namespaces == parts
        assert routing.voted and set(routing.voted) <= set(TOPIC_NAMES)  # the votes are kept in the trace
        assert {p.rsplit(" #", 1)[0] for p in parts} <= set(TOPIC_NAMES)
        sizes = np.bincount(part_of, minlength=len(part_names)) / len(part_of)
        assert 0 < routing.fraction <= max(0.15, sizes.max()) + 1e-6  # route_budget, or the one best part
        unfiltered = [f for f in t.fallbacks if f.startswith("dense: no passage matches filters")]
        if not unfiltered:  # the BM25 and dense candidates come from the routed parts only
            allowed = {part_names.index(n) for n in parts}
            assert all(int(part_of[row[pid]]) in allowed
                       for key in ("sparse", "dense") for pid in t.rankings[key][0].ids)
