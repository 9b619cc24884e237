"""LLM-based single/multi-document classifier (PreQRAG §2.1, Table 1 "Falcon3-10B-Inst").

PreQRAG first asked Falcon3-10B-Instruct whether a question needs one or several
documents (0.822 single / 0.730 multi accuracy on the authors' data). The paper does not
publish that prompt; :data:`SYSTEM_PROMPT`, :data:`USER_TEMPLATE` and :data:`FEW_SHOT` are
ours. The call declares the choice :data:`CHOICES` as its output schema (constrained
decoding), and the reply is still parsed strictly (:func:`parse_reply`): only a reply that is the word
``single`` or
``multi`` (optionally ``single-document``/``multi-document``, any case, surrounding
punctuation or quotes allowed) is accepted. Anything else, or a failed LLM call, falls
back to the published rules (:mod:`.rules`) and names the reason in
``Classification.fallback``.
"""

from __future__ import annotations

import re

from ...core.records import Classification, QuestionType
from ...core.contracts import LLM, LLMError
from .rules import is_multi_by_rules

SYSTEM_PROMPT = (
    "You are a question classifier for a search system. Decide whether answering the question "
    "needs information from a single document or from several different documents "
    "(for example a comparison of two things, or a question with several unrelated parts). "
    "Answer with exactly one word: single or multi."
)
USER_TEMPLATE = "Question: {question}"
FEW_SHOT: tuple[tuple[str, str], ...] = (
    ("What is the boiling point of water at sea level?", "single"),
    ("How do the diets of lions and polar bears differ?", "multi"),
    ("What are the symptoms of measles, and how did the MMR vaccine change its spread in Europe?", "multi"),
    ("When was the Eiffel Tower built?", "single"),
)
"""Example turns (written for this prompt, not taken from any evaluation set). Without them
SmolLM2-135M-Instruct answered with sentences ("This question does not require one
document.") that no strict parser can accept; with them its replies are one word."""
CHOICES: tuple[str, ...] = ("single", "multi")
"""The reply schema: a choice between the two words (a llama.cpp grammar / ``response_format``
enum), so every reply of a backend that enforces it parses."""
MAX_TOKENS = 8
"""Room for ``multi-document`` plus punctuation; a longer reply is unparsable anyway."""

_REPLY_RE = re.compile(r"^[\s\"'`*.:\-]*(single|multi)(?:[- ]?doc(?:ument)?s?)?[\s\"'`*.!]*$", re.IGNORECASE)


def parse_reply(reply: str) -> QuestionType | None:
    """Strictly parse an LLM reply.

    Args:
        reply: the raw reply text.

    Returns:
        ``"single"`` or ``"multi"``, or ``None`` when the reply is anything else (e.g.
        ``"single or multi"``, a sentence, an empty string).
    """
    m = _REPLY_RE.match(reply or "")
    return None if m is None else m.group(1).lower()  # type: ignore[return-value]


def messages_for(question: str) -> list[dict]:
    """The chat messages sent for one question (OpenAI-style): system, few-shot turns, question."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for q, a in FEW_SHOT:
        messages += [{"role": "user", "content": USER_TEMPLATE.format(question=q)}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": USER_TEMPLATE.format(question=question)})
    return messages


class LLMClassifier:
    """Ask an LLM whether each question needs one or several documents.

    Args:
        llm: the LLM (``preqrag.core.contracts.LLM``: ``name``, ``chat_many``; it loads its model on
            first use or at ``warm_up``).
        max_tokens: reply budget (default :data:`MAX_TOKENS`).
    """

    name = "llm"

    def __init__(self, llm: LLM, max_tokens: int = MAX_TOKENS) -> None:
        self.llm = llm
        self.max_tokens = max_tokens

    def classify(self, questions: list[str]) -> list[Classification]:
        """Classify each question with one LLM call (greedy, ``temperature=0``).

        Args:
            questions: ``n`` question texts.

        Returns:
            ``n`` Classification objects (``classifier="llm"``, ``score=None``). When the
            reply is unparsable or the call failed, the published rules decide and
            ``fallback`` is ``"llm: unparsable reply: '...'"`` or ``"llm: error: ..."``.
        """
        if not questions:
            return []
        replies = self.llm.chat_many([messages_for(q) for q in questions], max_tokens=self.max_tokens,
                                     temperature=0.0, schema=list(CHOICES))
        out: list[Classification] = []
        for q, reply in zip(questions, replies):
            if isinstance(reply, LLMError):
                reason = f"llm: error: {str(reply)[:200]}"
                parsed = None
            elif isinstance(reply, str):
                parsed = parse_reply(reply)
                reason = f"llm: unparsable reply: {reply[:80]!r}"
            else:  # a backend returning something else is treated as unparsable
                parsed = None
                reason = f"llm: unexpected reply type {type(reply).__name__}"
            if parsed is not None:
                out.append(Classification(question_type=parsed, classifier=self.name))
            else:
                fb: QuestionType = "multi" if is_multi_by_rules(q) else "single"
                out.append(Classification(question_type=fb, classifier=self.name, fallback=reason))
        return out
