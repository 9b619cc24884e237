"""One small protocol per pipeline stage.

Implementations are interchangeable and chosen by name in the configuration
(:mod:`preqrag.config`; :meth:`preqrag.pipeline.Pipeline.from_config` builds them).
Each follows the Haystack 2.x convention: ``__init__`` stores configuration only (cheap,
no model loading); the work (and lazy model loading) happens in the methods below.
All batch methods take and return lists of equal length, in input order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, Union, runtime_checkable

import numpy as np

from .records import Classification, QueryPlan, QuestionType, Ranking


class LLMError(RuntimeError):
    """An LLM call failed (connection, timeout, server error) after its retries."""


class UnsupportedFeature(RuntimeError):
    """A backend cannot do what the configuration asks (e.g. an OpenAI-compatible server that
    refuses ``response_format`` JSON schemas). Not a per-question failure: the run stops with
    this one message instead of recording the same fallback for every question."""


PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    TypeError, AttributeError, NameError, AssertionError, NotImplementedError, ImportError, SyntaxError,
    UnsupportedFeature)
"""Exceptions that signal a bug or a configuration that cannot work, not bad data or a failed
model call: the pipeline lets them surface at once instead of retrying question by question
and recording failures."""


class StageError(RuntimeError):
    """A stage failed on data or a model call (not a bug): ``stage`` names the slot and
    ``__cause__`` is the original exception. The pipeline isolates these per question."""

    def __init__(self, stage: str, cause: BaseException):
        self.stage = stage
        super().__init__(f"{type(cause).__name__}: {cause}")


OutputSchema = Union[dict, list[str], tuple[str, ...]]
"""The declared shape of an LLM reply (:mod:`preqrag.llm.structured`):

* a JSON Schema (``dict``): the reply is JSON text that satisfies it (``json.loads`` it);
* a choice (``list``/``tuple`` of strings): the reply is exactly one of the strings.

The llama.cpp backend compiles it into a grammar that constrains decoding, so every reply
parses; the OpenAI-compatible backend sends it as ``response_format`` ``json_schema``."""


@runtime_checkable
class LLM(Protocol):
    """A chat LLM. ``messages`` are OpenAI-style ``[{"role", "content"}]``.

    Every method takes the same keyword arguments:

    * ``max_tokens``: the reply budget in tokens;
    * ``temperature`` (default 0.0: greedy decoding, PreQRAG App. B.2);
    * ``schema``: an :data:`OutputSchema` the reply must follow (None: free text);
    * ``seed``: the sampling seed (None: the backend's fixed default 0, so a call repeats;
      give different seeds for independent samples, e.g. DoTA-RAG's routing votes);
    * ``top_p``, ``top_k``, ``repeat_penalty``: sampling settings for this call (None: the
      ``[llm]`` table's values; PreQRAG App. B.2 Table B.2, DoTA-RAG §2.1/§2.2).
    """

    name: str

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
             schema: OutputSchema | None = None, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, repeat_penalty: float | None = None) -> str:
        """Return the assistant reply text. Raises LLMError on failure."""
        ...

    def chat_many(
        self, requests: list[list[dict]], *, max_tokens: int, temperature: float = 0.0,
        schema: OutputSchema | None = None, seed: int | None = None, top_p: float | None = None,
        top_k: int | None = None, repeat_penalty: float | None = None,
    ) -> list[str | LLMError]:
        """Answer many conversations (concurrently where the backend allows).

        A failed request yields its LLMError in place of the text; the others are unaffected.
        """
        ...


def chat_each(llm: LLM, requests: list[list[dict]], *, max_tokens: int,
              temperature: float = 0.0, **options) -> list[str | LLMError]:
    """``chat_many`` for backends that serve one request at a time: calls ``llm.chat`` on
    each conversation in order with the same options (``schema``, ``seed``, ...); a request
    whose ``chat`` raises LLMError yields that error in place (other exceptions propagate).
    Returns ``len(requests)`` items."""
    results: list[str | LLMError] = []
    for messages in requests:
        try:
            results.append(llm.chat(messages, max_tokens=max_tokens, temperature=temperature, **options))
        except LLMError as e:
            results.append(e)
    return results


@runtime_checkable
class Classifier(Protocol):
    """Single- vs multi-document question classifier (PreQRAG §2.1)."""

    name: str

    def classify(self, questions: list[str]) -> list[Classification]: ...


@runtime_checkable
class Rewriter(Protocol):
    """Turns a classified question into a QueryPlan (PreQRAG §2.2)."""

    name: str

    def plan(self, questions: list[str], types: list[QuestionType]) -> list[QueryPlan]: ...


@runtime_checkable
class Encoder(Protocol):
    """Text → L2-normalised embeddings, ``float32`` array of shape ``(n, dim)``."""

    name: str
    dim: int
    max_seq_length: int

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class Retriever(Protocol):
    """Top-k passage retrieval for a batch of queries."""

    name: str

    def search(self, queries: list[str], k: int) -> list[Ranking]: ...


@runtime_checkable
class Fusion(Protocol):
    """Merges several rankings of the same query into one."""

    name: str

    def fuse(self, rankings: list[Ranking]) -> Ranking: ...


@runtime_checkable
class Reranker(Protocol):
    """Cross-encoder relevance scores for (query, passage) pairs; higher is more relevant."""

    name: str

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Return ``float32`` scores of shape ``(len(pairs),)``."""
        ...


@runtime_checkable
class Generator(Protocol):
    """Writes the grounded answer; returns ``(final_prompt, answer, truncations)`` per
    question (:class:`preqrag.generation.Generated`)."""

    name: str

    def generate(self, questions: list[str], contexts: list[list[str]]) -> list[tuple[str, str | LLMError, list[str]]]: ...


@runtime_checkable
class RerankStep(Protocol):
    """One link of the rerank chain: maps each sub-query's ranking to a new ranking.

    ``queries[i]`` is the text ``rankings[i]`` is ranked against (the original question);
    ``text_of`` gives a passage's text by id. A step owns its sorting and its cut (e.g.
    the cross-encoder keeps the ``depth`` head). Its output is recorded in the trace under
    ``trace_key``; its time and failures under ``stage``.
    """

    name: str
    stage: str
    trace_key: str

    def rerank(self, queries: list[str], rankings: list[Ranking],
               text_of: Callable[[str], str]) -> list[Ranking]: ...
