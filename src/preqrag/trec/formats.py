"""The TREC RAG answer formats (2024 and 2025) as pydantic models, and their limits.

Both are JSONL, one answer per topic, the answer being a list of sentences each with the
``citations`` it makes: 0-based indexes into the answer's ``references`` (segment ids of the
collection; MS MARCO V2.1 segment ids at TREC, ``<doc id>#<n>`` passage ids here).

TREC RAG 2024 (``trec-rag24``; castorini/ragnarok ``src/ragnarok/data.py``,
``result_to_dict``; checked by ``src/ragnarok/scripts/check_trec_rag24_gen.py`` →
``rag24_validation.py``, the track's checker)::

    {"run_id", "topic_id", "topic", "references": [segment id, ...] (at most 20),
     "response_length": words of the answer, "answer": [{"text", "citations": [int]}]}

TREC RAG 2025 (``trec-rag25``; ragnarok ``src/ragnarok/scripts/trec25_conversion.py``,
``convert_record``; checked by ``validate_trec_rag25_gen.py`` → ``rag25_validation.py``)::

    {"metadata": {"team_id", "run_id", "narrative_id", "type": "automatic"|"manual",
                  "narrative", "prompt"},
     "references": [segment id, ...] (at most 100),
     "answer": [{"text", "citations": [int] (format 1) or [segment id] (format 2)}]}

Differences that matter: 2025 moves the run's identity under ``metadata`` (adding
``team_id`` and ``type``, renaming ``topic_id``/``topic`` to ``narrative_id``/``narrative``),
has no ``response_length`` (the checker counts words itself), allows 100 references instead
of 20, and accepts citations given as segment ids (``--format 2``). Both limit the answer to
:data:`RESPONSE_LIMIT` words counted as the checkers count them (:func:`response_length`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

RESPONSE_LIMIT = 400
"""Most words in an answer (both years; ragnarok ``RESPONSE_LIMIT`` and the 2024 checker's 400)."""

REFERENCE_LIMIT = {"trec-rag24": 20, "trec-rag25": 100}
"""Most references per answer (2024 checker: "Too many references (max 20)"; 2025: ``CITATION_LIMIT``)."""

MSMARCO_SEGMENT = re.compile(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$")
"""An MS MARCO V2.1 segment id, the track's reference format (ragnarok ``MARCODOC``)."""

TREC_FORMATS = ("trec-rag24", "trec-rag25")
FORMATS = ("liverag", *TREC_FORMATS)


def response_length(sentences: list[str]) -> int:
    """Words of an answer as the track's checkers count them: each sentence stripped, NFKC
    normalised and split on whitespace (ragnarok ``compute_rag24_response_length`` and
    ``rag25_validation.compute_response_length``)."""
    return sum(len(unicodedata.normalize("NFKC", s.strip()).split()) for s in sentences)


class CitedSentence(BaseModel):
    """One answer sentence and the references it cites (0-based indexes into ``references``)."""

    model_config = ConfigDict(extra="allow")

    text: StrictStr
    citations: list[StrictInt]


class Rag24Answer(BaseModel):
    """One line of a TREC RAG 2024 run (see the module docstring). Extra fields are allowed, as
    ragnarok writes some (``reasoning_traces``, ``trace``)."""

    model_config = ConfigDict(extra="allow")

    run_id: StrictStr = Field(min_length=1)
    topic_id: StrictStr | StrictInt
    topic: StrictStr
    references: list[StrictStr]
    response_length: StrictInt = Field(ge=0)
    answer: list[CitedSentence]


class Rag25Metadata(BaseModel):
    """``metadata`` of a TREC RAG 2025 answer: required ``team_id``, ``run_id``,
    ``narrative_id``; optional ``type``, ``narrative``, ``prompt`` (the checker warns when one
    is missing)."""

    model_config = ConfigDict(extra="allow")

    team_id: StrictStr = Field(min_length=1)
    run_id: StrictStr = Field(min_length=1)
    narrative_id: StrictStr | StrictInt
    type: Literal["automatic", "manual"] | None = None
    narrative: StrictStr | None = None
    prompt: StrictStr | None = None


class Rag25Sentence(BaseModel):
    """One answer sentence of a 2025 run: citations are indexes (format 1) or segment ids (format 2)."""

    model_config = ConfigDict(extra="allow")

    text: StrictStr
    citations: list[StrictInt | StrictStr]


class Rag25Answer(BaseModel):
    """One line of a TREC RAG 2025 run (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    metadata: Rag25Metadata
    references: list[StrictStr]
    answer: list[Rag25Sentence]
