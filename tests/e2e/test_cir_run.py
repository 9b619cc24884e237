"""The ``cir`` preset end to end: ``preqrag run`` with ``pipeline = "cir"`` and the bundled models."""

from __future__ import annotations

import json

from conftest import TEST_OVERRIDES, config_toml, run_cli
from preqrag.systems.cir.generator import EXPERTISE_PROMPTS
from preqrag.core.records import LiveRAGAnswer, Trace


# ---------------------------------------------------------------- end to end
def test_cir_preset_end_to_end_cli(small_index, small_corpus, tmp_path):
    """`preqrag run` with pipeline = "cir", the bundled models (SmolLM2-135M): schema-valid
    LiveRAG answers and traces with every slot, including the MMR step."""
    questions = [small_corpus[2][0], small_corpus[2][4]]  # single/novice and multi/expert (user_expertise)
    qpath = tmp_path / "q.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    cfg = tmp_path / "cir.toml"
    # a short context keeps the 135M LLM's prompt small (k = 20 passages of 512 tokens take minutes on 2 cores)
    small = {"max_new_tokens": 48, "context_top_k": 4, "max_passage_tokens": 96}
    cfg.write_text(config_toml({**TEST_OVERRIDES, "pipeline": "cir", "generator": small}), encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", str(qpath), "--index", str(small_index),
                        "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [LiveRAGAnswer.model_validate_json(line) for line in out.read_text().splitlines()]
    assert len(answers) == 2
    traces = [Trace.model_validate_json(line) for line in
              out.with_name("answers.traces.jsonl").read_text().splitlines()]
    assert len(traces) == 2
    for a, t in zip(sorted(answers, key=lambda x: str(x.id)), sorted(traces, key=lambda x: str(x.id))):
        assert a.final_prompt.startswith("Do retrieval augmented generation with the following texts\n")
        assert len(a.answer.split()) <= 300
        assert set(t.rankings) >= {"sparse", "dense", "merged", "reranked", "mmr", "final"}
        assert all(len(r) <= 8 for r in t.rankings["mmr"])  # the cross-encoder's depth-8 head
        assert sorted(t.rankings["mmr"][0].ids) == sorted(t.rankings["reranked"][0].ids)
        assert 1 <= len(t.context_ids) <= 4 and len(a.passages) == len(t.context_ids)
        assert t.citations is not None  # a citing generator: [] after a fallback
        assert all(set(c.passage_ids) <= set(t.context_ids) for c in t.citations)
        assert {"mmr", "rerank", "generate"} <= set(t.seconds)
        # the reply is constrained by the answer schema: it parses, ids are 1..k (none removed)
        assert not [f for f in t.fallbacks if "unparsable" in f], t.fallbacks
        assert t.citations and all(c.sentence.strip() for c in t.citations)
        expertise = {q["id"]: q["user_expertise"] for q in questions}[t.id]
        assert EXPERTISE_PROMPTS["P.2" if expertise == "expert" else "P.1"] in a.final_prompt
