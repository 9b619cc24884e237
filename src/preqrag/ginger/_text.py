"""Small text helpers shared by the GINGER components: sentence splitting, content words,
fitting a text to a token budget."""

from __future__ import annotations

import re

from ..generation import approx_tokens, truncate_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[a-z0-9]+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after ``.``, ``!`` or ``?`` (and closing quotes/brackets)
    followed by whitespace and an upper-case letter or digit. A rule, not a model: enough for
    citing the LLM's own sentences; abbreviations ("e.g. The") may split wrongly. Empty pieces
    are dropped; each sentence is stripped."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


_STEMMER = None


def content_words(text: str) -> set[str]:
    """Stems (Snowball English, PyStemmer: the stemmer BM25 uses) of the lower-cased
    alphanumeric words longer than 2 characters that are not English stopwords (bm25s' list),
    so that "reef" and "reefs" count as the same word."""
    global _STEMMER
    from bm25s.stopwords import STOPWORDS_EN

    if _STEMMER is None:
        import Stemmer

        _STEMMER = Stemmer.Stemmer("english")
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOPWORDS_EN]
    return set(_STEMMER.stemWords(words))


def token_counter(llm):
    """The LLM's own token counter (``count_tokens``) when it has one, else
    :func:`preqrag.generation.approx_tokens` (conservative: 3 characters per token)."""
    return getattr(llm, "count_tokens", None) or approx_tokens


def cap_tokens(text: str, max_tokens: int, count) -> tuple[str, bool]:
    """``(text cut to max_tokens tokens by whole words, whether it was cut)``."""
    if count(text) <= max_tokens:
        return text, False
    return truncate_tokens(text, max_tokens, count), True


def llm_window(llm, default: int = 4096) -> int:
    """The LLM's context window in tokens (``context_window``), else ``default``."""
    return int(getattr(llm, "context_window", None) or default)
