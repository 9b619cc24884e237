"""Reading questions and corpora, writing results safely.

* Questions: JSONL, one ``{"id", "question", ...}`` per line, or a TREC RAG topics file
  (``qid<TAB>query`` TSV, ragnarok request JSONL, TREC RAG 2025 topics JSONL). A bad line
  yields an :class:`InputError` naming file, line and field, and the other lines are still read.
* Corpora: JSONL / JSONL.gz (``{"id", "text", ...}``) or Parquet with FineWeb's columns.
* Writes: :func:`atomic_write_text` (temp file + ``os.replace``) and
  :func:`append_jsonl` (one ``write`` + flush + fsync per record, so a crash leaves at
  most one torn last line, which :func:`read_jsonl_tolerant` drops).
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .records import Question


def id_hash(passage_id: str) -> int:
    """64-bit signed hash of a passage id (BLAKE2b, 8-byte digest, little-endian)."""
    return int.from_bytes(hashlib.blake2b(passage_id.encode("utf-8"), digest_size=8).digest(), "little",
                          signed=True)


@dataclass(frozen=True)
class InputError:
    """A rejected input line: ``file:line: field: message``."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


def read_questions(path: str | Path) -> tuple[list[Question], list[InputError]]:
    """Read a question file, keeping every valid line.

    Four formats, told apart by extension and content:

    * LiveRAG / DataMorgana JSONL(.gz): objects with ``id`` (str or int) and a non-empty
      ``question``; other fields go to ``Question.extra``.
    * TREC RAG topics TSV (``.tsv``/``.txt``, or a first line that is not JSON and holds a
      tab): ``qid<TAB>query`` per line, exactly two fields, as the TREC RAG 2024 topics files
      and ragnarok's checker read them (castorini/ragnarok
      ``src/ragnarok/scripts/rag24_validation.py``, ``load_topics``). Errors name the fields
      ``qid`` and ``query``.
    * ragnarok request JSONL (castorini/ragnarok ``src/ragnarok/data.py``, ``Request``):
      ``{"query": {"qid", "text"}, "candidates": [...]}``; ``query.qid`` is the id,
      ``query.text`` the question, ``candidates`` (and any other field) go to ``extra``.
      Errors name ``query``, ``query.qid`` or ``query.text``.
    * TREC RAG 2025 topics JSONL: ``{"id", "narrative"}`` (the track's
      ``trec_rag_2025_queries.jsonl``; ``title`` is read when ``narrative`` is absent, as
      ragnarok's 2025 validator does); the narrative is the question.

    Args:
        path: the file.

    Returns:
        ``(questions, errors)``: the valid questions in file order, and one InputError per
        rejected line (not UTF-8, invalid JSON, not an object, missing/empty id or
        question, duplicate id, a TSV line without exactly two fields). Blank lines are
        skipped; a leading UTF-8 BOM is ignored.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if is_topics_tsv(path):
        return _read_topics_tsv(path)
    questions: list[Question] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    for lineno, obj, bad in iter_json_lines(path):
        if bad is not None:
            errors.append(InputError(str(path), lineno, "<line>", bad))
            continue
        if not isinstance(obj, dict):
            errors.append(InputError(str(path), lineno, "<line>", "not a JSON object"))
            continue
        if "question" not in obj and "query" in obj:  # ragnarok request
            query = obj["query"]
            if not isinstance(query, dict):
                errors.append(InputError(str(path), lineno, "query",
                                         "not an object {\"qid\", \"text\"} (ragnarok request format)"))
                continue
            id_field, text_field, qid, text = "query.qid", "query.text", query.get("qid"), query.get("text")
            extra = {k: v for k, v in obj.items() if k != "query"}
        else:
            text_field = "question"
            if "question" not in obj and ("narrative" in obj or "title" in obj):  # TREC RAG 2025 topic
                text_field = "narrative" if "narrative" in obj else "title"
            id_field, qid, text = "id", obj.get("id"), obj.get(text_field)
            extra = {k: v for k, v in obj.items() if k not in ("id", text_field)}
        if qid is None or isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid) == "":
            errors.append(InputError(str(path), lineno, id_field, "missing or not a string/integer"))
            continue
        if not isinstance(text, str) or not text.strip():
            errors.append(InputError(str(path), lineno, text_field, "missing or empty"))
            continue
        if str(qid) in seen:
            errors.append(InputError(str(path), lineno, id_field, f"duplicate id {qid!r}"))
            continue
        seen.add(str(qid))
        questions.append(Question(id=qid, question=text.strip(), extra=extra))
    return questions, errors


def is_topics_tsv(path: str | Path) -> bool:
    """Whether ``path`` is a ``qid<TAB>query`` topics file: extension ``.tsv``/``.txt``
    (also gzipped), or a first non-blank line that does not start with ``{`` and holds a tab."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in (".tsv", ".txt"):
        return True
    for _, line, bad in _lines(path):
        if bad is not None:
            return False
        if line.strip():
            return not line.lstrip().startswith("{") and "\t" in line
    return False


def _read_topics_tsv(path: Path) -> tuple[list[Question], list[InputError]]:
    """``qid<TAB>query`` lines → questions (see :func:`read_questions`)."""
    questions: list[Question] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    for lineno, line, bad in _lines(path):
        if bad is not None:
            errors.append(InputError(str(path), lineno, "<line>", bad))
            continue
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 2:
            errors.append(InputError(str(path), lineno, "<line>",
                                     f"expected 2 tab-separated fields (qid, query), found {len(fields)}"))
            continue
        qid, text = fields[0].strip(), fields[1].strip()
        if not qid:
            errors.append(InputError(str(path), lineno, "qid", "empty"))
            continue
        if not text:
            errors.append(InputError(str(path), lineno, "query", "empty"))
            continue
        if qid in seen:
            errors.append(InputError(str(path), lineno, "qid", f"duplicate id {qid!r}"))
            continue
        seen.add(qid)
        questions.append(Question(id=qid, question=text))
    return questions, errors


def _lines(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """``(line number, text, error)`` for each line of a (gzipped) text file, decoded as
    UTF-8 line by line, so that one undecodable line is reported (``error`` set, ``text``
    empty) and the others are still read. A UTF-8 byte-order mark at the start of the file
    (written by Windows tools) is skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield lineno, raw.decode("utf-8"), None
            except UnicodeDecodeError as e:
                yield lineno, "", f"not valid UTF-8 (byte {e.start + 1}: {raw[e.start:e.start + 1]!r})"


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, parsed JSON value, error)`` for every non-blank line of a JSONL(.gz)
    file: ``error`` names what is wrong with a line that is not UTF-8 or not JSON (its
    value is then ``None``). The one reading loop behind every JSONL reader here.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    for lineno, line, bad in _lines(Path(path)):
        if bad is not None:
            yield lineno, None, bad
            continue
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line), None
        except json.JSONDecodeError as e:
            yield lineno, None, f"invalid JSON: {e.msg}"


CORPUS_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")


def corpus_files(path: str | Path) -> list[Path]:
    """The files of a corpus: ``path`` itself, or for a directory every ``*.parquet``,
    ``*.jsonl`` and ``*.jsonl.gz`` under it (recursively), sorted by relative path — the layout of
    FineWeb's ``sample/10BT/000_00000.parquet`` ... shards.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a directory with no corpus file.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such corpus file or directory")
    if not path.is_dir():
        check_corpus_format(path)
        return [path]
    files = sorted((f for f in path.rglob("*") if f.is_file() and f.name.endswith(CORPUS_SUFFIXES)),
                   key=lambda f: f.relative_to(path).as_posix())
    if not files:
        raise ValueError(f"{path}: a directory with no corpus file ({', '.join(CORPUS_SUFFIXES)})")
    for f in files:
        check_corpus_format(f)
    return files


SUPPORTED_CORPUS_FORMATS = ("supported: JSON Lines (.jsonl, .jsonl.gz: one object per line with string 'id' and "
                            "'text'), Parquet (.parquet with FineWeb's 'id' and 'text' columns), or a directory of them")


def check_corpus_format(path: str | Path) -> None:
    """Refuse a corpus file that is not one of the supported formats, by its name and by its
    first bytes (4 KiB; nothing else is read), before any work on it.

    Raises:
        ValueError: naming the file and saying what it is and what is supported: an unsupported
            extension (``.csv``, ``.tsv``, ``.json``, ...); a ``.parquet`` without Parquet's
            ``PAR1`` magic; a ``.jsonl`` that is gzip-compressed or Parquet; a ``.jsonl.gz`` that is
            not gzip; JSON Lines whose first line does not start an object (``{``).
    """
    path = Path(path)
    name = path.name.lower()
    if not name.endswith(CORPUS_SUFFIXES):
        shown = "".join(path.suffixes[-2:]) or "(none)"
        raise ValueError(f"{path}: unsupported corpus format {shown}; {SUPPORTED_CORPUS_FORMATS}")
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if name.endswith(".parquet"):
        if head and head[:4] != b"PAR1":
            raise ValueError(f"{path}: not a Parquet file (no PAR1 magic bytes); {SUPPORTED_CORPUS_FORMATS}")
        return
    if name.endswith(".gz"):
        if head and head[:2] != b"\x1f\x8b":
            raise ValueError(f"{path}: not gzip-compressed although named .gz; {SUPPORTED_CORPUS_FORMATS}")
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        except (OSError, EOFError) as e:
            raise ValueError(f"{path}: unreadable gzip ({e}); {SUPPORTED_CORPUS_FORMATS}") from e
    elif head[:2] == b"\x1f\x8b":
        raise ValueError(f"{path}: gzip-compressed: name it .jsonl.gz; {SUPPORTED_CORPUS_FORMATS}")
    elif head[:4] == b"PAR1":
        raise ValueError(f"{path}: a Parquet file: name it .parquet; {SUPPORTED_CORPUS_FORMATS}")
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    if first and first != b"{":
        raise ValueError(f"{path}: not JSON Lines (line 1 does not start with '{{'); {SUPPORTED_CORPUS_FORMATS}")


def iter_corpus(path: str | Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Yield ``(doc_id, text, metadata)`` for every document of a corpus file or directory.

    Args:
        path: ``.jsonl``, ``.jsonl.gz`` (objects with ``id`` and ``text``) or ``.parquet``
            (FineWeb columns ``id``, ``text``; other columns become metadata; read one row
            group batch at a time), or a directory of such files (:func:`corpus_files`: e.g. a
            FineWeb-10BT download, its Parquet shards read in name order).

    Raises:
        ValueError: a line/row that is not UTF-8 or lacks a string ``id`` or ``text``, or a
            document ``id`` seen before, in any file of the corpus (LiveRAG ``doc_IDs`` must be
            unambiguous), naming the file, the line(s) or row(s) and the field. Ids are checked
            in groups (:class:`_SeenIds`, bounded memory), so a duplicate is raised up to
            262,144 documents after it was yielded.
        FileNotFoundError: missing file.
    """
    files = corpus_files(path)
    seen = _SeenIds(files)
    for f in files:
        yield from _iter_corpus_file(f, seen)
    seen.flush()


def open_parquet(path: str | Path):
    """``pyarrow.parquet.ParquetFile`` for streaming reads: ``pre_buffer=False``. With pyarrow's
    default (``pre_buffer=True``) ``iter_batches`` keeps the column chunks it read in its memory
    pool, so reading a file batch by batch holds most of the file by the end (measured on a 5M-
    document scale corpus: +250 MB of pool per 300k documents read, against a constant 42 MB)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(str(path), pre_buffer=False)


class _SeenIds:
    """Duplicate document ids across a corpus in bounded memory: 8 bytes per document (a sorted
    array of 64-bit BLAKE2b hashes of the ids), not a dict of every id (~260 bytes per document:
    1.3 GB at 5M documents, ~4 GB for FineWeb-10BT's 15M). Ids are checked in groups of
    :attr:`GROUP`, so a duplicate is reported up to that many documents after it is read; the
    first occurrence is then found by reading the corpus again up to it (a hash collision
    between different ids is recognised there and ignored)."""

    GROUP = 262_144

    def __init__(self, files: list[Path]):
        import numpy as np

        self.files = files
        self.sorted = np.zeros(0, dtype=np.int64)
        self.pending: list[int] = []
        self.where: list[tuple[Path, int, str, str]] = []  # (file, line/row, unit, id) of the pending ids

    def add(self, doc_id: str, path: Path, where: int, unit: str) -> None:
        self.pending.append(id_hash(doc_id))
        self.where.append((path, where, unit, doc_id))
        if len(self.pending) >= self.GROUP:
            self.flush()

    def flush(self) -> None:
        import numpy as np

        if not self.pending:
            return
        h = np.asarray(self.pending, dtype=np.int64)
        order = np.argsort(h, kind="stable")
        hs = h[order]
        hit = np.zeros(len(h), dtype=bool)
        hit[order[1:][hs[1:] == hs[:-1]]] = True  # a later copy within this group
        if len(self.sorted):
            pos = np.clip(np.searchsorted(self.sorted, h), 0, len(self.sorted) - 1)
            hit |= self.sorted[pos] == h  # seen in an earlier group
        for i in np.flatnonzero(hit):  # in reading order: the first duplicate is reported
            path, where, unit, doc_id = self.where[i]
            first = self._first(doc_id, (path, where))
            if first is not None:
                at = f"{unit} {first[1]}" if first[0] == path else f"{first[0]}:{first[1]}"
                raise ValueError(f"{path}:{where}: id: duplicate document id {doc_id!r} (first at {at}); "
                                 "document ids must be unique")
        self.sorted = np.sort(np.concatenate([self.sorted, h]))
        self.pending, self.where = [], []

    def _first(self, doc_id: str, until: tuple[Path, int]) -> tuple[Path, int] | None:
        """Where ``doc_id`` first occurs before ``until`` (None: only a hash collision)."""
        for f in self.files:
            for where, other in _corpus_ids(f):
                if (f, where) == until:
                    return None
                if other == doc_id:
                    return f, where
        return None


def _corpus_ids(path: Path):
    """``(line or row, id)`` of every document of one corpus file (ids only; no checks)."""
    if path.suffix == ".parquet":
        rowno = 0
        for batch in open_parquet(path).iter_batches(batch_size=65536, columns=["id"]):
            for doc_id in batch.column(0).to_pylist():
                rowno += 1
                yield rowno, doc_id
        return
    for lineno, obj, bad in iter_json_lines(path):
        if bad is None and isinstance(obj, dict):
            yield lineno, obj.get("id")


def _iter_corpus_file(path: Path, seen: _SeenIds):
    if path.suffix == ".parquet":
        pf = open_parquet(path)
        for name in ("id", "text"):
            if name not in pf.schema_arrow.names:
                raise ValueError(f"{path}: column {name!r} missing (FineWeb columns are 'id', 'text')")
        rowno = 0
        for batch in pf.iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                rowno += 1
                doc_id, text = row.pop("id"), row.pop("text")
                if not isinstance(doc_id, str) or not isinstance(text, str):
                    raise ValueError(f"{path}: row {rowno}: id/text must be strings")
                seen.add(doc_id, path, rowno, "row")
                yield doc_id, text, row
        return
    for lineno, obj, bad in iter_json_lines(path):
        if bad is not None:
            raise ValueError(f"{path}:{lineno}: <line>: {bad}")
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{lineno}: <line>: not a JSON object")
        for name in ("id", "text"):
            if not isinstance(obj.get(name), str):
                raise ValueError(f"{path}:{lineno}: {name}: missing or not a string")
        doc_id, text = obj.pop("id"), obj.pop("text")
        seen.add(doc_id, path, lineno, "line")
        yield doc_id, text, obj


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Write a file atomically: ``write(fh)`` fills a temp file in the same directory (binary
    mode), which is flushed, fsynced and renamed over ``path`` (``os.replace``); on any error
    the temp file is removed and ``path`` is untouched. The file gets normal permissions
    (``0666 & ~umask``; ``mkstemp`` creates ``0600``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))


def append_jsonl(path: str | Path, records: list[dict]) -> None:
    """Append records as JSON lines with a single write, then flush and fsync.

    All or nothing: when the write fails (disk full ``ENOSPC``, file size limit ``EFBIG``, quota
    ``EDQUOT``, ...) the file is cut back to its length before the call, so no torn line follows
    the records already there, and the OSError is raised (:func:`out_of_space` tells whether
    more space would let the same command finish)."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    with open(path, "ab", buffering=0) as fh:  # unbuffered: a failed write leaves nothing pending
        start = fh.seek(0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[fh.write(view):]
            os.fsync(fh.fileno())
        except OSError:
            try:
                os.ftruncate(fh.fileno(), start)
            except OSError:  # pragma: no cover - the truncate itself failed: resume drops the torn line
                pass
            raise


OUT_OF_SPACE = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
"""errno values of a write that more space (or a larger file size limit) would let succeed."""


def out_of_space(e: BaseException) -> bool:
    """Whether ``e`` is an OSError of :data:`OUT_OF_SPACE` (a full disk, a file size limit, a quota)."""
    return isinstance(e, OSError) and e.errno in OUT_OF_SPACE


def read_jsonl_tolerant(path: str | Path, repair: bool = False) -> list[dict]:
    """Read a JSONL file written by :func:`append_jsonl`, dropping torn or invalid lines.

    Args:
        path: the file; a missing file reads as ``[]``.
        repair: when invalid lines were found, rewrite the file atomically without them
            (used before resuming, so that new appends do not follow a torn line).

    Returns:
        The valid JSON objects in file order.
    """
    path = Path(path)
    if not path.exists():
        return []
    good: list[dict] = []
    good_lines: list[str] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.endswith("\n"):
                bad += 1
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict):
                good.append(obj)
                good_lines.append(line)
            else:
                bad += 1
    if bad and repair:
        atomic_write_text(path, "".join(good_lines))
    return good


def sidecar(output: str | Path, kind: str) -> Path:
    """``answers.jsonl`` → ``answers.<kind>.jsonl``: the files a run writes beside its answers
    (``traces``, ``failed``; see :mod:`preqrag.run.runner`)."""
    output = Path(output)
    stem = output.name[:-len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.{kind}.jsonl")


def stats_path(output: str | Path) -> Path:
    """``answers.jsonl`` → ``answers.run.json`` (the last run's counts and timings)."""
    return sidecar(output, "run").with_suffix(".json")
