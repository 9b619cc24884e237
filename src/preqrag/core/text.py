"""Text helpers of the base layer, one of each: sentence splitting, content words, token
counts and cutting a text to a token or word budget. Used by the generators (PreQRAG, CIR,
DoTA-RAG, GINGER), the extractive answerer, the citation attributor and the API."""

from __future__ import annotations

import re

from collections.abc import Callable
from functools import lru_cache

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[a-z0-9]+")


def approx_tokens(text: str) -> int:
    """A conservative token count for backends without a local tokenizer: one token per 3
    characters (English BPE averages ~4 characters per token)."""
    return (len(text) + 2) // 3


def truncate_tokens(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest whitespace-word prefix of ``text`` with ``count(prefix) <= max_tokens``.

    ``count`` must grow with the prefix. It is called once on ``text``; then a galloping
    search (prefixes of ``max_tokens``, 2×, 4×, ... words until one overflows) bounds the
    answer and a binary search finds it, so ``count`` sees O(log max_tokens) prefixes no
    longer than twice the answer: a 200,000-word question cut to a 256-token window is
    tokenized whole once, not at every step of the search."""
    if count(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)  # words[:lo] fits; the answer is in [lo, hi]
    n = max(1, max_tokens)
    while n < hi:
        if count(" ".join(words[:n])) <= max_tokens:
            lo, n = n, 2 * n
        else:
            hi = n - 1
            break
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def truncate_words(text: str, max_words: int) -> str:
    """The first ``max_words`` whitespace-separated words (LiveRAG reads only the first 300)."""
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


def split_sentences(text: str, method: str = "rules") -> list[str]:
    """Sentences of ``text``, stripped, empty ones dropped; ``[]`` for blank text. The one
    sentence splitter of the package, two methods (bm25s-style ``method=``):

    * ``"rules"`` (default): split after ``.``, ``!`` or ``?`` (and closing quotes/brackets)
      followed by whitespace and an upper-case letter or digit. Returns substrings of ``text``
      (GINGER's nugget offsets rely on it); abbreviations ("e.g. The") may split wrongly.
      Used by GINGER, the extractive answerer and the degenerate-answer check.
    * ``"pysbd"``: rule-based sentence boundary detection of ``pysbd`` (Sadvilkar & Neumann,
      NLP-OSS 2020), which keeps abbreviations ("e.g.", "U.S.") and decimals inside their
      sentence. Used to attribute citations to answer sentences (:mod:`preqrag.components.citations`).

    Raises:
        ValueError: an unknown ``method``.
    """
    if method == "rules":
        return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    if method == "pysbd":
        if not text or not text.strip():
            return []
        return [s.strip() for s in _pysbd().segment(text) if s.strip()]
    raise ValueError(f"split_sentences: unknown method {method!r}; valid: rules, pysbd")


@lru_cache(maxsize=1)
def _pysbd():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


_STEMMER = None


def content_words(text: str, stem: bool = True) -> set[str]:
    """The lower-cased alphanumeric words longer than 2 characters that are not English stopwords
    (bm25s' list); with ``stem`` (default) their stems (Snowball English, PyStemmer: the stemmer
    BM25 uses), so that "reef" and "reefs" count as the same word. ``stem=False`` keeps the
    words as written (the rewrite checks compare them for typos, where a stem would hide them)."""
    global _STEMMER
    from bm25s.stopwords import STOPWORDS_EN

    words = [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOPWORDS_EN]
    if not stem:
        return set(words)
    if _STEMMER is None:
        import Stemmer

        _STEMMER = Stemmer.Stemmer("english")
    return set(_STEMMER.stemWords(words))


def word_support(text: str, source: str) -> float | None:
    """Share of ``text``'s :func:`content_words` (stems) that occur in ``source``'s, in ``[0, 1]``;
    None when ``text`` has no content word. How much of a rewritten sentence (a GINGER summary, a
    CIR paraphrase) the text it rewrites supports: a paraphrase keeps most words."""
    words = content_words(text)
    if not words:
        return None
    return len(words & content_words(source)) / len(words)


def cap_tokens(text: str, max_tokens: int, count) -> tuple[str, bool]:
    """``(text cut to max_tokens tokens by whole words, whether it was cut)``."""
    if count(text) <= max_tokens:
        return text, False
    return truncate_tokens(text, max_tokens, count), True


_REPLY_PREFIX = re.compile(r"^\s*(?:query|rewritten(?: question)?|search query|question|answer)\s*:\s*", re.I)


def clean_reply_line(text: str) -> str:
    """One line of an LLM reply without a label a small model puts first ("Query:", "Rewritten
    question:", ...) and without the quotes, backticks or asterisks around it."""
    text = _REPLY_PREFIX.sub("", text.strip())
    return text.strip().strip('"\'“”`* ').strip()
