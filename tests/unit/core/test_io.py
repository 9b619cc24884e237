"""Input validation and crash-safe writing."""

import json

import pytest

from preqrag.core.io import append_jsonl, atomic_write_text, iter_corpus, read_jsonl_tolerant, read_questions
from conftest import run_cli


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


def test_fineweb_directory_of_parquet_shards(tmp_path):
    """A FineWeb-10BT download (sample/10BT/000_00000.parquet ...) indexes as one corpus: shards in name
    order, ids unique across files, the same fingerprint for the same files."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from preqrag.index.embedded import file_sha256

    d = tmp_path / "fineweb" / "sample" / "10BT"
    d.mkdir(parents=True)
    cols = {"dump": ["CC-MAIN-2024-10"] * 2, "url": ["u1", "u2"]}
    pq.write_table(pa.table({"text": ["gamma", "delta"], "id": ["<urn:3>", "<urn:4>"], **cols}), d / "001_00000.parquet")
    pq.write_table(pa.table({"text": ["alpha", "beta"], "id": ["<urn:1>", "<urn:2>"], **cols}), d / "000_00000.parquet")
    (d / "README.txt").write_text("not a corpus file")
    root = tmp_path / "fineweb"
    assert [(i, t) for i, t, _ in iter_corpus(root)] == [
        ("<urn:1>", "alpha"), ("<urn:2>", "beta"), ("<urn:3>", "gamma"), ("<urn:4>", "delta")]
    fp = file_sha256(root)
    assert fp == file_sha256(root) and len(fp) == 64
    with gzip.open(d / "002_extra.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "<urn:2>", "text": "again"}) + "\n")
    assert file_sha256(root) != fp
    with pytest.raises(ValueError, match=r"002_extra.jsonl.gz:1: id: duplicate document id '<urn:2>' \(first at .*000_00000"):
        list(iter_corpus(root))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no corpus file"):
        list(iter_corpus(empty))


def test_duplicate_ids_found_across_groups_in_bounded_memory(tmp_path, monkeypatch):
    """The duplicate-id check keeps 8-byte hashes, checked in groups: a duplicate in a later group
    or within one group is still reported with both places, and a hash collision between two
    different ids is not an error."""
    import preqrag.core.io as io

    monkeypatch.setattr(io._SeenIds, "GROUP", 4)
    docs = [{"id": f"d{i}", "text": f"text {i}"} for i in range(10)]
    path = tmp_path / "c.jsonl"

    def write(rows):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    write(docs)
    assert [d for d, _, _ in io.iter_corpus(path)] == [f"d{i}" for i in range(10)]
    write(docs[:9] + [{"id": "d1", "text": "again"}])  # line 10 repeats line 2, three groups later
    with pytest.raises(ValueError, match=r"c.jsonl:10: id: duplicate document id 'd1' \(first at line 2\)"):
        list(io.iter_corpus(path))
    write(docs[:5] + [{"id": "d4", "text": "again"}] + docs[6:])  # within one group
    with pytest.raises(ValueError, match=r"c.jsonl:6: id: duplicate document id 'd4' \(first at line 5\)"):
        list(io.iter_corpus(path))
    write(docs)
    monkeypatch.setattr(io, "id_hash", lambda doc_id: 7)  # every id collides: none is a duplicate
    assert len(list(io.iter_corpus(path))) == 10


def test_unsupported_corpus_formats_are_refused_by_name_and_by_content(tmp_path):
    import gzip

    from preqrag.core.io import corpus_files

    good = b'{"id": "d1", "text": "A reef."}\n'
    cases = {
        "c.csv": (b"id,text\nd1,A reef.\n", "unsupported corpus format .csv"),
        "c.tsv.gz": (gzip.compress(b"d1\tA reef.\n"), "unsupported corpus format .tsv.gz"),
        "c.jsonl": (b"id,text\nd1,A reef.\n", "not JSON Lines (line 1 does not start with '{')"),
        "z.jsonl": (gzip.compress(good), "gzip-compressed: name it .jsonl.gz"),
        "p.jsonl": (b"PAR1" + b"\0" * 16, "a Parquet file: name it .parquet"),
        "n.jsonl.gz": (good, "not gzip-compressed although named .gz"),
        "x.parquet": (good, "not a Parquet file (no PAR1 magic bytes)"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match="supported: JSON Lines") as e:
            corpus_files(tmp_path / name)
        assert str(e.value).startswith(f"{tmp_path / name}: {message}"), str(e.value)
    (tmp_path / "ok.jsonl.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + good))
    assert corpus_files(tmp_path / "ok.jsonl.gz") == [tmp_path / "ok.jsonl.gz"]
    # the command line refuses it before any work, exit 2, no index directory left
    r = run_cli("index", "--corpus", str(tmp_path / "c.csv"),
                        "--index", str(tmp_path / "idx"))
    assert r.returncode == 2 and "unsupported corpus format .csv" in r.stderr, r.stderr
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()
