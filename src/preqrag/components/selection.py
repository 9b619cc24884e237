"""Answer-bearing sentences of the context passages: a shorter prompt from the same passages.

The LLM's prefill is most of an answer's cost on a CPU (Qwen2.5-Coder-1.5B on 2 cores: ~160
prompt tokens/s with AVX-512, about half that with AVX2), and most sentences of a retrieved
passage do not bear on the question. :func:`select_sentences` keeps, of each passage, the
sentences that bear most on the question, within a token budget for the whole context:

1. each passage is split into sentences (:func:`preqrag.core.text.split_sentences`, ``"rules"``);
2. a sentence scores the IDF-weighted sum of the question's content words it holds
   (:func:`preqrag.core.text.content_words`: stemmed, stopwords removed; IDF over the sentences of
   the whole context, ``log(1 + n / df)``), so a rare question word counts more than a word
   every sentence has; or (``scorer``) a model scores each sentence against the question: the
   cross-encoder that reranked the passages (``[generator] sentence_scorer``), as RECOMP's
   extractive compressor scores sentences with a trained encoder;
3. the budget is shared out by rank: passage ``i`` of ``k`` may use what passages before it
   left plus ``budget / k``, so every passage keeps its best sentences (PreQRAG §2.5 answers
   from the top-3 passages; a multi-document question needs each);
4. within its share, a passage's sentences are taken best first (ties: the earlier sentence;
   with word overlap, sentences that share no question word fill the rest in text order, the
   first of them usually naming the topic) and a sentence that does not fit is skipped; when the best
   sentence alone exceeds the share, its head (cut to the share) is the passage;
5. the kept sentences are joined in text order, with ``" … "`` where sentences were left out.

A passage that fits its share whole is kept whole. The passages keep their numbers (the
prompt's ``[n]``), so citations and ``Trace.context_ids`` are unchanged; what was cut is
returned as notes for the trace (``"passage 2: 287 -> 118 tokens, 3 of 11 sentences"``).

This is the extractive context compression of RECOMP (Xu, Shi & Choi, ICLR 2024: select the
context sentences that best match the query) with a lexical scorer instead of a trained one (no
model call, only the LLM's tokenizer to count tokens), or with the pipeline's cross-encoder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..core.text import content_words, split_sentences, truncate_tokens

GAP = " … "
"""Joins two kept sentences that were not adjacent in the passage."""


def sentence_scores(question: str, sentences: list[list[str]]) -> list[list[float]]:
    """Per passage, per sentence: the IDF-weighted overlap with the question's content words
    (step 2 of the module docstring; IDF ``log(1 + n / df)`` over all the sentences given).

    Args:
        question: the question.
        sentences: per passage its sentences.

    Returns:
        One list of scores (floats >= 0, higher = more answer-bearing) per passage.
    """
    q = content_words(question)
    words = [[content_words(s) for s in sents] for sents in sentences]
    n = sum(len(w) for w in words) or 1
    df: dict[str, int] = {}
    for ws in words:
        for w in ws:
            for t in w & q:
                df[t] = df.get(t, 0) + 1
    idf = {t: math.log(1.0 + n / d) for t, d in df.items()}
    return [[sum(idf[t] for t in w & q) for w in ws] for ws in words]


def _join(kept: list[int], sents: list[str]) -> str:
    """The sentences ``kept`` (indexes, any order) in text order, :data:`GAP` between
    non-adjacent ones and at a cut start or end."""
    kept = sorted(kept)
    parts = [sents[kept[0]]]
    for a, b in zip(kept, kept[1:]):
        parts.append((" " if b == a + 1 else GAP) + sents[b])
    if kept[0] > 0:
        parts[0] = "… " + parts[0]
    if kept[-1] < len(sents) - 1:
        parts[-1] = parts[-1] + " …"
    return "".join(parts)


def _fit(kept: list[int], sents: list[str], scores: list[float], room: int, count) -> list[int]:
    """``kept`` without its lowest-scoring sentences while the joined text (gap marks
    included) exceeds ``room``; the best sentence always stays."""
    kept = list(kept)
    while len(kept) > 1 and count(_join(kept, sents)) > room:
        kept.remove(min(kept[1:], key=lambda j: (scores[j], -j)))
    return kept


def _model_scores(question: str, sentences: list[list[str]],
                  scorer: Callable[[str, list[str]], Sequence[float]]) -> list[list[float]]:
    """Per passage, per sentence: ``scorer(question, sentences)`` of all sentences in one call."""
    flat = [s for sents in sentences for s in sents]
    values = [float(v) for v in scorer(question, flat)]
    if len(values) != len(flat):
        raise ValueError(f"select_sentences: the scorer returned {len(values)} scores for {len(flat)} sentences")
    out, i = [], 0
    for sents in sentences:
        out.append(values[i:i + len(sents)])
        i += len(sents)
    return out


def select_sentences(question: str, passages: list[str], *, max_tokens: int,
                     count: Callable[[str], int],
                     scorer: Callable[[str, list[str]], Sequence[float]] | None = None
                     ) -> tuple[list[str], list[str]]:
    """The answer-bearing sentences of each passage, ``max_tokens`` LLM tokens in all.

    Args:
        question: the question the sentences are scored against.
        passages: the context passages, best first (``generator.context_top_k`` of them).
        max_tokens: tokens for all passages together (``generator.context_tokens``); each
            passage gets an equal share plus what the passages before it left unused.
        count: the LLM's token counter (:meth:`preqrag.core.contracts.LLM.count_tokens`).
        scorer: ``scorer(question, sentences) -> one score per sentence`` (higher = more
            answer-bearing), e.g. the cross-encoder's logits (``[generator] sentence_scorer =
            "cross-encoder"``); None (default): the IDF-weighted question-word overlap (step 2).

    Returns:
        ``(passages, notes)``: one text per passage, in the same order (a passage that fits its
        share is returned unchanged), and one note per shortened passage for the trace,
        ``"passage i: N -> M tokens, s of S sentences"`` (``i`` 1-based).

    Raises:
        ValueError: ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError(f"select_sentences: max_tokens must be >= 1, got {max_tokens}")
    if not passages:
        return [], []
    sentences = [split_sentences(p) or [p.strip()] for p in passages]
    scores = sentence_scores(question, sentences) if scorer is None else _model_scores(question, sentences, scorer)
    share, spare = max_tokens // len(passages), 0
    out, notes = [], []
    for i, (text, sents, sc) in enumerate(zip(passages, sentences, scores), 1):
        room = share + spare
        total = count(text)
        if total <= room:
            out.append(text)
            spare = room - total
            continue
        sizes = [count(s) for s in sents]
        order = sorted(range(len(sents)), key=lambda j: (-sc[j], j))
        best = order[0]
        if sizes[best] > room:  # not even the best sentence fits: its head, cut to the share
            head = truncate_tokens(sents[best], room, count)
            out.append(head)
            used = count(head) if head.strip() else 0
            notes.append(f"passage {i}: {total} -> {used} tokens, its best sentence cut")
            spare = max(room - used, 0)
            continue
        kept, used = [], 0
        for j in order:
            if used + sizes[j] <= room:
                kept.append(j)
                used += sizes[j]
        kept = _fit(kept, sents, sc, room, count)
        selected = _join(kept, sents)
        out.append(selected)
        n_sel = count(selected)
        notes.append(f"passage {i}: {total} -> {n_sel} tokens, {len(kept)} of {len(sents)} sentences")
        spare = max(room - n_sel, 0)
    return out, notes


def select_batch(questions: list[str], contexts: list[list[str]], *, max_tokens: int,
                 count: Callable[[str], int], cross_encoder=None) -> tuple[list[list[str]], list[list[str]]]:
    """:func:`select_sentences` for a batch of questions, each against its own passages, scored
    by ``cross_encoder`` (``score(pairs: list[tuple[str, str]]) -> ndarray (n,)``) or, when it is
    None, by question-word overlap.

    Returns:
        ``(contexts, notes)``: per question its passages cut to their answer-bearing sentences,
        and one trace note per shortened passage, ``"selected passage i: N -> M tokens, s of S
        sentences, by the cross-encoder"`` (or ``"by question words"``).
    """
    ce = cross_encoder
    score = (lambda q, ss: ce.score([(q, x) for x in ss]) if ss else []) if ce is not None else None
    by = "by the cross-encoder" if ce is not None else "by question words"
    selected = [select_sentences(q, c, max_tokens=max_tokens, count=count, scorer=score)
                for q, c in zip(questions, contexts)]
    return [c for c, _ in selected], [[f"selected {t}, {by}" for t in n] for _, n in selected]
