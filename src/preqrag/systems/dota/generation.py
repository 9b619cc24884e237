"""DoTA-RAG context aggregation (§2.4) and answer generation (§2.5, Fig. 5).

* Aggregation: "Concatenate the text of the top-10 passages, separated by blank lines. If the
  concatenation exceeds 8k tokens, truncate passages proportionally." Here the budget is
  ``dota.context_tokens`` (8000) capped by what the LLM's window leaves for passages (window
  − ``generator.max_new_tokens`` − chat-template margin − the prompt without passages, the
  whole question included), and "proportionally" means every passage is cut by the same factor
  (a passage keeps ``floor(its tokens × budget / total tokens)``), so long passages give up the
  most. The question is never cut while passages can still give up tokens: only a question
  that alone leaves no room for any passage is cut (to the window).
* Answer-bearing sentences (not in the paper): with ``[generator] context_tokens`` > 0 each
  passage is first cut to its sentences that bear most on the question, that many tokens for
  all passages together (:func:`preqrag.components.selection.select_sentences`, scored by the pipeline's
  cross-encoder), as the default generator does: a 1.5B model on a CPU prefills ~110 tokens/s,
  so an 8k-token context costs over a minute per answer. ``context_tokens = 0`` keeps the
  paper's whole passages (docs/preset-dota.md has the rows of both).
* Generation: the Fig. 5 prompt, one user message (that text is the LiveRAG
  ``final_prompt``); the answer is cut to ``generator.max_words`` (300) words, LiveRAG's cap
  (§4.2, Table 3 "300-word cap"). Decoding is greedy by default (``[generator] temperature =
  0``); the authors' code samples at 0.8 (set ``[generator] temperature = 0.8`` to reproduce
  it; sampled calls are not cached). A degenerate (looping) answer is repaired and recorded
  (:func:`preqrag.components.answering.repair_answer`).
"""

from __future__ import annotations

from ...components.answering import answer_options, repair_answer
from ...core.config import GeneratorConfig
from .settings import DotaConfig
from ...components.generation import CHAT_TEMPLATE_MARGIN, Generated, truncate_tokens, truncate_words
from ...components.selection import select_batch
from ...core.contracts import LLM, LLMError

PROMPT = """You are a helpful assistant.

Context:
{passages}

Question:
{query}"""
"""DoTA-RAG Fig. 5 (Generation prompt), verbatim; ``{passages}`` is the aggregated context."""


def build_dota_prompt(question: str, passages: list[str]) -> str:
    """Fig. 5 with the passages joined by blank lines (§2.4)."""
    return PROMPT.format(passages="\n\n".join(p.strip() for p in passages), query=question)


def aggregate(question: str, passages: list[str], *, count, budget: int, room: int) -> tuple[str, list[str]]:
    """The Fig. 5 prompt with passages cut proportionally to fit.

    Args:
        count: token counter of the LLM.
        budget: tokens the passages may use together (``dota.context_tokens``).
        room: tokens the whole prompt may use (window − new tokens − template margin).

    Returns:
        ``(prompt, truncations)``; truncations name each cut, e.g. ``"passage 3: 900 -> 412 tokens"``.

    Raises:
        ValueError: ``room`` cannot hold the prompt without passages.
    """
    cuts: list[str] = []
    fixed = count(build_dota_prompt("", ["" for _ in passages]))
    if room - fixed <= 0:
        raise ValueError(f"the LLM window leaves {room} tokens for a prompt whose fixed part needs {fixed}; "
                         "raise llm.n_ctx or lower generator.max_new_tokens")
    q_tokens = count(question)
    if q_tokens > room - fixed:  # no room for any passage beside the whole question: only then is it cut
        question = truncate_tokens(question, room - fixed, count)
        cuts.append(f"question: {q_tokens} -> {count(question)} tokens")
    available = max(0, min(budget, room - fixed - count(question)))
    sizes = [count(p) for p in passages]
    total = sum(sizes)
    fitted = list(passages)
    factor = 1.0 if total <= available else available / total
    for _ in range(100):  # joins can merge tokens: shrink by 5% until the whole fits
        if factor < 1.0:
            fitted = [truncate_tokens(p, int(n * factor), count) if n else p for p, n in zip(passages, sizes)]
        text = build_dota_prompt(question, fitted)
        if count(text) <= room:
            break
        factor *= 0.95
    # joins can merge tokens: with no passage text left, trim the question until the whole fits
    while count(text) > room and question and not any(f.strip() for f in fitted):
        question = truncate_tokens(question, max(0, count(question) - 16), count)
        text = build_dota_prompt(question, fitted)
        cuts = [c for c in cuts if not c.startswith("question: ")]
        cuts.append(f"question: {q_tokens} -> {count(question)} tokens")
    if factor < 1.0:
        cuts += [f"passage {i}: {n} -> {count(f)} tokens" for i, (f, n) in enumerate(zip(fitted, sizes), 1)
                 if f != passages[i - 1]]
    return text, cuts


class DotaGenerator:
    """Generator ``dota``: §2.4 aggregation, Fig. 5 prompt, greedy, ``max_words`` cap.

    Args:
        llm: the shared LLM (``count_tokens`` and ``context_window`` used when present, else
            :func:`preqrag.components.generation.approx_tokens` and 4096).
        cfg: ``[generator]`` (``max_new_tokens``, ``max_words``, ``context_tokens``: > 0, the
            passages' answer-bearing sentences in that many tokens; 0, whole passages).
        dota: ``[dota]`` (``context_tokens``: the §2.4 budget the passages are cut to).
        sentence_scorer: a cross-encoder (``score(pairs) -> ndarray (n,)``) choosing the
            sentences, or None (question-word overlap).
    """

    name = "dota"

    def __init__(self, llm: LLM, cfg: GeneratorConfig, dota: DotaConfig, sentence_scorer=None):
        self.llm = llm
        self.cfg = cfg
        self.dota = dota
        self.sentence_scorer = sentence_scorer

    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[Generated]:
        llm = self.llm
        count, window = llm.count_tokens, llm.context_window
        room = window - self.cfg.max_new_tokens - CHAT_TEMPLATE_MARGIN
        notes: list[list[str]] = [[] for _ in questions]
        if self.cfg.context_tokens:  # each passage's answer-bearing sentences (preqrag.components.selection)
            contexts, notes = select_batch(questions, contexts, max_tokens=self.cfg.context_tokens, count=count,
                                           cross_encoder=self.sentence_scorer)
        fitted = [aggregate(q, c, count=count, budget=self.dota.context_tokens, room=room)
                  for q, c in zip(questions, contexts)]
        replies = llm.chat_many([[{"role": "user", "content": text}] for text, _ in fitted],
                                max_tokens=self.cfg.max_new_tokens, **answer_options(self.cfg))
        out = []
        for q, c, (text, cuts), r, picked in zip(questions, contexts, fitted, replies, notes):
            fallbacks: tuple[str, ...] = ()
            if not isinstance(r, LLMError):  # a looping answer is repaired, and that recorded
                r, why = repair_answer(q, truncate_words(r, self.cfg.max_words), c, self.cfg.max_words)
                fallbacks = (why,) if why else ()
            out.append(Generated(text, r, [f"generate: {t}" for t in picked + cuts], fallbacks=fallbacks))
        return out
