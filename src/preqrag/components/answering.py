"""Answer-level helpers shared by the generators: the answer call's sampling options,
degenerate-answer detection and repair, and the extractive answerer (no LLM).

A 135M model under greedy decoding can loop ("The oil is ... environment." five times,
"1. 1. 2. 3. 4. 5."): :func:`degenerate` detects that and :func:`repair_answer` removes the
repeats or, when nothing sensible is left, answers extractively; the generator records it as
a fallback in the trace.
"""

from __future__ import annotations

import re

from .registry import Context, register
from ..core.config import GeneratorConfig
from ..core.contracts import Generated
from ..core.text import content_words, split_sentences, truncate_words


EXTRACTIVE_PROMPT = ("(extractive answer, no LLM call: the sentences of passage [1] that share the most content "
                     "words with the question, in passage order)\n\nQuestion: {question}")
"""The ``final_prompt`` of an extractive answer: no prompt was sent to any LLM, and it says so."""


class ExtractiveGenerator:
    """Answers without an LLM: the ``n_sentences`` sentences of the first context passage that
    share the most content words (stemmed, stopwords removed; the BM25 analyser's stemmer and
    stopwords) with the question, in passage order, at most ``max_words`` words. Ties go to
    the earlier sentence; a passage without any sentence boundary is used whole (cut to
    ``max_words``). Sentence split: :func:`preqrag.core.text.split_sentences`.

    ``generate`` returns one :class:`~preqrag.core.contracts.Generated` per question; its
    ``final_prompt`` is :data:`EXTRACTIVE_PROMPT` (no prompt was sent anywhere).
    """

    name = "extractive"

    def __init__(self, n_sentences: int = 2, max_words: int = 300):
        self.n_sentences = n_sentences
        self.max_words = max_words

    def answer(self, question: str, passage: str) -> str:
        """The extractive answer to ``question`` from ``passage`` ('' for an empty passage)."""
        sentences = split_sentences(passage)
        if not sentences:
            return truncate_words(passage, self.max_words)
        q = content_words(question)
        order = sorted(range(len(sentences)), key=lambda i: (-len(q & content_words(sentences[i])), i))
        chosen = sorted(order[:self.n_sentences])
        return truncate_words(" ".join(sentences[i] for i in chosen), self.max_words)

    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[Generated]:
        return [Generated(EXTRACTIVE_PROMPT.format(question=q), self.answer(q, c[0] if c else ""), [])
                for q, c in zip(questions, contexts)]


def _norm_sentence(text: str) -> str:
    """Lower-case letters and digits, single-spaced, without a leading list number ("2. ")."""
    return " ".join(re.findall(r"[a-z0-9]+", re.sub(r"^\s*\d{1,2}\s*[.)]\s*", "", text.lower())))


MIN_REPEATED_WORDS = 3
"""A sentence of fewer normalised words ("Yes.") may repeat without being a loop."""
NEAR_DUPLICATE = 0.8
"""Word-set Jaccard at which two sentences of 5+ words count as the same sentence reworded
("The proper way ..." / "The correct way ...": a loop with one word changed)."""


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    wa, wb = set(a.split()), set(b.split())
    if len(wa) < 5 or len(wb) < 5:
        return False
    return len(wa & wb) / len(wa | wb) >= NEAR_DUPLICATE


def first_occurrences(sentences: list[str]) -> list[int]:
    """Indexes of the sentences to keep when removing a loop: each sentence's first occurrence
    (repeats and near-duplicates by the rule of :func:`degenerate`), in order, without word-less
    pieces such as a bare list number ("2.")."""
    keys: list[str] = []
    kept: list[int] = []
    for i, sentence in enumerate(sentences):
        key = _norm_sentence(sentence)
        if not re.search(r"[a-z]{2,}", key) or any(_same(k, key) for k in keys):
            continue
        keys.append(key)
        kept.append(i)
    return kept


def degenerate(answer: str) -> str | None:
    """Why ``answer`` is degenerate (a small model looping under greedy decoding), or None.

    * ``no words``: nothing but numbering, bullets and punctuation ("1. 1. 2. 3. 4. 5.");
    * ``repeated sentence xN``: a sentence of at least :data:`MIN_REPEATED_WORDS` words occurs
      N >= 2 times (normalised: lower case, letters and digits, no leading list number; two
      sentences of 5+ words with word-set Jaccard >= :data:`NEAR_DUPLICATE` count as the same);
    * ``repeated phrase``: a 4-word phrase occurs 3+ times and its repeats cover at least
      half the answer's words (a loop inside one long sentence).
    """
    if not re.findall(r"[A-Za-z]{2,}", answer):
        return "no words"
    seen: list[list] = []  # [key, count]
    for sentence in split_sentences(answer):
        key = _norm_sentence(sentence)
        if len(key.split()) < MIN_REPEATED_WORDS:
            continue
        for entry in seen:
            if _same(entry[0], key):
                entry[1] += 1
                break
        else:
            seen.append([key, 1])
    worst = max((n for _, n in seen), default=0)
    if worst >= 2:
        return f"repeated sentence x{worst}"
    tokens = _norm_sentence(answer).split()
    grams: dict[tuple[str, ...], int] = {}
    for i in range(len(tokens) - 3):
        g = tuple(tokens[i:i + 4])
        grams[g] = grams.get(g, 0) + 1
    top = max(grams.values(), default=0)
    if top >= 3 and top * 4 >= len(tokens) / 2:
        return "repeated phrase"
    return None


RESTATED = 0.8
"""Word-set Jaccard between an answer and its question from which the answer only restates the
question ("Yes, exercise and gut health can improve mood."): measured on 200 dev questions with
Qwen2.5-Coder-1.5B, 7 of 200 default answers were such restatements (docs/results/answers.md)."""

EXPLAIN_RESTATED = ("Explain briefly, using only the context: give the facts that support your answer, "
                    "in 1-3 sentences.")
"""The follow-up turn asked when an answer only restates the question (``[generator]
explain_restated``); its reply is appended to the answer."""


def restates_question(answer: str, question: str) -> bool:
    """Whether ``answer`` only restates ``question``: the word sets (lower-case letters and
    digits) have Jaccard similarity >= :data:`RESTATED`. A yes/no question answered "Yes, <the
    question as a statement>." carries no fact a reader can check."""
    a = set(re.findall(r"[a-z0-9]+", answer.lower()))
    q = set(re.findall(r"[a-z0-9]+", question.lower()))
    return bool(a) and len(a & q) / len(a | q) >= RESTATED


def repair_answer(question: str, answer: str, passages: list[str], max_words: int = 300) -> tuple[str, str | None]:
    """``(answer, fallback)``: the answer unchanged when it is not :func:`degenerate`; else its
    sentences with repeats (and word-less pieces such as a bare "2.") removed, first occurrences
    in order, when that is no longer degenerate and has 3+ words; else the extractive answer from
    the first passage (:class:`ExtractiveGenerator`). ``fallback`` says what happened (None when
    nothing did)."""
    why = degenerate(answer)
    if why is None:
        return answer, None
    sentences = split_sentences(answer)
    repaired = " ".join(sentences[i] for i in first_occurrences(sentences))
    if len(re.findall(r"[A-Za-z]{2,}", repaired)) >= 3 and degenerate(repaired) is None:
        return truncate_words(repaired, max_words), f"generate: degenerate answer ({why}); repeats removed"
    extractive = ExtractiveGenerator(max_words=max_words).answer(question, passages[0] if passages else "")
    return extractive, f"generate: degenerate answer ({why}); extractive answer from passage [1] used"


_ENDED = re.compile(r"(?<!\s\d)(?<!\s\d\d)(?<!^\d)(?<!^\d\d)[.!?][\"')\]*]*(?:\s*\[\d+(?:,\s*\d+)*\])?(?=\s|$)",
                    re.M)
"""A sentence end: ``.``, ``!`` or ``?`` before white space or the end, not after a one- or
two-digit number (a list item's ``4.`` is no end; ``in 1998.`` is), with closing quotes,
brackets or markdown emphasis, and an optional citation marker (``. [2]``)."""


def drop_unfinished_sentence(answer: str) -> tuple[str, bool]:
    """``answer`` without its last, unfinished sentence, and whether one was dropped.

    For an answer cut by a cap (``[generator] max_new_tokens``, 200 as PreQRAG §2.5 asks, or
    ``max_words``), which ends mid-sentence ("... adjust your pricing accordingly. [2] 4.
    **Competitive Activity**: This data helps you monitor the"): the reader gets the complete
    sentences before it. The caller decides that the cap was reached (a finished answer may end a
    list item without a full stop). An answer that ends with a sentence end (:data:`_ENDED`), or
    has no complete sentence before its last words, is returned unchanged.
    """
    text = answer.rstrip()
    ends = list(_ENDED.finditer(text))
    if not ends or ends[-1].end() == len(text):
        return answer, False
    return text[:ends[-1].end()], True


COPY_WORDS = 12
"""Consecutive words an answer sentence must share with a passage to count as a verbatim copy
(:func:`copied_sentences`): long enough that a shared name or phrase does not count."""


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def copied_sentences(sentences: list[str], passages: list[str], n: int = COPY_WORDS) -> list[bool]:
    """For each answer sentence: does it hold ``n`` consecutive words of one passage (compared
    lower-cased, letters and digits only, so punctuation and markers do not hide a copy)?
    A sentence shorter than ``n`` words is never a copy.

    Returns:
        One bool per sentence, in order.
    """
    grams: set[tuple[str, ...]] = set()
    for p in passages:
        w = _words(p)
        grams.update(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    out = []
    for s in sentences:
        w = _words(s)
        out.append(any(tuple(w[i:i + n]) in grams for i in range(len(w) - n + 1)))
    return out


def answer_options(cfg: GeneratorConfig) -> dict:
    """The answer call's sampling keyword arguments from ``[generator]``: ``temperature`` and
    those of ``top_p``, ``top_k``, ``repeat_penalty`` that are set (the others: ``[llm]``'s)."""
    out = {"temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k,
           "repeat_penalty": cfg.repeat_penalty}
    return {k: v for k, v in out.items() if v is not None}


@register("generator", "extractive")
def _extractive(ctx: Context) -> ExtractiveGenerator:
    """No LLM: passage 1's sentences closest to the question (the deadline's last level)."""
    return ExtractiveGenerator(ctx.cfg.deadline.extractive_sentences, ctx.cfg.generator.max_words)
