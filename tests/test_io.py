"""Input validation and crash-safe writing."""

import json

from preqrag.io import append_jsonl, atomic_write_text, iter_corpus, read_jsonl_tolerant, read_questions


def test_bad_question_lines_are_named_and_others_kept(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text("\n".join([
        json.dumps({"id": "a", "question": "What is SCADA?"}),
        "{not json",
        json.dumps({"question": "no id here"}),
        json.dumps({"id": "c", "question": "   "}),
        json.dumps({"id": "a", "question": "duplicate id"}),
        json.dumps(["not", "an", "object"]),
        "",
        json.dumps({"id": 7, "question": "Integer ids are kept as integers?", "answer": "yes"}),
    ]) + "\n")
    questions, errors = read_questions(p)
    assert [q.id for q in questions] == ["a", 7]
    assert questions[1].extra == {"answer": "yes"}
    assert [(e.line, e.field) for e in errors] == [(2, "<line>"), (3, "id"), (4, "question"), (5, "id"), (6, "<line>")]
    assert str(errors[0]).startswith(f"{p}:2: <line>: invalid JSON")


def test_torn_last_line_is_dropped_and_repaired(tmp_path):
    p = tmp_path / "a.jsonl"
    append_jsonl(p, [{"id": 1}, {"id": 2}])
    with open(p, "a") as fh:
        fh.write('{"id": 3, "ans')  # a write cut by SIGKILL
    assert [r["id"] for r in read_jsonl_tolerant(p)] == [1, 2]
    read_jsonl_tolerant(p, repair=True)
    append_jsonl(p, [{"id": 3}])
    assert [json.loads(line)["id"] for line in p.read_text().splitlines()] == [1, 2, 3]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    p = tmp_path / "sub" / "x.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [f.name for f in p.parent.iterdir()] == ["x.txt"]
    assert p.stat().st_mode & 0o044 == 0o044  # readable by others, like a normally created file


def test_corpus_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"id": "d1", "text": "fine", "url": "u"}) + "\n" + json.dumps({"id": "d2"}) + "\n")
    it = iter_corpus(p)
    assert next(it) == ("d1", "fine", {"url": "u"})
    try:
        next(it)
        raise AssertionError("expected ValueError")
    except ValueError as e:
        assert str(e) == f"{p}:2: text: missing or not a string"


def test_parquet_corpus_with_fineweb_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["alpha", "beta"], "id": ["<urn:1>", "<urn:2>"], "url": ["a", "b"]}), p)
    assert list(iter_corpus(p)) == [("<urn:1>", "alpha", {"url": "a"}), ("<urn:2>", "beta", {"url": "b"})]
