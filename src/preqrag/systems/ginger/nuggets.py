"""Information-nugget detection (UiS-IAI@LiveRAG §3.2, prompt of Appendix B.2).

The paper's LLM copies a passage and wraps the excerpts that answer the question in
``<START>`` … ``</END>`` tags "without changing any part of the original text"
(:func:`parse_nuggets` reads such replies). Here the call declares a schema instead
(:func:`nugget_schema`, :data:`NUGGET_FORMAT`): the reply lists up to three of the passage's
own sentences as JSON, so it always parses and every nugget is verbatim
(:func:`parse_nugget_reply`). The reply is
untrusted, so :func:`parse_nuggets` keeps only tagged excerpts found **verbatim** in the
passage, and a nugget's text is always the passage's own span (``passage[start:end]``): the
generator never works on text the LLM altered. When no passage of a question yields a nugget,
:func:`fallback_nugget` takes each passage's sentence closest to the question (a recorded
fallback; extractive, so still verbatim).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...components.selection import sentence_scores
from ...core.text import content_words, split_sentences

# Appendix B.2, verbatim.
NUGGET_SYSTEM = ("You are given a query and a relevant passage. Your task is to pinpoint and annotate the succinct "
                 "excerpts within the passage that directly respond to the query. Ensure these excerpts are brief "
                 "yet complete. Once identified, copy the entire passage and encapsulate the relevant snippets "
                 "using <START> and </END> tags without changing any part of the original text. This includes "
                 "avoiding modifications to words, punctuation, or formatting, as well as not adding any extra "
                 "characters, symbols, or spaces.")
NUGGET_USER = "Question: {query} Passage: {passage}"
NUGGET_FORMAT = ('\nReply with JSON: {{"nuggets": [<the relevant excerpts, each copied from the passage>]}}')
"""Not in the paper: appended to the user message. The reply is constrained by
:func:`nugget_schema` to 1..:data:`MAX_NUGGETS_PER_PASSAGE` of the passage's own sentences
(JSON Schema ``enum``), instead of the passage copied whole with ``<START>``/``</END>`` tags:
a small model cannot copy a 500-token passage verbatim, and a grammar over free copying
would not stop it from changing the text. Deviation: a nugget is a whole sentence (at most
:data:`FALLBACK_MAX_WORDS` words, a verbatim prefix), not an arbitrary span."""
NUGGETS_KEY = "nuggets"
MAX_NUGGETS_PER_PASSAGE = 3
"""Nuggets a passage may yield (the schema's ``maxItems``): "brief yet complete" excerpts."""

_SPAN = re.compile(r"<START>(.*?)(?:</END>|</START>|<END>)", re.I | re.S)
_TAG = re.compile(r"</?\s*(?:START|END)\s*>", re.I)

FALLBACK_MAX_WORDS = 60
"""A fallback sentence longer than this is cut to its first 60 words (still a verbatim prefix)."""


@dataclass(frozen=True)
class Nugget:
    """A verbatim excerpt of context passage ``passage`` (0-based): ``text == passage_text[start:end]``."""

    text: str
    passage: int
    start: int
    end: int


def locate(excerpt: str, passage: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``excerpt`` in ``passage``: an exact match, else a match that only
    differs in whitespace (runs of spaces/newlines), else ``None``."""
    i = passage.find(excerpt)
    if i >= 0:
        return i, i + len(excerpt)
    words = excerpt.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), passage)
    return (m.start(), m.end()) if m else None


def parse_nuggets(reply: str, passage: str, passage_index: int) -> tuple[list[Nugget], list[str]]:
    """The verbatim nuggets of an annotation reply.

    Spans between ``<START>`` and ``</END>`` (also accepted as closing tags: ``</START>``,
    ``<END>``) are stripped of stray tags and whitespace, then rejected when they have no
    letter or digit (``unparsable``), are not in the passage (``not in passage``: the LLM
    altered the text) or repeat an earlier nugget (``duplicate``).

    Returns:
        ``(nuggets, rejected)``: nuggets in reply order, each the passage's own span; one
        reason per rejected span, or ``["no tags"]`` / ``["empty"]`` when the reply has none.
    """
    if not reply.strip():
        return [], ["empty"]
    spans = _SPAN.findall(reply)
    if not spans:
        return [], ["no tags"]
    return keep_verbatim([_TAG.sub("", span) for span in spans], passage, passage_index)


def keep_verbatim(excerpts: list, passage: str, passage_index: int) -> tuple[list[Nugget], list[str]]:
    """The excerpts found in ``passage`` as nuggets (each the passage's own span, in order), and
    one reason per rejected excerpt: ``unparsable`` (no letter or digit, or not a string),
    ``not in passage`` (the LLM altered the text), ``duplicate`` (the same span again)."""
    out: list[Nugget] = []
    rejected: list[str] = []
    seen: set[tuple[int, int]] = set()
    for item in excerpts:
        text = item.strip() if isinstance(item, str) else ""
        if not re.search(r"[A-Za-z0-9]", text):
            rejected.append("unparsable")
            continue
        where = locate(text, passage)
        if where is None:
            rejected.append("not in passage")
            continue
        if where in seen:
            rejected.append("duplicate")
            continue
        seen.add(where)
        out.append(Nugget(passage[where[0]:where[1]], passage_index, *where))
    return out, rejected


def _sentence_spans(passage: str) -> list[tuple[int, int]]:
    spans = []
    pos = 0
    for s in split_sentences(passage):
        i = passage.find(s, pos)
        if i < 0:  # pragma: no cover - split_sentences returns substrings
            continue
        end = i + len(s)
        words = list(re.finditer(r"\S+", s))
        if len(words) > FALLBACK_MAX_WORDS:
            end = i + words[FALLBACK_MAX_WORDS - 1].end()
        spans.append((i, end))
        pos = i + len(s)
    return spans


def fallback_nugget(question: str, passage: str, passage_index: int, encoder=None) -> Nugget | None:
    """The passage's sentence closest to ``question`` (cosine of the index embedder's vectors,
    or, without an embedder, the most content words in common), cut to
    :data:`FALLBACK_MAX_WORDS` words; ``None`` for a passage without text."""
    spans = _sentence_spans(passage)
    if not spans:
        return None
    texts = [passage[a:b] for a, b in spans]
    if encoder is not None and len(texts) > 1:
        q = encoder.encode([question], is_query=True)
        s = encoder.encode(texts, is_query=False)
        best = int(np.argmax(s @ q[0]))
    else:
        qw = content_words(question)
        best = max(range(len(texts)), key=lambda i: (len(content_words(texts[i]) & qw), -i))
    a, b = spans[best]
    return Nugget(passage[a:b], passage_index, a, b)


def candidate_excerpts(passage: str) -> list[str]:
    """The excerpts a nugget reply may choose from: the passage's sentences (each cut to
    :data:`FALLBACK_MAX_WORDS` words, a verbatim prefix), deduplicated, in passage order."""
    out: list[str] = []
    for a, b in _sentence_spans(passage):
        text = passage[a:b]
        if text.strip() and text not in out:
            out.append(text)
    return out


NUGGET_ITEM_TOKENS = 16
"""Reply tokens allowed beyond an excerpt's own for the JSON around it (quotes, comma, escapes)."""


def nugget_schema(passage: str, count=None, max_tokens: int | None = None) -> tuple[dict, int] | None:
    """The reply schema of a nugget call on ``passage`` and its reply budget in tokens.

    The schema is ``{"nuggets": [...]}`` holding 1..k items, each one of
    :func:`candidate_excerpts` (a JSON Schema ``enum``). With ``count`` (a token counter) and
    ``max_tokens`` (``[ginger] nugget_max_new_tokens``), only excerpts that fit the budget are
    offered and k (at most :data:`MAX_NUGGETS_PER_PASSAGE`) is as many copies of the longest as fit
    together (the grammar allows a repeated item: a 135M model repeats a long excerpt), so every
    reply the grammar allows closes inside its budget. Without them, k is
    :data:`MAX_NUGGETS_PER_PASSAGE` and the budget is estimated at 3 characters per token.

    Returns:
        ``(schema, budget)``, or None for a passage with no sentence (or none that fits).
    """
    from ...models.llm.structured import json_string_token_bound, string_list_field

    count = count or (lambda text: (len(text) + 2) // 3)
    limit = max_tokens if max_tokens is not None else 1 << 30
    # an excerpt costs at most the tokens of its JSON form as the grammar spells it (quotes and
    # newlines escaped, non-ASCII letters raw), with room for a model's odd token choices
    cost = {e: json_string_token_bound(e, count) for e in candidate_excerpts(passage)}
    excerpts = [e for e, n in cost.items() if n + 2 * NUGGET_ITEM_TOKENS <= limit]
    if not excerpts:
        return None
    # the grammar cannot forbid a repeated item (llama.cpp's schema converter has no uniqueItems),
    # so the longest reply it allows is k copies of the longest excerpt: budget for that
    longest = max(cost[e] for e in excerpts) + NUGGET_ITEM_TOKENS
    k = 1
    while k < min(MAX_NUGGETS_PER_PASSAGE, len(excerpts)) and NUGGET_ITEM_TOKENS + (k + 1) * longest <= limit:
        k += 1
    return string_list_field(NUGGETS_KEY, min_items=1, max_items=k, enum=excerpts), NUGGET_ITEM_TOKENS + k * longest


NUMBERED_FORMAT = ('\nThe passage\'s sentences are numbered. Reply with JSON: {{"nuggets": [<the numbers of '
                   'the sentences that respond to the query, at most {k}>]}}')
"""Not in the paper: appended to the user message when ``[ginger] nugget_reply = "numbers"``
(the default): the passage is shown as its numbered sentences (:func:`numbered_passage`) and the
reply names sentences by number (:func:`number_schema`), ~15 reply tokens instead of the
sentences copied out (~100-150 tokens a passage, each one a decoding step). The nuggets are the
same kind (whole verbatim sentences, :func:`candidate_excerpts`); only the reply is shorter."""
MAX_NUMBERED = 40
"""Sentences of a passage offered by number (a longer passage's later sentences are left out)."""
NUMBER_REPLY_TOKENS = 32
"""Reply budget of a numbered nugget call: ``{"nuggets": [12, 3, 27]}`` takes ~15 tokens."""


def best_in_order(scores, n: int) -> list[int]:
    """Indexes of the ``n`` highest ``scores`` (ties: the earlier), in their original order: a
    passage's best sentences as they stand in the passage."""
    return sorted(sorted(range(len(scores)), key=lambda j: (-scores[j], j))[:n])


def numbered_passage(passage: str, question: str = "", max_sentences: int | None = None
                     ) -> tuple[str, list[str]]:
    """``(text, excerpts)``: the passage's sentences (:func:`candidate_excerpts`, at most
    :data:`MAX_NUMBERED`), one per line as ``[i] sentence``, and the excerpts in that order.

    With ``max_sentences`` (``[ginger] nugget_sentences``; not in the paper), only that many are
    offered: those holding most of ``question``'s content words
    (:func:`preqrag.components.selection.sentence_scores`, the default generator's answer-bearing
    sentences; ties: the earlier sentence), still in passage order, so the prompt is shorter."""
    excerpts = candidate_excerpts(passage)[:MAX_NUMBERED]
    if max_sentences is not None and len(excerpts) > max_sentences:
        best = best_in_order(sentence_scores(question, [excerpts])[0], max_sentences)
        excerpts = [excerpts[j] for j in best]
    return "\n".join(f"[{i}] {e}" for i, e in enumerate(excerpts, 1)), excerpts


def number_schema(n: int) -> dict:
    """Reply schema of a numbered nugget call: ``{"nuggets": [...]}``, 1..
    :data:`MAX_NUGGETS_PER_PASSAGE` integers, each one of 1..``n`` (a JSON Schema ``enum``). One
    schema serves a batch (``n`` = its longest passage's sentence count), so the calls decode
    together; a number beyond a shorter passage's sentences is rejected when parsed."""
    item = {"type": "integer", "enum": list(range(1, max(1, n) + 1))}
    return {"type": "object",
            "properties": {NUGGETS_KEY: {"type": "array", "items": item, "minItems": 1,
                                         "maxItems": MAX_NUGGETS_PER_PASSAGE}},
            "required": [NUGGETS_KEY], "additionalProperties": False}


def parse_number_reply(reply: str, excerpts: list[str], passage: str,
                       passage_index: int) -> tuple[list[Nugget], list[str]]:
    """The verbatim nuggets a numbered reply (:func:`number_schema`) names: sentence ``i`` is
    ``excerpts[i - 1]``, kept as the passage's own span (:func:`keep_verbatim`). A number that is
    not one of the passage's sentences is rejected (``no such sentence``), a repeat too
    (``duplicate``).

    Returns:
        ``(nuggets, rejected)`` as :func:`parse_nugget_reply`.
    """
    from ...models.llm.structured import json_field

    items, err = json_field(reply, NUGGETS_KEY, list)
    if err:
        return [], [err]
    if not items:
        return [], ["no nuggets"]
    chosen: list[str] = []
    rejected: list[str] = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= len(excerpts):
            rejected.append("no such sentence")
        else:
            chosen.append(excerpts[x - 1])
    found, more = keep_verbatim(chosen, passage, passage_index)
    return found, rejected + more


def parse_nugget_reply(reply: str, passage: str, passage_index: int) -> tuple[list[Nugget], list[str]]:
    """The verbatim nuggets of a structured nugget reply (:func:`nugget_schema`).

    Each listed excerpt is located in the passage (:func:`locate`) and kept as the passage's
    own span; an excerpt with no letter or digit (``unparsable``), not in the passage (``not
    in passage``: a backend that ignored the schema) or repeated (``duplicate``) is rejected.

    Returns:
        ``(nuggets, rejected)``; ``rejected`` is ``["empty"]`` or ``["unparsable JSON: ..."]``
        when the reply did not parse, ``["no nuggets"]`` for an empty list.
    """
    from ...models.llm.structured import json_field

    items, err = json_field(reply, NUGGETS_KEY, list)
    if err:
        return [], [err]
    if not items:
        return [], ["no nuggets"]
    return keep_verbatim(items, passage, passage_index)
