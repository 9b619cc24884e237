"""GINGER's generation record in the trace (``Trace.generation``): a ``preqrag run`` of the ginger
preset on real smoke questions writes its nuggets, ranked clusters, summaries and fluency pass to
``answers.traces.jsonl``; traces without the field (other generators, older runs) load and dump as
before."""

from __future__ import annotations

import json

from conftest import TEST_OVERRIDES
from preqrag.core.config import load_config
from preqrag.systems.ginger.generator import FLUENCY_SYSTEM, SUMMARY_SYSTEM
from preqrag.core.records import Trace
from fakes import FakeLLMBase


class ScriptedLLM(FakeLLMBase):
    """Summaries echo their cluster, the fluency pass echoes the response; any other call (the
    GINGER rewriter's, nugget detection) gets an empty reply, so those steps take their recorded
    fallbacks (nuggets: each passage's sentence closest to the question)."""

    name = "scripted"
    context_window = 4096
    handlers = {SUMMARY_SYSTEM: lambda u: u.rstrip("."), FLUENCY_SYSTEM: lambda u: u.split(" Response: ", 1)[1]}

    def chat(self, messages, *, max_tokens, temperature=0.0, **options):
        return self.chat_many([messages], max_tokens=max_tokens)[0]

    def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
        out = []
        for msgs in requests:
            system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
            out.append(self.handlers.get(system, lambda u: "")(msgs[-1]["content"]))
        return out


def test_ginger_run_writes_generation_details_to_the_trace(small_index, small_corpus, tmp_path):
    from preqrag.index.embedded import Index
    from preqrag.run.pipeline import Pipeline
    from preqrag.run.runner import run_questions

    cfg = load_config(None, {**TEST_OVERRIDES, "generator": {"context_top_k": 3},
                             "ginger": {"pairwise_top_k": 4, "max_sentences": 3}}, pipeline="ginger")
    p = Pipeline.from_config(small_index, cfg, llm=ScriptedLLM())
    qpath = tmp_path / "q.jsonl"
    qs = [small_corpus[2][0], small_corpus[2][3]]  # a single- and a multi-document question
    qpath.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    summary = run_questions(p, qpath, out)
    assert summary.answered == 2, summary
    index = Index.open(small_index, cfg)
    answers = {json.loads(line)["id"]: json.loads(line) for line in out.read_text().splitlines()}
    lines = out.with_name("answers.traces.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        raw = json.loads(line)
        assert set(raw["generation"]) == {"generator", "nuggets", "clusters", "cluster_ranking", "summaries",
                                          "fluency"}
        t = Trace.model_validate(raw)
        g = t.generation
        assert g.generator == "ginger" and g.nuggets
        for n in g.nuggets:  # verbatim spans of the context passages, by 1-based number
            assert index.text(t.context_ids[n.passage - 1])[n.start:n.end] == n.text
        # every nugget in exactly one cluster; clusters name their nuggets' passages
        assert sorted(i for c in g.clusters for i in c.nuggets) == list(range(len(g.nuggets)))
        for c in g.clusters:
            assert c.passages == sorted({g.nuggets[i].passage for i in c.nuggets})
            assert all(g.nuggets[i].text in c.text for i in c.nuggets)
        if len(g.clusters) > 1:  # ranked pairwise (sym-sum scores, best first)
            assert g.cluster_ranking == "pairwise"
            assert [c.score for c in g.clusters] == sorted((c.score for c in g.clusters), reverse=True)
        # one summary per top cluster, in rank order
        assert [s.cluster for s in g.summaries] == list(range(min(3, len(g.clusters))))
        # the fluency pass: the summaries before, the LLM's rephrasing after
        assert g.fluency is not None and g.fluency.before.startswith(g.summaries[0].text.split()[0])
        assert g.fluency.after is not None
        answer = answers[t.id]["answer"]
        if g.fluency.used:
            assert g.fluency.fallback is None and answer == " ".join(c.sentence for c in t.citations)
        else:
            assert any(f.startswith("generate: fluency: ") for f in t.fallbacks)


def test_traces_without_generation_details_load_and_dump_unchanged():
    old = {"id": 1, "classification": {"question_type": "single", "classifier": "rules"},
           "plan": {"question_type": "single", "rewriter": "none",
                    "sub_queries": [{"text": "q", "sparse": "q", "dense": "q"}]},
           "context_ids": ["d#0"], "truncations": ["generate: passage 1: 600 -> 512 tokens"]}
    t = Trace.model_validate_json(json.dumps(old))
    assert t.generation is None and t.candidates is None
    dumped = json.loads(t.model_dump_json())
    assert "generation" not in dumped and "candidates" not in dumped
    assert Trace.model_validate(dumped) == t
