"""TREC RAG in and out (issue 13, section 2): topics as question files, ``preqrag export`` to the
2024/2025 answer formats, ``preqrag validate`` on hand-written golden files, and sentence
attribution on real smoke text.

Golden files (tests/data/trec/) were written by hand from the track's published format
(castorini/ragnarok docs/rag24.md and docs/rag25.md examples; checks of
src/ragnarok/scripts/rag24_validation.py and rag25_validation.py).
"""

import json
from pathlib import Path

import pytest

from conftest import TESTS, TEST_OVERRIDES, run_cli
from conftest import config_toml as _toml
from preqrag.core.io import read_questions
from preqrag.trec.validate import detect_format, validate_file

DATA = TESTS / "data" / "trec"


def _cli(*args, **kw):
    return run_cli(*args, **kw)


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _errors(problems):
    return sorted((p.line, p.field) for p in problems if p.severity == "error")


# ---------------------------------------------------------------- golden files
def test_valid_golden_files_pass():
    fmt, problems = validate_file(DATA / "rag24_valid.jsonl", topics=DATA / "rag24_topics.tsv", msmarco_ids=True)
    assert fmt == "trec-rag24" and problems == []
    fmt, problems = validate_file(DATA / "rag25_valid.jsonl", topics=DATA / "rag25_topics.jsonl", msmarco_ids=True)
    assert fmt == "trec-rag25" and _errors(problems) == []
    # line 2 leaves out the optional metadata fields: warned about, as ragnarok's checker does
    assert sorted((p.line, p.field) for p in problems) == [(2, "metadata.narrative"), (2, "metadata.prompt")]
    fmt, problems = validate_file(DATA / "liverag_valid.jsonl")
    assert fmt == "liverag" and problems == []


def test_invalid_rag24_named_by_line_and_field():
    _, problems = validate_file(DATA / "rag24_invalid.jsonl", topics=DATA / "rag24_topics.tsv", msmarco_ids=True)
    assert _errors(problems) == sorted([
        (1, "response_length"),                          # missing
        (2, "answer[1].citations[0]"),                   # index 3, 3 references
        (3, "<line>"),                                   # invalid JSON
        (4, "run_id"), (4, "topic"),                     # another run id; text of the other topic
        (5, "references[2]"), (5, "answer[0].citations[1]"), (5, "response_length"), (5, "topic_id"),
        (6, "topic_id"), (6, "references"), (6, "references[20]"), (6, "answer"),  # again; 21 refs; 401 words
        (7, "answer[0].citations[0]"),                   # a string citation
    ])
    text = {(p.line, p.field): str(p) for p in problems}
    assert text[(2, "answer[1].citations[0]")].startswith(f"{DATA / 'rag24_invalid.jsonl'}:2: answer[1].citations[0]: ")
    assert "out of range" in text[(2, "answer[1].citations[0]")]
    assert "12, but the answer has 36 words" in text[(5, "response_length")]
    assert "at most 20" in text[(6, "references")] and "at most 400" in text[(6, "answer")]
    # without --msmarco-ids a non-MS MARCO segment id is fine (preqrag indexes any corpus)
    _, problems = validate_file(DATA / "rag24_invalid.jsonl")
    assert (6, "references[20]") not in _errors(problems)


def test_invalid_rag25_and_liverag_named_by_line_and_field():
    _, problems = validate_file(DATA / "rag25_invalid.jsonl", topics=DATA / "rag25_topics.jsonl")
    assert _errors(problems) == sorted([
        (1, "metadata.team_id"), (1, "metadata.type"),
        (2, "answer[1].citations[0]"),
        (3, "metadata.run_id"), (3, "answer[0].citations[0]"),
        (4, "answer"),
        (5, "<line>"),
    ])
    _, problems = validate_file(DATA / "liverag_invalid.jsonl")
    assert _errors(problems) == [(2, "passages[0].doc_IDs"), (3, "trace"), (4, "id"), (5, "answer")]


def test_validate_cli_exit_codes_and_detection():
    assert detect_format(DATA / "rag24_valid.jsonl") == "trec-rag24"
    assert detect_format(DATA / "rag25_valid.jsonl") == "trec-rag25"
    assert detect_format(DATA / "liverag_valid.jsonl") == "liverag"
    for name in ("rag24_valid", "rag25_valid", "liverag_valid"):
        r = _cli("validate", DATA / f"{name}.jsonl")
        assert r.returncode == 0, r.stdout + r.stderr
    r = _cli("validate", DATA / "rag24_invalid.jsonl", "--topics", DATA / "rag24_topics.tsv")
    assert r.returncode == 1
    assert f"{DATA / 'rag24_invalid.jsonl'}:2: answer[1].citations[0]: index 3 out of range" in r.stdout
    # a 2024 file checked as 2025 fails on the missing metadata, naming the field
    r = _cli("validate", DATA / "rag24_valid.jsonl", "--format", "trec-rag25")
    assert r.returncode == 1 and f"{DATA / 'rag24_valid.jsonl'}:1: metadata: missing" in r.stdout
    r = _cli("validate", DATA / "rag24_valid.jsonl", "--format", "bogus")
    assert r.returncode == 2


# ---------------------------------------------------------------- topics as questions
def test_trec_topics_read_as_questions(tmp_path):
    qs, errors = read_questions(DATA / "rag24_topics.tsv")
    assert errors == []
    assert [(q.id, q.question) for q in qs] == [
        ("2024-145979", "what is vicarious trauma and how can it be coped with?"),
        ("2024-213817", "how does the us court system handle class action lawsuits")]
    # content detection without the extension; bad lines named by line and field
    f = tmp_path / "topics"
    f.write_text("2024-1\tfirst query\n2024-2\t \nno tab here\n2024-1\tagain\n2024-3\ta\tb\n", encoding="utf-8")
    qs, errors = read_questions(f)
    assert [q.id for q in qs] == ["2024-1"]
    assert [(e.line, e.field) for e in errors] == [(2, "query"), (3, "<line>"), (4, "qid"), (5, "<line>")]
    assert str(errors[0]) == f"{f}:2: query: empty"

    # ragnarok's request format (castorini/ragnarok src/ragnarok/data.py: Request)
    req = tmp_path / "requests.jsonl"
    req.write_text("\n".join([
        json.dumps({"query": {"qid": 429, "text": "how do cafeteria-style plans increase costs for employers?"},
                    "candidates": [{"docid": "msmarco_v2.1_doc_54_319914167#4_733739871", "score": 18.29,
                                    "doc": {"segment": "The contributions are placed into an account ..."}}]}),
        json.dumps({"query": "What is information retrieval?", "candidates": []}),
        json.dumps({"query": {"text": "no qid"}}),
        json.dumps({"query": {"qid": "q2", "text": ""}}),
    ]) + "\n", encoding="utf-8")
    qs, errors = read_questions(req)
    assert [(q.id, q.question) for q in qs] == [(429, "how do cafeteria-style plans increase costs for employers?")]
    assert qs[0].extra["candidates"][0]["docid"] == "msmarco_v2.1_doc_54_319914167#4_733739871"
    assert [(e.line, e.field) for e in errors] == [(2, "query"), (3, "query.qid"), (4, "query.text")]

    # TREC RAG 2025 topics: {"id", "narrative"}
    qs, errors = read_questions(DATA / "rag25_topics.jsonl")
    assert errors == [] and [q.id for q in qs] == ["1", "2"]
    assert qs[1].question.startswith("I'm seeking to understand the causes of climate change")


# ---------------------------------------------------------------- attribution
def test_sentence_split_keeps_abbreviations_and_decimals():
    from preqrag.components.citations import split_sentences

    assert split_sentences("") == []
    assert split_sentences("Use e.g. a 3.5 mm jack in the U.S. market. It works! Does it?") == [
        "Use e.g. a 3.5 mm jack in the U.S. market.", "It works!", "Does it?"]


def test_attribution_on_real_smoke_text(small_index, small_corpus):
    """Reference answers of real smoke questions, attributed to the passages of their gold
    documents and of unrelated documents: citations go to gold passages."""
    import pyarrow.parquet as pq

    from preqrag.components.citations import load_attributor, split_sentences

    by_doc: dict[str, list[tuple[str, str]]] = {}
    for row in pq.read_table(Path(small_index) / "passages.parquet").to_pylist():
        by_doc.setdefault(row["doc_id"], []).append((row["id"], row["text"]))
    questions = [q for q in small_corpus[2] if q["n_gold"] == 1]
    gold_all = {g for q in small_corpus[2] for g in q["gold_doc_ids"]}
    others = [d for d in by_doc if d not in gold_all][:2]  # distractors: two unrelated documents
    attributor = load_attributor()
    items, labels = [], []
    for q in questions:
        cands = [c for d in [*q["gold_doc_ids"], *others] for c in by_doc[d]]
        items.append((split_sentences(q["answer"]), [t for _, t in cands]))
        labels.append([pid.rsplit("#", 1)[0] in q["gold_doc_ids"] for pid, _ in cands])
    cited = attributor.attribute_many(items)
    flat = [labels[i][j] for i, per_sent in enumerate(cited) for cs in per_sent for j in cs]
    assert flat, "no sentence was attributed"
    assert sum(flat) / len(flat) >= 0.8  # precision against the gold document
    assert sum(any(labels[i][j] for cs in per_sent for j in cs) for i, per_sent in enumerate(cited)) >= len(questions) - 1


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
