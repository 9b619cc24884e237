"""Pre-ranked candidates given with a question (``[run] use_given_candidates``).

TREC 2024 RAG's augmented-generation task (CIR's task) gives, per topic, a ranked list of
segments to generate from. ragnarok's request JSONL carries it (castorini/ragnarok
``src/ragnarok/data.py``: ``Request{query, candidates: [Candidate{docid, score, doc}]}``);
:func:`preqrag.core.io.read_questions` keeps ``candidates`` in ``Question.extra``. The text of a
candidate is read from ``doc`` as ragnarok's generators read it
(``src/ragnarok/generate/llm.py``, ``convert_doc_to_prompt_content``): ``text``, else
``segment``, else ``contents``, else ``passage`` (a ``doc`` that is a string is the text).
The title (``doc.title``) is not prepended: CIR's prompt gives the segment texts (Table 2).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..core.records import doc_of

TEXT_KEYS = ("text", "segment", "contents", "passage")


class GivenPassage(NamedTuple):
    """One given candidate: ``id`` its docid (the passage id in the trace; an MS MARCO V2.1
    segment id like ``msmarco_v2.1_doc_54_319914167#4_733739871``), ``doc_id`` the document
    part (before the last ``#``, as this project's passage ids ``<doc id>#<n>``), ``text``, ``score``."""

    id: str
    doc_id: str
    text: str
    score: float


def has_candidates(extra: dict[str, Any] | None) -> bool:
    """Whether a question's extra fields carry a non-empty ``candidates`` list (an empty list,
    as in a ragnarok request for full RAG, means: retrieve)."""
    c = (extra or {}).get("candidates")
    return isinstance(c, list) and len(c) > 0


def read_candidates(extra: dict[str, Any] | None) -> tuple[list[GivenPassage], list[str]]:
    """The question's candidates in their given order, and notes (duplicate docids dropped,
    the first kept).

    Raises:
        ValueError: a candidate that is not an object, has no string/integer ``docid``, or no
            non-empty text (the message names the candidate by its 1-based position).
    """
    raw = (extra or {}).get("candidates")
    if not isinstance(raw, list):
        raise ValueError("candidates: not a list")
    out: list[GivenPassage] = []
    seen: set[str] = set()
    duplicates = 0
    for i, c in enumerate(raw, 1):
        if not isinstance(c, dict):
            raise ValueError(f"candidates[{i}]: not an object {{docid, score, doc}}")
        docid = c.get("docid")
        if isinstance(docid, bool) or not isinstance(docid, (str, int)) or str(docid) == "":
            raise ValueError(f"candidates[{i}].docid: missing or not a string/integer")
        doc = c.get("doc")
        text = doc if isinstance(doc, str) else None
        if isinstance(doc, dict):
            text = next((doc[k] for k in TEXT_KEYS if isinstance(doc.get(k), str)), None)
        if text is None and isinstance(c.get("text"), str):
            text = c["text"]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"candidates[{i}].doc: no text (one of {', '.join(TEXT_KEYS)})")
        score = c.get("score")
        try:
            score = float(score) if score is not None and not isinstance(score, bool) else 0.0
        except (TypeError, ValueError):
            raise ValueError(f"candidates[{i}].score: not a number") from None
        if not math.isfinite(score):
            score = 0.0
        pid = str(docid)
        if pid in seen:
            duplicates += 1
            continue
        seen.add(pid)
        out.append(GivenPassage(pid, doc_of(pid), text, score))
    notes = [f"candidates: {duplicates} duplicate docid(s) dropped, the first kept"] if duplicates else []
    return out, notes
