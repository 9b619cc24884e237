"""Combined LLM + rules classifier (PreQRAG §2.1, Table 1 "Combined").

The paper combined Falcon3-10B-Instruct with the rule-based classifier without saying
how. We implement it as a logical OR: a question is ``"multi"`` when the published rules
say multi **or** the LLM says multi. The OR favours "multi", which follows §2.1's remark
that a multi-document question classified as single costs more than the reverse. When the
LLM reply is unusable, only the rules decide and the LLM's fallback reason is kept.
"""

from __future__ import annotations


from ...core.records import Classification
from ...core.contracts import LLM
from .llm import MAX_TOKENS, LLMClassifier
from .rules import is_multi_by_rules


class CombinedClassifier:
    """``multi`` if rules OR LLM say multi.

    Args:
        llm: the LLM.
        max_tokens: reply budget of the LLM classifier.
    """

    name = "combined"

    def __init__(self, llm: LLM, max_tokens: int = MAX_TOKENS) -> None:
        self.llm_classifier = LLMClassifier(llm, max_tokens)

    def classify(self, questions: list[str]) -> list[Classification]:
        """Classify each question.

        Args:
            questions: ``n`` question texts.

        Returns:
            ``n`` Classification objects (``classifier="combined"``, ``score=None``;
            ``fallback`` set when the LLM reply was unusable and the rules alone decided).
        """
        llm_out = self.llm_classifier.classify(questions)
        out: list[Classification] = []
        for q, c in zip(questions, llm_out):
            rules_multi = is_multi_by_rules(q)
            llm_multi = c.fallback is None and c.question_type == "multi"
            out.append(Classification(question_type="multi" if rules_multi or llm_multi else "single",
                                      classifier=self.name, fallback=c.fallback))
        return out
