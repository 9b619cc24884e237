"""TREC RAG in and out (issue 13, section 2), on files: topics as question files, ``preqrag validate``
on hand-written golden files, sentence splitting. Attribution on real smoke text:
tests/integration/test_trec_attribution.py; ``preqrag export`` of a real run:
tests/e2e/test_trec_export.py.

Golden files (tests/data/trec/) were written by hand from the track's published format
(castorini/ragnarok docs/rag24.md and docs/rag25.md examples; checks of
src/ragnarok/scripts/rag24_validation.py and rag25_validation.py).
"""

import json

from conftest import TESTS, run_cli
from preqrag.core.io import read_questions
from preqrag.trec.validate import detect_format, validate_file

DATA = TESTS / "data" / "trec"


def _cli(*args, **kw):
    return run_cli(*args, **kw)


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
