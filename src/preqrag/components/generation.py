"""Grounded answer generation (PreQRAG §2.5, Appendix B.3).

The prompt is one user message: the Appendix B.3 instruction (prompt B, "role-based",
by default), the numbered context passages, and the question. That message is the
``final_prompt`` reported in the LiveRAG answer: exactly the text sent to the LLM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .registry import Context, register
from ..core.config import ConfigError, GeneratorConfig
from .selection import select_sentences
from ..core.text import approx_tokens, truncate_tokens, truncate_words  # noqa: F401  (re-exported)
from ..core.contracts import LLM, Generated, LLMError

LOCAL_ANSWER_REPEAT_PENALTY = 1.1
"""The answer's repetition penalty with the in-process llama.cpp backend when neither
``[generator]`` nor ``[llm]`` sets one: with Qwen2.5-Coder-1.5B on 200 dev questions, degenerate
answers 6 % -> 2 %, token F1 0.314 -> 0.318 (with the restated-answer follow-up), ROUGE-L 0.249 ->
0.247 (docs/bench/answers.json). Not sent to an OpenAI-compatible server unless set: OpenAI's API
has no such parameter. PreQRAG's greedy decoding (App. B.2) is kept."""

CHAT_TEMPLATE_MARGIN = 32
"""Tokens reserved for the chat template around the user message (SmolLM2's adds ~10)."""




class FittedPrompt(NamedTuple):
    """A prompt that fits the LLM's window: ``text``; what was cut (``truncations``, e.g.
    ``"passages 12-20 dropped: the prompt was 4100 tokens over the window"``,
    ``"passage 11: 512 -> 130 tokens"``, ``"question: 200740 -> 960 tokens"``; empty when
    nothing was); and ``n_passages``, how many passages the prompt holds: always the first
    ``n_passages`` of those given (dropped passages are the lowest-ranked, missing from the end),
    so passage ``i`` keeps its 1-based number ``i`` and a citation must lie in 1 … ``n_passages``."""

    text: str
    truncations: list[str]
    n_passages: int


MIN_PASSAGE_TOKENS = 32
"""A passage shortened to fit the window keeps at least this many tokens, else it is dropped
(a few words of a passage cannot ground an answer)."""


def fit_prompt(question: str, passages: list[str], *, prompt: str, count: Callable[[str], int],
               window: int, max_new_tokens: int, max_passage_tokens: int,
               builder: Callable[[str, list[str]], str] | None = None) -> FittedPrompt:
    """Build the generation prompt so that it plus ``max_new_tokens`` fits ``window`` tokens.

    ``builder(question, passages)`` renders the prompt; ``None`` = :func:`build_prompt` with
    instruction ``prompt`` (other generators, e.g. CIR's, pass their own). ``passages`` are in
    importance order (the last is the lowest-ranked).

    1. Each passage is cut to ``max_passage_tokens`` (``[generator] max_passage_tokens``).
    2. If the prompt still overflows, the question is kept whole and passages go from the end:
       the longest prefix of passages that fits with the whole question is kept, the next passage
       is shortened to the room left (kept when at least :data:`MIN_PASSAGE_TOKENS` remain) and
       the rest are dropped. Kept passages keep their numbers (``FittedPrompt.n_passages``).
    3. Only when no passage fits at all is the question cut (to the window).

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
    total = count(text)
    if total <= budget:
        return FittedPrompt(text, cuts, len(passages))
    if count(builder("", [])) >= budget:
        raise ValueError(f"the LLM window ({window} tokens) cannot hold the instruction and "
                         f"{max_new_tokens} new tokens; raise llm.n_ctx or lower generator.max_new_tokens")

    def fits(n: int) -> bool:
        return count(builder(question, passages[:n])) <= budget

    # the longest prefix of whole passages that fits beside the whole question (binary search:
    # the prompt grows with every passage added)
    lo, hi = -1, len(passages)  # fits(lo) holds (lo = -1: nothing fits, not even the question), fits(hi) not
    if fits(0):
        lo = 0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
    kept = list(passages[:max(lo, 0)])
    if lo >= 0:
        # shorten the next passage to the room left, if enough of it fits
        nxt = passages[lo]
        part = truncate_tokens(nxt, budget, lambda p: count(builder(question, kept + [p])))
        if part.strip() and count(part) >= MIN_PASSAGE_TOKENS:
            cuts.append(f"passage {lo + 1}: {count(nxt)} -> {count(part)} tokens")
            kept.append(part)
    n = len(kept)
    if n < len(passages):
        gone = {f"passage {i}: " for i in range(n + 1, len(passages) + 1)}
        cuts = [c for c in cuts if not any(c.startswith(g) for g in gone)]  # a dropped passage's cap
        which = f"passage {n + 1}" if n + 1 == len(passages) else f"passages {n + 1}-{len(passages)}"
        cuts.append(f"{which} dropped: the prompt was {total - budget} tokens over the window")
    if not kept:  # no passage fits beside the question: only now is the question cut
        q_tokens = count(question)
        question = truncate_tokens(question, budget, lambda q: count(builder(q, [])))
        if count(question) < q_tokens:
            cuts.append(f"question: {q_tokens} -> {count(question)} tokens")
    return FittedPrompt(builder(question, kept), cuts, n)

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



class LLMGenerator:
    """Answers with an LLM, greedy decoding (Appendix B.2), at most ``max_new_tokens`` tokens.

    The prompt is fitted to the LLM's context window (:func:`fit_prompt`): the LLM's own
    tokenizer counts tokens where it has one (``count_tokens``, llama.cpp), else
    :func:`approx_tokens`; the window is the LLM's ``context_window`` (``llm.n_ctx``).
    ``generate`` returns one :class:`Generated` per question.

    With ``cfg.context_tokens > 0`` the prompt holds each passage's answer-bearing sentences
    (:func:`preqrag.components.selection.select_sentences`), scored by ``sentence_scorer`` -- a cross-encoder
    with ``score(pairs: list[tuple[str, str]]) -> ndarray (n,)`` (the pipeline's reranker,
    ``[generator] sentence_scorer``) -- or, when it is None, by question-word overlap; the trace's
    truncations say per passage what was kept and by which scorer.
    """

    name = "llm"

    def __init__(self, llm: LLM, cfg: GeneratorConfig, sentence_scorer=None,
                 default_repeat_penalty: float | None = None):
        self.llm = llm
        self.cfg = cfg
        self.sentence_scorer = sentence_scorer
        self.default_repeat_penalty = default_repeat_penalty  # when neither table sets one

    @property
    def _score(self):
        """``(question, sentences) -> scores`` for :func:`select_sentences`: the cross-encoder's
        logits when one was given, else None (question-word overlap)."""
        ce = self.sentence_scorer
        if ce is None:
            return None
        return lambda q, sentences: ce.score([(q, s) for s in sentences]) if sentences else []

    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[Generated]:
        llm = self.llm
        count, window = llm.count_tokens, llm.context_window
        selected: list[tuple[list[str], list[str]]] = [
            select_sentences(q, c, max_tokens=self.cfg.context_tokens, count=count, scorer=self._score)
            if self.cfg.context_tokens
            else (c, []) for q, c in zip(questions, contexts)]
        fitted = [fit_prompt(q, s, prompt=self.cfg.prompt, count=count, window=window,
                             max_new_tokens=self.cfg.max_new_tokens,
                             max_passage_tokens=self.cfg.max_passage_tokens)
                  for q, (s, _) in zip(questions, selected)]
        from .answering import answer_options, drop_unfinished_sentence, repair_answer

        options = answer_options(self.cfg)
        if "repeat_penalty" not in options and self.default_repeat_penalty is not None:
            options["repeat_penalty"] = self.default_repeat_penalty
        replies = llm.chat_many([[{"role": "user", "content": f.text}] for f in fitted],
                                max_tokens=self.cfg.max_new_tokens, **options)
        explained = self._explain_restated(questions, fitted, replies, options)
        by = ", by the cross-encoder" if self.sentence_scorer is not None else ", by question words"
        out = []
        for i, (q, c, f, r, (_, notes)) in enumerate(zip(questions, contexts, fitted, replies, selected)):
            fallbacks: tuple[str, ...] = ()
            cut_answer: list[str] = []
            if not isinstance(r, LLMError) and i in explained:  # "Yes, <the question>." + its facts
                r = f"{r.strip()} {explained[i]}"
                cut_answer.append("it restated the question; the facts asked for in a follow-up turn "
                                  "appended")
            if not isinstance(r, LLMError):  # a looping answer is repaired, and that recorded
                capped = count(r) >= self.cfg.max_new_tokens - 1 or len(r.split()) > self.cfg.max_words
                r, why = repair_answer(q, truncate_words(r, self.cfg.max_words), c[:f.n_passages],
                                       self.cfg.max_words)
                fallbacks = (why,) if why else ()
                r, unfinished = drop_unfinished_sentence(r) if capped and not why else (r, False)
                if unfinished:
                    cut_answer.append("its unfinished last sentence dropped (max_new_tokens or max_words "
                                      "reached)")
            cuts = ([f"generate: selected {t}{by}" for t in notes] + [f"generate: {t}" for t in f.truncations]
                    + [f"generate: answer: {t}" for t in cut_answer])
            out.append(Generated(f.text, r, cuts, n_passages=f.n_passages,
                                 fallbacks=fallbacks))
        return out

    def _explain_restated(self, questions: list[str], fitted: list[FittedPrompt], replies: list,
                          options: dict) -> dict[int, str]:
        """``{index: explanation}`` for the replies that only restate their question
        (:func:`preqrag.components.answering.restates_question`), when ``[generator] explain_restated``: one
        follow-up turn (:data:`preqrag.components.answering.EXPLAIN_RESTATED`) after the reply, in the same
        chat, so llama.cpp reuses the prompt's KV cache and only decodes the explanation. A
        follow-up that fails, loops or restates again is left out (the reply stays as it was)."""
        from .answering import EXPLAIN_RESTATED, degenerate, restates_question

        if not self.cfg.explain_restated:
            return {}
        todo = [(i, q, f, r) for i, (q, f, r) in enumerate(zip(questions, fitted, replies))
                if not isinstance(r, LLMError) and restates_question(r, q)]
        if not todo:
            return {}
        follow = self.llm.chat_many([[{"role": "user", "content": f.text}, {"role": "assistant", "content": r},
                                      {"role": "user", "content": EXPLAIN_RESTATED}] for _, _, f, r in todo],
                                    max_tokens=self.cfg.max_new_tokens, **options)
        return {i: e.strip() for (i, q, _, _), e in zip(todo, follow)
                if not isinstance(e, LLMError) and e.strip() and degenerate(e) is None
                and not restates_question(e, q)}


@register("generator", "preqrag")
def _preqrag(ctx: Context) -> LLMGenerator:
    """The PreQRAG generator; with ``context_tokens`` and a ``sentence_scorer`` other than
    ``words``, the pipeline's shared cross-encoder chooses the sentences.

    Raises:
        ConfigError: ``sentence_scorer = "cross-encoder"`` with ``[cross_encoder] name = "none"``.
    """
    g, scorer = ctx.cfg.generator, None
    if g.context_tokens and g.sentence_scorer != "words":
        from ..models.rerankers import shared_reranker

        scorer = shared_reranker(ctx)  # None when cross_encoder.name = 'none'
        if scorer is None and g.sentence_scorer == "cross-encoder":
            raise ConfigError("[generator] sentence_scorer = 'cross-encoder' needs a cross-encoder: "
                             "[cross_encoder] name is 'none' (set sentence_scorer = 'words' or 'auto')")
    llm = ctx.cfg.llm
    local = llm.backend == "llama-cpp" and llm.repeat_penalty is None
    return LLMGenerator(ctx.get_llm(), g, sentence_scorer=scorer,
                        default_repeat_penalty=LOCAL_ANSWER_REPEAT_PENALTY if local else None)
