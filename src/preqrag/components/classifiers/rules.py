"""The published rule-based single/multi-document classifier (PreQRAG §2.1, Table 1).

Kept exactly as published by the PreQRAG authors, for paper fidelity: a question is
``"multi"`` when its lower-cased text

1. contains any of the substrings :data:`MULTI_KEYWORDS` (plain substring test, so
   ``"differ"`` also matches ``"differs"``/``"different"``), or
2. has two or more whole-word occurrences of the wh-words :data:`WH_WORDS` (counted
   with repetition: "what ... what" counts twice), or
3. starts with ``"which"``;

otherwise it is ``"single"``. On ``liverag-bench/dev.jsonl`` this gives 0.782 accuracy on
gold-single and 0.520 on gold-multi questions (the README's reference figures; the paper
reports 0.731 / 0.953 on its own data).
"""

from __future__ import annotations

import re

from ...core.records import Classification

MULTI_KEYWORDS: tuple[str, ...] = (
    "differ", "difference", "different", "compare", "comparison", "between",
    "compare to", "compare between", "differ to", "difference between",
)
"""Substrings that mark a comparison question (as published)."""

WH_WORDS: tuple[str, ...] = ("what", "when", "where", "which", "who", "whom", "whose", "why", "how")
"""Question words; two or more whole-word occurrences mark a multi-part question."""

_WH_RE = re.compile(r"\b(?:" + "|".join(WH_WORDS) + r")\b")


def rule_flags(question: str) -> tuple[bool, bool, bool]:
    """The three published rules, separately.

    Args:
        question: the question text.

    Returns:
        ``(has_keyword, two_or_more_wh_words, starts_with_which)`` on the lower-cased text
        (leading/trailing whitespace stripped before the "starts with" test).
    """
    q = question.lower().strip()
    has_keyword = any(k in q for k in MULTI_KEYWORDS)
    many_wh = len(_WH_RE.findall(q)) >= 2
    starts_which = q.startswith("which")
    return has_keyword, many_wh, starts_which


def is_multi_by_rules(question: str) -> bool:
    """``True`` when any published rule fires (see the module docstring)."""
    return any(rule_flags(question))


class RulesClassifier:
    """Published PreQRAG rule-based classifier (§2.1, Table 1 "Rule Based").

    Pure Python, no state; ``classify`` never fails and returns ``score=None`` (the rules
    give no probability).
    """

    name = "rules"

    def __init__(self) -> None:
        pass

    def classify(self, questions: list[str]) -> list[Classification]:
        """Classify each question.

        Args:
            questions: ``n`` question texts.

        Returns:
            ``n`` Classification objects (``classifier="rules"``), in input order.
        """
        return [
            Classification(question_type="multi" if is_multi_by_rules(q) else "single", classifier=self.name)
            for q in questions
        ]
