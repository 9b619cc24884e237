"""Adaptive number of sub-questions for a multi-document question.

PreQRAG (§2.2.2) always decomposes a multi-document question into two sub-questions.
Questions that name more parts (an enumeration "X, Y and Z", three questions joined by
"and") lose a part when squeezed into two; :func:`estimate_n_sub_questions` counts the
parts with surface rules so that the decomposition prompt can ask for 3 or 4.
"""

from __future__ import annotations

import re

from .rules import WH_WORDS

_WH = "|".join(WH_WORDS)
_AUX = "is|are|was|were|does|do|did|can|could|should|would|will|has|have|had"
_ITEM = r"[\w'’&.\-]+(?:\s+[\w'’&.\-]+){0,3}"
_LIST_CUE = r"(?:^|[:(]\s*|\b(?:such as|like|including|includes?|between|among|of|about|on|for|compare|comparing|versus)\s+)"
_ENUM_RE = re.compile(rf"({_LIST_CUE})?({_ITEM}(?:\s*,\s+{_ITEM})+\s*,?\s+(?:and|or|&)\s+{_ITEM})", re.IGNORECASE)
_PREMISE_RE = re.compile(r"^(?P<premise>.*?)\s[-–—]\s(?P<rest>.+)$", re.DOTALL)
_FIRST_PERSON_RE = re.compile(r"\b(?:i|i'm|i’m|i've|i’ve|i'd|i’d|my|me|we|our)\b|^\s*as\s+(?:an?|someone)\b", re.IGNORECASE)
_CLAUSE_RE = re.compile(
    rf"(?:[,;?]|\s[-–—]\s|\band\b|\balso\b|\bplus\b)\s*(?:and\s+|also\s+|but\s+|then\s+)?(?:{_WH}|{_AUX})\b",
    re.IGNORECASE,
)
_FIRST_Q_RE = re.compile(rf"\b(?:{_WH}|{_AUX})\b", re.IGNORECASE)
_VERBISH_RE = re.compile(rf"\b(?:{_WH}|{_AUX}|i|i'm|i’m|my|you|we)\b", re.IGNORECASE)


def _enumeration_items(question: str) -> int:
    """Largest number of items of an "A, B(,) and C" list whose items are short noun phrases."""
    best = 0
    for m in _ENUM_RE.finditer(question):
        text = m.group(2)
        items = [s for s in re.split(r"\s*,\s+|\s+(?:and|or|&)\s+", text) if s.strip()]
        # a list of noun phrases, not clauses ("I'm a student, what is X and Y"); with a single
        # comma ("A, B and C") a list cue must introduce it ("such as", "of", ":" ...), since
        # "..., X or Y" is usually a clause followed by a two-way choice.
        introduced = m.group(1) is not None or len(re.findall(r",\s+", text)) >= 2
        if introduced and len(items) >= 3 and not any(_VERBISH_RE.search(it) for it in items):
            best = max(best, len(items))
    return best


def _strip_premise(question: str) -> str:
    """Drop a first-person premise before a dash ("I'm a nurse - what is X?" → "what is X?")."""
    m = _PREMISE_RE.match(question)
    if m and _FIRST_PERSON_RE.search(m.group("premise")) and _FIRST_Q_RE.search(m.group("rest")):
        return m.group("rest")
    return question


def _question_parts(question: str) -> int:
    """Number of questions in the text: ``?``-terminated sentences, or clauses joined to a first one."""
    question = _strip_premise(question)
    sentences = [s for s in re.split(r"\?+", question) if re.search(r"\w", s)]
    n_q = sum(1 for s in sentences if _FIRST_Q_RE.search(s)) or 1
    first = _FIRST_Q_RE.search(question)
    joined = len(_CLAUSE_RE.findall(question[first.end():])) if first else 0
    return max(n_q, 1 + joined)


def estimate_n_sub_questions(question: str, *, minimum: int = 2, maximum: int = 4) -> int:
    """How many sub-questions a multi-document question should be decomposed into.

    Counts (1) the questions it contains (after dropping a first-person premise before a
    dash, "I'm a nurse - ..."): ``?``-separated sentences with a wh-word or
    auxiliary, or a first question plus clauses joined by ``, ; ? - and also plus`` that
    start with a wh-word or an auxiliary ("..., and how does ..."); (2) the items of the
    longest enumeration of short noun phrases ("such as A, B and C", "A, B, C, or D";
    a one-comma list needs a cue such as "of", "like", "between" or ":"). Returns the
    larger count, clamped to ``[minimum, maximum]``.

    Args:
        question: the question text (classified as multi-document).
        minimum: lower bound, default 2 (PreQRAG §2.2.2 uses exactly 2, so a question with
            no visible structure keeps the paper's behaviour).
        maximum: upper bound, default 4 (more sub-questions cost one retrieval each and
            the LLM's decomposition gets unreliable).

    Returns:
        An ``int`` in ``[minimum, maximum]``: 2 for most questions (a comparison of two
        things, two aspects), 3 or 4 for enumerations or three/four joined questions.

    Raises:
        ValueError: ``minimum < 1`` or ``maximum < minimum``.
    """
    if minimum < 1 or maximum < minimum:
        raise ValueError(f"need 1 <= minimum <= maximum, got minimum={minimum}, maximum={maximum}")
    n = max(_question_parts(question), _enumeration_items(question))
    return max(minimum, min(maximum, n))
