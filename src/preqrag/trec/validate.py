"""``preqrag validate``: check a LiveRAG answer file or a TREC RAG run, naming the line and
field of every problem.

Formats (:data:`preqrag.trec.formats.FORMATS`): ``liverag`` (:class:`preqrag.core.records.LiveRAGAnswer`,
the LiveRAG Challenge schema), ``trec-rag24`` and ``trec-rag25``
(:mod:`preqrag.trec.formats`). Each line is parsed by its pydantic model, then checked as the
track's checkers check it (castorini/ragnarok ``src/ragnarok/scripts/rag24_validation.py``,
``rag25_validation.py``):

* errors: invalid JSON, a missing or mistyped field, a run id that differs from the first
  line's, the same topic answered twice, duplicate references, more references than the
  year allows (20 / 100), a citation out of range (or, for 2025 segment-id citations, not in
  ``references``), the same citation twice in a sentence, an answer over 400 words, a 2024
  ``response_length`` that is not the answer's word count; with ``topics``: an unknown topic
  id, a 2024 ``topic`` that is not the topic's text; with ``msmarco_ids``: a reference that
  is not an MS MARCO V2.1 segment id;
* warnings (printed; they do not fail the file): an answer with no sentence, a 2025
  ``metadata`` without ``type``/``narrative``/``prompt``, with ``topics`` a topic without an
  answer, a LiveRAG answer over 300 words (LiveRAG reads no more).

Ragnarok's checkers only *warn* about some of these errors and rewrite the run (drop duplicate
citations, cut long answers, fix ``response_length``); here they are errors, because the run
that would be judged is then not the file submitted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from ..core.io import iter_json_lines, read_questions
from ..core.records import LiveRAGAnswer
from .formats import (FORMATS, MSMARCO_SEGMENT, REFERENCE_LIMIT, RESPONSE_LIMIT, Rag24Answer, Rag25Answer,
                      response_length)

Severity = Literal["error", "warning"]
LIVERAG_WORDS = 300
"""LiveRAG evaluates the first 300 words of an answer."""

_UNION_TAGS = {"str", "int", "bool", "float", "list", "dict"}


@dataclass(frozen=True)
class Problem:
    """One problem of a file: ``file:line: field: message`` (``line`` 0: the file as a whole)."""

    file: str
    line: int
    field: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        prefix = "" if self.severity == "error" else "warning: "
        return f"{where}: {self.field}: {prefix}{self.message}"


def field_path(loc: Iterable) -> str:
    """A pydantic error location as a field path: ``('answer', 0, 'citations', 1)`` →
    ``answer[0].citations[1]``; union-member tags (``str``, ``int``) are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS or str(part).startswith(("literal[", "function-")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "<line>"


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def model_problems(file: str, line: int, error: ValidationError) -> list[Problem]:
    """One Problem per field of a pydantic ValidationError (messages of a union's members joined)."""
    by_field: dict[str, list[str]] = {}
    for e in error.errors():
        msg = "missing" if e["type"] == "missing" else e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field (not in the format)"
        elif e["type"] != "missing" and "input" in e:
            msg += f" (got {_short(e['input'])})"
        msgs = by_field.setdefault(field_path(e["loc"]), [])
        if msg not in msgs:
            msgs.append(msg)
    return [Problem(file, line, f, "; or ".join(m)) for f, m in by_field.items()]


def detect_format(path: str | Path) -> str | None:
    """The format of a file from its first JSON object: ``metadata`` → ``trec-rag25``;
    ``topic_id`` or ``run_id`` → ``trec-rag24``; ``passages``/``final_prompt``/``answer`` with a
    string answer → ``liverag``; else ``None``."""
    for _, obj, bad in iter_json_lines(path):
        if bad is not None or not isinstance(obj, dict):
            continue
        if "metadata" in obj:
            return "trec-rag25"
        if "topic_id" in obj or "run_id" in obj:
            return "trec-rag24"
        if "passages" in obj or "final_prompt" in obj or isinstance(obj.get("answer"), str):
            return "liverag"
        return None
    return None


def _citation_problems(file: str, line: int, fmt: str, sentences, refs: list[str]) -> list[Problem]:
    out = []
    for i, sent in enumerate(sentences):
        cits = sent.citations
        as_ids = [c for c in cits if isinstance(c, str)]
        if as_ids and len(as_ids) != len(cits):
            out.append(Problem(file, line, f"answer[{i}].citations",
                               "mixes indexes and segment ids (format 1 uses indexes, format 2 segment ids)"))
            continue
        seen: set = set()
        for j, c in enumerate(cits):
            where = f"answer[{i}].citations[{j}]"
            if isinstance(c, str):
                if c not in refs:
                    out.append(Problem(file, line, where, f"segment id {c!r} is not in references"))
            elif not 0 <= c < len(refs):
                out.append(Problem(file, line, where, f"index {c} out of range: references has {len(refs)} "
                                   f"entr{'y' if len(refs) == 1 else 'ies'}"))
            if c in seen:
                out.append(Problem(file, line, where, f"cites {c!r} twice"))
            seen.add(c)
    return out


def _reference_problems(file: str, line: int, fmt: str, refs: list[str], msmarco_ids: bool) -> list[Problem]:
    out = []
    limit = REFERENCE_LIMIT[fmt]
    if len(refs) > limit:
        out.append(Problem(file, line, "references", f"{len(refs)} references; at most {limit} allowed"))
    first: dict[str, int] = {}
    for i, ref in enumerate(refs):
        if ref in first:
            out.append(Problem(file, line, f"references[{i}]", f"duplicate of references[{first[ref]}] ({ref!r})"))
        first.setdefault(ref, i)
        if msmarco_ids and not MSMARCO_SEGMENT.match(ref):
            out.append(Problem(file, line, f"references[{i}]", f"{ref!r} is not an MS MARCO V2.1 segment id"))
    return out


def _liverag_problems(file: str, lineno: int, rec, key: str, topic_text: dict[str, str] | None,
                      topics) -> list[Problem]:
    """The checks of one parsed LiveRAG answer: its length (LiveRAG reads 300 words) and its id
    against ``topic_text``."""
    out = []
    words = len(rec.answer.split())
    if words > LIVERAG_WORDS:
        out.append(Problem(file, lineno, "answer", f"{words} words; LiveRAG reads only the first {LIVERAG_WORDS}",
                           "warning"))
    if topic_text is not None and key not in topic_text:
        out.append(Problem(file, lineno, "id", f"{key!r} is not in {topics}"))
    return out


def _trec_record_problems(file: str, lineno: int, fmt: str, rec, key: str, topic_text: dict[str, str] | None,
                          topics, msmarco_ids: bool) -> list[Problem]:
    """The checks of one parsed TREC RAG record (references, citations, length, the format's
    own fields, its topic against ``topic_text``); the run id is checked across lines by
    :func:`validate_file`."""
    out: list[Problem] = []
    refs = list(rec.references)
    out += _reference_problems(file, lineno, fmt, refs, msmarco_ids)
    out += _citation_problems(file, lineno, fmt, rec.answer, refs)
    if not rec.answer:
        out.append(Problem(file, lineno, "answer", "no sentence", "warning"))
    words = response_length([s.text for s in rec.answer])
    if words > RESPONSE_LIMIT:
        out.append(Problem(file, lineno, "answer", f"{words} words; at most {RESPONSE_LIMIT} allowed"))
    if fmt == "trec-rag24":
        if rec.response_length != words:
            out.append(Problem(file, lineno, "response_length", f"{rec.response_length}, but the answer has "
                                    f"{words} words (sentences stripped, NFKC-normalised, split on whitespace)"))
        if topic_text is not None:
            if key not in topic_text:
                out.append(Problem(file, lineno, "topic_id", f"unknown topic {key!r} (not in {topics})"))
            elif rec.topic != topic_text[key]:
                out.append(Problem(file, lineno, "topic", f"differs from the text of topic {key!r} in {topics}"))
    else:
        md = rec.metadata
        for name in ("type", "narrative", "prompt"):
            if getattr(md, name) is None:
                out.append(Problem(file, lineno, f"metadata.{name}", "missing (optional, the checker warns)",
                                        "warning"))
        if topic_text is not None:
            if key not in topic_text:
                out.append(Problem(file, lineno, "metadata.narrative_id",
                                        f"unknown topic {key!r} (not in {topics})"))
            elif md.narrative is not None and md.narrative != topic_text[key]:
                out.append(Problem(file, lineno, "metadata.narrative",
                                        f"differs from the text of topic {key!r} in {topics}", "warning"))
    return out


def validate_file(path: str | Path, fmt: str | None = None, *, topics: str | Path | None = None,
                  msmarco_ids: bool = False) -> tuple[str | None, list[Problem]]:
    """Check every line of an answer file.

    Args:
        path: a JSONL file.
        fmt: ``liverag``, ``trec-rag24`` or ``trec-rag25``; ``None`` detects it
            (:func:`detect_format`).
        topics: a topics/question file (any format :func:`preqrag.core.io.read_questions` reads:
            the track's ``qid<TAB>query`` TSV or its 2025 JSONL) for the topic checks.
        msmarco_ids: also require references to be MS MARCO V2.1 segment ids (the track's
            collection; off by default, since preqrag indexes any corpus).

    Returns:
        ``(format, problems)`` in file order (format ``None`` when it could not be detected;
        then one problem says so). The file is valid when no problem is an error.

    Raises:
        FileNotFoundError: ``path`` or ``topics`` does not exist.
        ValueError: an unknown ``fmt``.
    """
    path = Path(path)
    file = str(path)
    if fmt is None:
        fmt = detect_format(path)
        if fmt is None:
            return None, [Problem(file, 0, "<file>", "cannot tell the format (no line with 'metadata' "
                                  "(trec-rag25), 'topic_id'/'run_id' (trec-rag24) or 'passages' (liverag)); "
                                  "give --format")]
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    topic_text: dict[str, str] | None = None
    problems: list[Problem] = []
    if topics is not None:
        qs, bad = read_questions(topics)
        topic_text = {q.key: q.question for q in qs}
        problems += [Problem(e.file, e.line, e.field, e.message, "warning") for e in bad]
    model: type[BaseModel] = {"liverag": LiveRAGAnswer, "trec-rag24": Rag24Answer, "trec-rag25": Rag25Answer}[fmt]
    id_field = {"liverag": "id", "trec-rag24": "topic_id", "trec-rag25": "metadata.narrative_id"}[fmt]
    run_id: tuple[str, int] | None = None
    answered: dict[str, int] = {}
    lines = 0
    for lineno, obj, bad in iter_json_lines(path):
        lines += 1
        if bad is not None:
            problems.append(Problem(file, lineno, "<line>", bad))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(file, lineno, "<line>", "not a JSON object"))
            continue
        try:
            rec = model.model_validate(obj)
        except ValidationError as e:
            problems += model_problems(file, lineno, e)
            continue
        key = str(rec.id if fmt == "liverag" else rec.topic_id if fmt == "trec-rag24" else rec.metadata.narrative_id)
        if key in answered:
            problems.append(Problem(file, lineno, id_field, f"{key!r} answered again (first on line {answered[key]})"))
        answered.setdefault(key, lineno)
        if fmt == "liverag":
            problems += _liverag_problems(file, lineno, rec, key, topic_text, topics)
            continue
        rid = rec.run_id if fmt == "trec-rag24" else rec.metadata.run_id
        rid_field = "run_id" if fmt == "trec-rag24" else "metadata.run_id"
        if run_id is None:
            run_id = (rid, lineno)
        elif rid != run_id[0]:
            problems.append(Problem(file, lineno, rid_field, f"{rid!r} differs from {run_id[0]!r} (line {run_id[1]}); "
                                    "a run has one run id"))
        problems += _trec_record_problems(file, lineno, fmt, rec, key, topic_text, topics, msmarco_ids)
    if lines == 0:
        problems.append(Problem(file, 0, "<file>", "no answer line (empty file)"))
    if topic_text is not None:
        for key in topic_text:
            if key not in answered:
                problems.append(Problem(file, 0, id_field, f"topic {key!r} of {topics} has no answer", "warning"))
    return fmt, problems
