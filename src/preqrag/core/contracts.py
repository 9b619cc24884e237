"""One small protocol per pipeline stage.

Implementations are interchangeable and chosen by name in the configuration
(:mod:`preqrag.core.config`; :meth:`preqrag.run.pipeline.Pipeline.from_config` builds them).
Each follows the Haystack 2.x convention: ``__init__`` stores configuration only (cheap,
no model loading); the work (and lazy model loading) happens in the methods below.
All batch methods take and return lists of equal length, in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Union, runtime_checkable

import numpy as np

from .records import Classification, GenerationDetails, Passage, QueryPlan, QuestionType, Ranking


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


class FilterUnsupported(UnsupportedFeature):
    """A retriever backend asked to filter that cannot (see :class:`Retriever`): the
    configuration routes queries to namespaces (DoTA-RAG) over an index that has none."""


class StageError(RuntimeError):
    """A stage failed on data or a model call (not a bug): ``stage`` names the slot and
    ``__cause__`` is the original exception. The pipeline isolates these per question."""

    def __init__(self, stage: str, cause: BaseException):
        self.stage = stage
        super().__init__(f"{type(cause).__name__}: {cause}")


OutputSchema = Union[dict, list[str], tuple[str, ...]]
"""The declared shape of an LLM reply (:mod:`preqrag.models.llm.structured`):

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
      give different seeds for independent samples, e.g. DoTA-RAG's routing votes); in
      ``chat_many`` also a list, one seed per request (:func:`per_request_options`), so several
      samples of one conversation go in one call (a batching backend prefills it once);
    * ``top_p``, ``top_k``, ``repeat_penalty``: sampling settings for this call (None: the
      ``[llm]`` table's values; PreQRAG App. B.2 Table B.2, DoTA-RAG §2.1/§2.2).
    """

    name: str

    @property
    def context_window(self) -> int:
        """Tokens the model's context holds, prompt plus reply (``[llm] n_ctx``); generators fit
        their prompts to it (:func:`preqrag.components.generation.fit_prompt`)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's tokenizer; a backend without a local tokenizer
        (an OpenAI-compatible server) returns the conservative :func:`preqrag.core.text.approx_tokens`."""
        ...

    def warm_up(self) -> None:
        """Load the model now (llama.cpp: the GGUF weights; a server backend: nothing), so that
        a model that cannot load fails before the first question. Calls load it when not yet
        loaded."""
        ...

    def set_call_deadline(self, at: float | None) -> None:
        """Give the calls the calling thread makes from now on the deadline ``at`` (seconds since
        the epoch; None: none), for ``preqrag run --deadline``: the OpenAI-compatible backend's
        requests time out at ``at`` and are not retried past it; llama.cpp's batched calls end
        the sequences still decoding at ``at`` with an LLMError; a wrapper passes it on."""
        ...

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
             schema: OutputSchema | None = None, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, repeat_penalty: float | None = None) -> str:
        """Return the assistant reply text. Raises LLMError on failure."""
        ...

    def chat_many(
        self, requests: list[list[dict]], *, max_tokens: int, temperature: float = 0.0,
        schema: OutputSchema | None = None, seed: int | Sequence[int] | None = None,
        top_p: float | None = None, top_k: int | None = None, repeat_penalty: float | None = None,
    ) -> list[str | LLMError]:
        """Answer many conversations (concurrently where the backend allows).

        A failed request yields its LLMError in place of the text; the others are unaffected.
        """
        ...


def per_request_options(options: dict, n: int) -> list[dict]:
    """The options of each of ``n`` requests of a ``chat_many`` call: ``options`` as given,
    with a ``seed`` list split into one seed per request.

    Raises:
        ValueError: a ``seed`` list whose length is not ``n``.
    """
    seed = options.get("seed")
    if not isinstance(seed, (list, tuple)):
        return [options] * n
    if len(seed) != n:
        raise ValueError(f"chat_many: {len(seed)} seeds for {n} requests")
    return [{**options, "seed": s} for s in seed]


def chat_each(llm: LLM, requests: list[list[dict]], *, max_tokens: int,
              temperature: float = 0.0, **options) -> list[str | LLMError]:
    """``chat_many`` for backends that serve one request at a time: calls ``llm.chat`` on
    each conversation in order with the same options (``schema``, ``seed``, ...; a ``seed``
    list gives each its own, :func:`per_request_options`); a request whose ``chat`` raises
    LLMError yields that error in place (other exceptions propagate).
    Returns ``len(requests)`` items."""
    results: list[str | LLMError] = []
    for messages, opts in zip(requests, per_request_options(options, len(requests))):
        try:
            results.append(llm.chat(messages, max_tokens=max_tokens, temperature=temperature, **opts))
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

    def retriever(self, retriever: Retriever) -> Retriever:
        """The retriever the pipeline searches this rewriter's plans with: ``retriever`` itself,
        or a wrapper applying the rewriter's own policy on the filters its plans carry (DoTA-RAG's
        routed namespaces: :class:`preqrag.systems.dota.search.UnfilteredFallback`)."""
        ...


@runtime_checkable
class Encoder(Protocol):
    """Text → L2-normalised embeddings, ``float32`` array of shape ``(n, dim)``.

    ``learned_models``: a model fine-tuned on the user's questions (``preqrag train-encoder``) holds
    its identity (the dense retrievers over it report it, :class:`Retriever`); ``()`` for others.
    """

    name: str
    dim: int
    max_seq_length: int
    learned_models: Sequence[dict[str, str]]

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...

    def warm_up(self) -> None:
        """Load the model's weights now (encoding loads them when not yet loaded)."""
        ...


Filters = dict[str, list[str]]
"""A metadata filter: field → allowed values (a passage passes when, for every field, its
value is one of the listed ones), e.g. ``{"topic": ["health", "science"]}`` for DoTA-RAG's
routed namespaces. ``{}`` filters nothing."""


@runtime_checkable
class Retriever(Protocol):
    """Top-k passage retrieval for a batch of queries (Haystack's ``run(query, filters, top_k)``,
    batched).

    Every backend (BM25, dense, Milvus) takes the same arguments:

    * ``queries``: ``n`` query texts;
    * ``k``: the depth of each ranking (top-k);
    * ``filters``: ``None`` (nothing filtered) or ``n`` :data:`Filters`, one per query.

    Returns ``n`` :class:`~preqrag.core.records.Ranking` (best first; fewer than ``k`` ids when
    fewer passages match); a ranking's ``fallback`` (``""``: none) says what the retriever fell
    back on for its query, and the pipeline adds it to the plan's fallbacks. Raises
    :class:`FilterUnsupported` when a non-empty filter names a field the backend's index does
    not hold.

    ``learned_models``: the identities (``{"kind", "path", "sha256"}``) of the models trained on the
    user's questions it searches with (a dense retriever's encoder fine-tuned by ``preqrag
    train-encoder``), recorded in every trace (``Trace.learned_models``) so that evaluation
    refuses their training questions (:mod:`preqrag.learned.guard`); ``()`` for none.
    """

    name: str
    learned_models: Sequence[dict[str, str]]

    def search(self, queries: list[str], k: int,
               filters: Sequence[Filters] | None = None) -> list[Ranking]: ...


@runtime_checkable
class DenseRetriever(Retriever, Protocol):
    """A :class:`Retriever` over stored passage vectors (an index's ``dense``): the embedded
    FAISS index (:class:`preqrag.retrieval.dense.DenseRetriever`) or a Milvus collection."""

    def vectors(self, ids: list[str]) -> np.ndarray:
        """The stored vectors of passages ``ids``, float32 ``(len(ids), dim)`` in that order
        (what CIR's MMR compares, :mod:`preqrag.systems.cir.mmr`). Raises KeyError for an id not
        in the index."""
        ...


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

    def warm_up(self) -> None:
        """Load the model's weights now (scoring loads them when not yet loaded)."""
        ...


@dataclass
class Generated:
    """One generated answer, read by field name by the pipeline.

    Attributes:
        final_prompt: the prompt sent (the LiveRAG ``final_prompt``).
        answer: the answer text, or the LLMError when the call failed (the pipeline records
            the question's failure).
        truncations: what was cut to fit the LLM's window (``"generate: ..."`` notes).
        citations: for generators that cite, per answer sentence ``(sentence, [1-based
            numbers of the context passages it cites])``; ``None``: the generator does not cite.
        removed_citations: citations to numbers outside the context, dropped.
        fallbacks: what the generator fell back on (e.g. ``"generate: unparsable JSON ..."``),
            appended to ``Trace.fallbacks``.
        details: a multi-step generator's record of how it built the answer (GINGER: nuggets,
            clusters, cluster ranking, summaries, fluency pass), put in ``Trace.generation``.
        n_passages: how many context passages the prompt held (the first ``n_passages``; the
            others were dropped to fit the window); the pipeline keeps only those in
            ``Trace.context_ids`` and the answer's ``passages``. ``None``: all of them.
    """

    final_prompt: str
    answer: str | LLMError
    truncations: list[str] = field(default_factory=list)
    citations: list[tuple[str, list[int]]] | None = None
    removed_citations: int = 0
    fallbacks: tuple[str, ...] = ()
    details: GenerationDetails | None = None
    n_passages: int | None = None


@runtime_checkable
class Generator(Protocol):
    """Writes the grounded answer: one :class:`Generated` per question.

    ``contexts[i]`` are question ``i``'s passage texts in importance order; ``extras[i]`` its
    input record's extra fields (e.g. a TREC request's ``user_expertise``, CIR §2.2), or
    ``None`` when the caller has none. A failed LLM call is returned as the answer (an
    LLMError), not raised.
    """

    name: str

    def generate(self, questions: list[str], contexts: list[list[str]],
                 extras: list[dict] | None = None) -> list[Generated]: ...


@runtime_checkable
class Merger(Protocol):
    """The merge slot: one final passage ranking per question from its sub-queries' rankings.

    Args of :meth:`merge` (``n`` questions):

    * ``questions``: the question texts;
    * ``classifications``: the classifier's outputs;
    * ``rankings``: per question, trace key (``sparse``, ``dense``, ``merged``, a rerank
      step's key) → one uncut Ranking per sub-query;
    * ``finals``: per question, the rerank chain's output per sub-query.

    Returns per question ``(final ranking, extra trace rankings)`` (extra: trace key →
    rankings, e.g. the learned merge's document ranking; ``{}`` for none).

    ``learned_models``: the identities of the models trained on the user's questions it ranks
    with (the ``learned`` merge's ranker), as :class:`Retriever`'s; ``()`` for none.
    """

    name: str
    learned_models: Sequence[dict[str, str]]

    def merge(self, questions: Sequence[str], classifications: Sequence[Classification | None],
              rankings: Sequence[dict[str, list[Ranking]]], finals: Sequence[Sequence[Ranking]]
              ) -> list[tuple[Ranking, dict[str, list[Ranking]]]]: ...


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

    def warm_up(self) -> None:
        """Load the models the step scores with now (a step without one: nothing)."""
        ...


ROWS = "rows"
"""Index capability: passages are rows ``0..n-1`` with ids in ``passage_ids`` (topic facets,
BM25 pruning, learned features walk them)."""

FILTERS = "filters"
"""Index capability: its retrievers apply :data:`Filters` (facets over the rows)."""

HYBRID_SEARCH = "hybrid-search"
"""Index capability: ``hybrid_search`` fuses BM25 and dense inside the engine (Milvus RRF)."""


@runtime_checkable
class Index(Protocol):
    """An opened index backend (:func:`preqrag.index.backends.open_index`): the embedded bm25s + FAISS
    index, or a Milvus collection.

    Attributes:
        sparse: the BM25 :class:`Retriever`; ``dense``: the :class:`DenseRetriever` (``None`` for a
            BM25-only index); ``encoder``: the embedder the index was built with (or None).
        passages: passage id → :class:`~preqrag.core.records.Passage` (``passages[id]``).
        manifest: how it was built (corpus hash, chunking, models, sizes).
        capabilities: what the backend can do beyond the protocol (:data:`ROWS`,
            :data:`FILTERS`, :data:`HYBRID_SEARCH`); a component that needs one checks it when
            it is built, so a configuration that cannot work fails before the first question.
    """

    sparse: Retriever
    dense: DenseRetriever | None
    encoder: Encoder | None
    passages: Mapping[str, Passage]
    manifest: dict
    capabilities: frozenset[str]

    def text(self, passage_id: str) -> str:
        """The text of passage ``passage_id``. Raises KeyError for an unknown id."""
        ...
