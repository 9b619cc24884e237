"""TREC RAG out (issue 13, section 2): a real ``preqrag run`` on TREC topics, ``preqrag export`` to
the 2024/2025 answer formats and ``preqrag validate`` on the result."""

import json

import pytest

from conftest import TEST_OVERRIDES, run_cli
from conftest import config_toml as _toml


def _cli(*args, **kw):
    return run_cli(*args, **kw)


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


# ---------------------------------------------------------------- export -> validate round trip
@pytest.fixture(scope="module")
def smoke_run(small_index, small_corpus, tmp_path_factory):
    """A real run on TREC topics: the small corpus's questions as a ``qid<TAB>query`` TSV."""
    d = tmp_path_factory.mktemp("trec_run")
    cfg = d / "preqrag.toml"
    cfg.write_text(_toml(TEST_OVERRIDES))
    topics = d / "topics.tsv"
    topics.write_text("".join(f"{q['id']}\t{q['question']}\n" for q in small_corpus[2][:4]), encoding="utf-8")
    out = d / "answers.jsonl"
    r = _cli("run", topics, "--index", small_index, "-o", out, "--config", cfg)
    assert r.returncode == 0, r.stderr
    assert len(_lines(out)) == 4
    return d, topics, out


def test_export_validate_round_trip(smoke_run, tmp_path):
    d, topics, answers = smoke_run
    traces = {t["id"]: t for t in _lines(d / "answers.traces.jsonl")}
    for fmt, extra in (("trec-rag24", []), ("trec-rag25", ["--team-id", "preqrag-team"])):
        run = tmp_path / f"{fmt}.jsonl"
        r = _cli("export", "--format", fmt, answers, "-o", run, "--run-id", "smoke-run", *extra)
        assert r.returncode == 0, r.stderr
        v = _cli("validate", run, "--topics", topics)
        assert v.returncode == 0, v.stdout + v.stderr
        assert _cli("validate", run, "--format", fmt).returncode == 0
        recs = _lines(run)
        assert len(recs) == 4
        for rec, ans in zip(recs, _lines(answers)):
            assert rec["references"] == traces[ans["id"]]["context_ids"]  # passage ids, in prompt order
            assert " ".join(s["text"] for s in rec["answer"]).split() == ans["answer"].split()
            for s in rec["answer"]:
                assert all(0 <= c < len(rec["references"]) for c in s["citations"])
            if fmt == "trec-rag24":
                assert set(rec) == {"run_id", "topic_id", "topic", "references", "response_length", "answer"}
                assert (rec["run_id"], rec["topic_id"], rec["topic"]) == ("smoke-run", str(ans["id"]), ans["question"])
                assert rec["response_length"] == len(ans["answer"].split())
            else:
                assert set(rec) == {"metadata", "references", "answer"}
                assert rec["metadata"] == {"team_id": "preqrag-team", "run_id": "smoke-run", "type": "automatic",
                                           "narrative_id": str(ans["id"]), "narrative": ans["question"],
                                           "prompt": ans["final_prompt"]}
    # references as document ids (the track's segment ids when each segment is a document)
    run = tmp_path / "docs.jsonl"
    assert _cli("export", "--format", "trec-rag24", answers, "-o", run, "--run-id", "r", "--ids", "document"
                ).returncode == 0
    assert _cli("validate", run).returncode == 0
    for rec, ans in zip(_lines(run), _lines(answers)):
        docs = list(dict.fromkeys(d for p in ans["passages"] for d in p["doc_IDs"]))
        assert rec["references"] == docs
    # 2025 needs a team id
    r = _cli("export", "--format", "trec-rag25", answers, "-o", tmp_path / "x.jsonl", "--run-id", "r")
    assert r.returncode == 2 and "--team-id" in r.stderr


def test_export_keeps_a_citing_generators_citations(smoke_run, tmp_path):
    """A trace with the generator's citations (as CIR and GINGER write them) is exported as is."""
    from preqrag.core.records import Citation, Trace
    from preqrag.trec.export import export_run

    d, _, answers = smoke_run
    work = tmp_path / "answers.jsonl"
    work.write_text(answers.read_text(encoding="utf-8"), encoding="utf-8")
    traces = [Trace.model_validate(t) for t in _lines(d / "answers.traces.jsonl")]
    first = traces[0]
    ctx = first.context_ids
    first.citations = [Citation(sentence="First cited sentence.", passage_ids=[ctx[-1], ctx[0]]),
                       Citation(sentence="Second, citing nothing.", passage_ids=[])]
    (tmp_path / "answers.traces.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in traces))

    asked = []

    class FirstPassage:  # stands in for the cross-encoder: every sentence cites passage 0
        def attribute_many(self, items):
            asked.extend(items)
            return [[[0] for _ in sents] for sents, _ in items]

    summary = export_run(work, tmp_path / "run.jsonl", "trec-rag24", "r", attributor=FirstPassage)
    assert summary.generator_cited == 1 and summary.attributed == 3
    assert len(asked) == 3  # the cited answer was not attributed
    rec = _lines(tmp_path / "run.jsonl")[0]
    assert rec["answer"] == [{"text": "First cited sentence.", "citations": [len(ctx) - 1, 0]},
                             {"text": "Second, citing nothing.", "citations": []}]
    assert rec["response_length"] == 6


def test_export_names_lines_without_trace(smoke_run, tmp_path):
    _, _, answers = smoke_run
    lonely = tmp_path / "answers.jsonl"
    lonely.write_text(answers.read_text(encoding="utf-8") + "{broken\n", encoding="utf-8")
    run = tmp_path / "run.jsonl"
    r = _cli("export", "--format", "trec-rag24", lonely, "-o", run, "--run-id", "r")
    assert r.returncode == 2
    assert f"{lonely}:1: id: no trace for id" in r.stderr and f"{lonely}:5: <line>: invalid JSON" in r.stderr
    assert not run.exists()  # nothing written
