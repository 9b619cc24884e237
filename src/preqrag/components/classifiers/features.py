"""Hand-written structural features of a question, for the learned classifier.

Cheap surface cues of a question that needs several documents: two questions joined by a
conjunction ("..., and how ..."), enumerations ("X, Y and Z"), comparison words, several
named entities (capitalised spans), question marks, length, the three published PreQRAG
rules (§2.1) as separate flags. Pure Python + regular expressions, ~20 µs per question.
"""

from __future__ import annotations

import re

import numpy as np

from .rules import WH_WORDS, rule_flags

_WH = "|".join(WH_WORDS)
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_WH_RE = re.compile(rf"\b(?:{_WH})\b", re.I)
_AND_WH_RE = re.compile(rf"\b(?:and|but|also|while|plus)\s+(?:also\s+)?(?:{_WH}|is|are|does|do|did|can|could|should|would|will|has|have)\b", re.I)
_CLAUSE_SPLIT_RE = re.compile(rf"(?:[,;?]\s*|\s-\s)(?:and\s+|but\s+|also\s+|plus\s+)?(?:{_WH})\b", re.I)
_ENUM_RE = re.compile(r"\b[\w'’\-]+(?:\s+[\w'’\-]+){0,3},\s+[\w'’\-]+(?:\s+[\w'’\-]+){0,3},?\s+(?:and|or)\s+\w", re.I)
_COMPARE_RE = re.compile(
    r"\b(?:vs\.?|versus|compared?|comparing|comparison|contrast|similar(?:ities|ity)?|same|both|"
    r"differ\w*|whereas|while|unlike|alike|common|relationship|relate[sd]?|connection|"
    r"either|neither|better|worse|more|less|than|which\s+(?:one|is|was|has|had|came|requires))\b",
    re.I,
)
_BOTH_RE = re.compile(r"\bboth\b|\beach\b|\brespectively\b|\bas well as\b|\balong with\b", re.I)
_CAP_SPAN_RE = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][\w'’\-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’\-]*)*")
_PREMISE_RE = re.compile(r"^(?:i\b|i'm|i’m|i've|as\s+an?\b|as\s+someone|my\b|we\b|being\b)", re.I)

FEATURE_NAMES: tuple[str, ...] = (
    "rule_keyword", "rule_two_wh", "rule_starts_which",
    "n_qmarks", "n_wh", "n_and", "n_or", "n_commas", "and_wh", "clause_wh", "enumeration",
    "n_compare", "both_each", "n_cap_spans", "n_cap_spans_ge2", "n_words_log", "n_chars_log",
    "has_dash_premise", "premise_start", "no_qmark_no_wh",
)
"""Names of the columns of :func:`structural_features`, in order."""


def _features_one(question: str) -> list[float]:
    q = question.strip()
    words = _WORD_RE.findall(q)
    n_words = len(words)
    lower_words = [w.lower() for w in words]
    kw, two_wh, which = rule_flags(q)
    n_wh = len(_WH_RE.findall(q))
    caps = _CAP_SPAN_RE.findall(q)
    # drop the pronoun "I" and a capitalised first word of the question
    caps = [c for c in caps if c not in ("I", "I'm", "I’m", "I've", "I’ve", "I'd")]
    n_caps = len(set(caps))
    return [
        float(kw), float(two_wh), float(which),
        float(q.count("?")), float(n_wh), float(lower_words.count("and")), float(lower_words.count("or")),
        float(q.count(",")), float(len(_AND_WH_RE.findall(q))), float(len(_CLAUSE_SPLIT_RE.findall(q))),
        float(bool(_ENUM_RE.search(q))),
        float(len(_COMPARE_RE.findall(q))), float(len(_BOTH_RE.findall(q))),
        float(n_caps), float(n_caps >= 2), float(np.log1p(n_words)), float(np.log1p(len(q))),
        float(" - " in q or " – " in q), float(bool(_PREMISE_RE.match(q))),
        float("?" not in q and n_wh == 0),
    ]


def structural_features(questions: list[str]) -> np.ndarray:
    """Structural feature matrix.

    Args:
        questions: ``n`` question texts.

    Returns:
        ``float64`` array of shape ``(n, len(FEATURE_NAMES))``; counts are raw (scale them
        before a linear model), lengths are ``log1p``.
    """
    if not questions:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float64)
    return np.asarray([_features_one(q) for q in questions], dtype=np.float64)
