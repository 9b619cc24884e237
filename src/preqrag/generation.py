"""Grounded answer generation (PreQRAG §2.5, Appendix B.3).

The prompt is one user message: the Appendix B.3 instruction (prompt B, "role-based",
by default), the numbered context passages, and the question. That message is the
``final_prompt`` reported in the LiveRAG answer: exactly the text sent to the LLM.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import GeneratorConfig
from .stages import LLM, LLMError

# PreQRAG Appendix B.3, verbatim.
INSTRUCTIONS = {
    "A": "Answer the question using only the provided context. Do not include any information not found "
         "in the context. Be concise. Keep the answer under 200 tokens.",
    "B": "You are an expert assistant. Use only the retrieved context to answer the question clearly and "
         "accurately. Do not speculate. Keep the answer under 200 tokens.",
    "C": "Based only on the provided context, answer the question in 1-3 sentences. Do not include any "
         "irrelevant information. Keep the answer under 200 tokens.",
    "D": "Use only the context to answer the question. If reasoning is needed, do so briefly before giving a "
         "clear final answer. Keep the answer under 200 tokens. Do not use outside knowledge.",
}


def build_prompt(question: str, passages: list[str], prompt: str = "B") -> str:
    """The generation prompt for ``question`` with ``passages`` (importance order)."""
    context = "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, 1))
    return f"{INSTRUCTIONS[prompt]}\n\nContext:\n{context}\n\nQuestion: {question}\nAnswer:"


def truncate_words(text: str, max_words: int) -> str:
    """The first ``max_words`` whitespace-separated words (LiveRAG reads only the first 300)."""
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


class LLMGenerator:
    """Answers with an LLM, greedy decoding (Appendix B.2), at most ``max_new_tokens`` tokens.

    ``generate`` returns, per question, ``(final_prompt, answer)``; the answer is an
    LLMError when the call failed (the pipeline records the question as failed).
    """

    name = "llm"

    def __init__(self, llm_factory: Callable[[], LLM], cfg: GeneratorConfig):
        self.llm_factory = llm_factory
        self.cfg = cfg
        self._llm: LLM | None = None

    def generate(self, questions: list[str], contexts: list[list[str]]) -> list[tuple[str, str | LLMError]]:
        if self._llm is None:
            self._llm = self.llm_factory()
        prompts = [build_prompt(q, c, self.cfg.prompt) for q, c in zip(questions, contexts)]
        replies = self._llm.chat_many([[{"role": "user", "content": p}] for p in prompts],
                                      max_tokens=self.cfg.max_new_tokens, temperature=0.0)
        return [(p, r if isinstance(r, LLMError) else truncate_words(r, self.cfg.max_words))
                for p, r in zip(prompts, replies)]
