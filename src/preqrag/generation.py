"""Grounded answer generation (PreQRAG §2.5, Appendix B.3).

The prompt is one user message: the Appendix B.3 instruction (prompt B, "role-based",
by default), the numbered context passages, and the question. That message is the
``final_prompt`` reported in the LiveRAG answer: exactly the text sent to the LLM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .config import GeneratorConfig
from .stages import LLM, LLMError

CHAT_TEMPLATE_MARGIN = 32
"""Tokens reserved for the chat template around the user message (SmolLM2's adds ~10)."""

QUESTION_SHARE = 0.25
"""When a prompt overflows the window, the question keeps at most this share of the space
left after the instruction (the passages share the rest): the answer needs both."""


def approx_tokens(text: str) -> int:
    """A conservative token count for backends without a local tokenizer: one token per 3
    characters (English BPE averages ~4 characters per token)."""
    return (len(text) + 2) // 3


def truncate_tokens(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest whitespace-word prefix of ``text`` with ``count(prefix) <= max_tokens``
    (binary search over the number of words; ``count`` is called O(log words) times)."""
    if count(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


class FittedPrompt(NamedTuple):
    """A prompt that fits the LLM's window: ``text`` and what was cut (``truncations``,
    e.g. ``"question: 200740 -> 960 tokens"``; empty when nothing was)."""

    text: str
    truncations: list[str]


def fit_prompt(question: str, passages: list[str], *, prompt: str, count: Callable[[str], int],
               window: int, max_new_tokens: int, max_passage_tokens: int,
               builder: Callable[[str, list[str]], str] | None = None) -> FittedPrompt:
    """Build the generation prompt so that it plus ``max_new_tokens`` fits ``window`` tokens.

    ``builder(question, passages)`` renders the prompt; ``None`` = :func:`build_prompt` with
    instruction ``prompt`` (other generators, e.g. CIR's, pass their own).

    1. Each passage is cut to ``max_passage_tokens`` (``[generator] max_passage_tokens``).
    2. If the prompt still overflows, the question is cut to at most
       :data:`QUESTION_SHARE` of the space left after the instruction, and the passages
       share the rest equally (a short passage's unused share goes to the others).

    Raises:
        ValueError: the window cannot hold the instruction and ``max_new_tokens``.
    """
    cuts: list[str] = []

    def cut(label: str, text: str, limit: int) -> str:
        n = count(text)
        if n <= limit:
            return text
        out = truncate_tokens(text, limit, count)
        cuts.append(f"{label}: {n} -> {count(out)} tokens")
        return out

    if builder is None:
        def builder(q: str, ps: list[str]) -> str:
            return build_prompt(q, ps, prompt)

    passages = [cut(f"passage {i}", p, max_passage_tokens) for i, p in enumerate(passages, 1)]
    budget = window - max_new_tokens - CHAT_TEMPLATE_MARGIN
    text = builder(question, passages)
    if count(text) <= budget:
        return FittedPrompt(text, cuts)
    fixed = count(builder("", ["" for _ in passages]))
    room = budget - fixed
    if room <= 0:
        raise ValueError(f"the LLM window ({window} tokens) cannot hold the instruction and "
                         f"{max_new_tokens} new tokens; raise llm.n_ctx or lower generator.max_new_tokens")
    question = cut("question", question, max(1, int(room * QUESTION_SHARE)))
    room -= count(question)
    sizes = sorted(range(len(passages)), key=lambda i: count(passages[i]))
    fitted = list(passages)
    for rank, i in enumerate(sizes):
        share = max(0, room // (len(passages) - rank))
        fitted[i] = cut(f"passage {i + 1}", passages[i], share) if share else ""
        room -= count(fitted[i])
    text = builder(question, fitted)
    # Joining pieces can merge tokens differently; trim the question until the whole fits.
    while count(text) > budget and question:
        question = truncate_tokens(question, max(0, count(question) - 16), count)
        text = builder(question, fitted)
    return FittedPrompt(text, cuts)

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


class Generated(NamedTuple):
    """One generated answer: the ``final_prompt`` sent, the ``answer`` (an LLMError when the
    call failed), the ``truncations`` made to fit the LLM's window, and, for generators that
    cite, ``citations`` (per answer sentence: the 1-based numbers of the context passages it
    cites) and ``removed_citations`` (citations to numbers not in the context, dropped);
    ``fallbacks``: what the generator fell back on (e.g. ``"generate: unparsable JSON ..."``),
    appended to ``Trace.fallbacks`` by the pipeline."""

    final_prompt: str
    answer: str | LLMError
    truncations: list[str]
    citations: list[tuple[str, list[int]]] | None = None
    removed_citations: int = 0
    fallbacks: tuple[str, ...] = ()
    details: dict | None = None
    """A generator's own record of how it built the answer (GINGER: nuggets, clusters, fluency)."""


class LLMGenerator:
    """Answers with an LLM, greedy decoding (Appendix B.2), at most ``max_new_tokens`` tokens.

    The prompt is fitted to the LLM's context window (:func:`fit_prompt`): the LLM's own
    tokenizer counts tokens where it has one (``count_tokens``, llama.cpp), else
    :func:`approx_tokens`; the window is the LLM's ``context_window`` (``llm.n_ctx``).
    ``generate`` returns one :class:`Generated` per question.
    """

    name = "llm"

    def __init__(self, llm: LLM, cfg: GeneratorConfig):
        self.llm = llm
        self.cfg = cfg

    def generate(self, questions: list[str], contexts: list[list[str]]) -> list[Generated]:
        llm = self.llm
        count = getattr(llm, "count_tokens", None) or approx_tokens
        window = int(getattr(llm, "context_window", None) or 4096)
        fitted = [fit_prompt(q, c, prompt=self.cfg.prompt, count=count, window=window,
                             max_new_tokens=self.cfg.max_new_tokens,
                             max_passage_tokens=self.cfg.max_passage_tokens)
                  for q, c in zip(questions, contexts)]
        replies = llm.chat_many([[{"role": "user", "content": f.text}] for f in fitted],
                                max_tokens=self.cfg.max_new_tokens, temperature=0.0)
        return [Generated(f.text, r if isinstance(r, LLMError) else truncate_words(r, self.cfg.max_words),
                          [f"generate: {t}" for t in f.truncations])
                for f, r in zip(fitted, replies)]
