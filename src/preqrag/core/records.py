"""Typed, serialisable records exchanged between pipeline stages.

Every stage of the pipeline returns one of these pydantic models, so a run can be
inspected, cached (``model_dump_json``) and resumed (``model_validate_json``).

The answer format is the LiveRAG Challenge interchange format (SIGIR 2025 LiveRAG;
see ``shared/papers/README.md``): one JSON object per question with ``id``,
``question``, ``passages`` [{``passage``, ``doc_IDs``}], ``final_prompt`` and ``answer``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

QuestionType = Literal["single", "multi"]
"""Question class of PreQRAG §2.1: answerable from one document, or needing several."""


def doc_of(passage_id: str) -> str:
    """Document id of a passage id ``"{doc_id}#{position}"`` (document ids never contain ``#``);
    an id without ``#`` is returned unchanged (it is taken to be a document id)."""
    return passage_id.rsplit("#", 1)[0]


def docs_in_order(passage_ids: Iterable[str]) -> list[str]:
    """Map passage ids to document ids in rank order, keeping each document's first occurrence."""
    seen: set[str] = set()
    out: list[str] = []
    for pid in passage_ids:
        d = doc_of(pid)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


class Passage(BaseModel):
    """A chunk of one document, the unit that is indexed, retrieved and reranked.

    Attributes:
        id: passage id, ``"{doc_id}#{position}"``.
        doc_id: id of the source document (a FineWeb ``<urn:uuid:...>`` for LiveRAG).
        position: 0-based index of the passage inside its document.
        text: passage text (at most ``chunking.max_tokens`` embedder tokens).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    position: int = Field(ge=0)
    text: str


class Question(BaseModel):
    """An input question.

    ``id`` is kept with its original JSON type (LiveRAG uses integers, DataMorgana
    files use strings). Any other field of the input line (``answer``, ``gold_doc_ids``,
    DataMorgana categories ...) is kept in ``extra`` for evaluation.
    """

    id: str | int
    question: str = Field(min_length=1)
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """``str(id)``: the key used for resume and joins (``1`` and ``"1"`` are the same)."""
        return str(self.id)


class Classification(BaseModel):
    """Output of a question classifier (PreQRAG §2.1).

    Attributes:
        question_type: ``"single"`` or ``"multi"``.
        classifier: name of the classifier that decided.
        score: probability of ``"multi"`` when the classifier has one, else ``None``.
        fallback: set when the classifier could not decide and used its fallback
            (e.g. an unparsable LLM reply); names the reason.
    """

    question_type: QuestionType
    classifier: str
    score: float | None = None
    fallback: str | None = None


class SubQuery(BaseModel):
    """One retrieval unit: the text given to BM25 and the text given to dense retrieval.

    For a single-document question there is one SubQuery holding the sparse- and the
    dense-optimised rewrites (PreQRAG §2.2.1); for a multi-document question there is
    one per sub-question (§2.2.2), with ``sparse == dense == sub-question``. ``extra``
    queries go to every retriever too; all of a sub-query's lists are fused into one.
    """

    text: str
    sparse: str
    dense: str
    extra: list[str] = Field(default_factory=list, description=(
        "Further queries sent to every retriever and fused with the others (e.g. the original "
        "question when rewriter.keep_original is set)."))
    filters: dict[str, list[str]] = Field(default_factory=dict, description=(
        "Metadata filters for this sub-query's retrieval: facet -> allowed values (e.g. DoTA-RAG's routed "
        "namespaces, {'topic': ['Health', 'Politics']}, §2.2); retrievers that support filters search only "
        "the passages allowed. Empty: no filter."))


class Routing(BaseModel):
    """How a routed plan chose the part of the index its retrieval covers (the dense search, and
    BM25 when it is on; DoTA-RAG §2.2, :mod:`preqrag.systems.dota`).

    Attributes:
        voted: namespaces (topics) named by the valid LLM votes, most voted first.
        namespaces: the parts of the namespaces searched, best first (the plan's filter).
        fraction: share of the index's passages in them.
    """

    voted: list[str] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    fraction: float = Field(ge=0, le=1)


class QueryPlan(BaseModel):
    """Output of a rewriter: what to retrieve for one question.

    Attributes:
        question_type: the class the plan was made for.
        rewriter: name of the rewriter.
        sub_queries: one or more SubQuery (1 for single-doc, ``n`` sub-questions for multi-doc).
        fallbacks: one entry per LLM output that was rejected, e.g. ``"sparse: empty"``,
            ``"decompose: unparsable"``; the original question was used in its place.
        llm_outputs: raw LLM replies, for inspection.
        routing: how a routed plan chose its namespaces (:class:`Routing`), else None.
    """

    question_type: QuestionType
    rewriter: str
    sub_queries: list[SubQuery] = Field(min_length=1)
    fallbacks: list[str] = Field(default_factory=list)
    llm_outputs: dict[str, str] = Field(default_factory=dict)
    routing: Routing | None = Field(None, exclude_if=lambda v: v is None, description=(
        "A routed plan's namespace choice (DoTA-RAG); left out of the JSON when None."))


class Ranking(BaseModel):
    """A ranked list of passage ids with their scores, best first (like ``bm25s.Results``).

    ``len(ids) == len(scores)``; scores are comparable only within one ranking.
    """

    ids: list[str] = Field(default_factory=list)
    scores: list[float] = Field(default_factory=list)
    fallback: str = Field("", exclude=True, description=(
        "What the retriever fell back on for this query (e.g. DoTA-RAG's: a filter that left no passage, "
        "searched again without it); the pipeline adds it to the plan's fallbacks as '<trace key>: "
        "<fallback>'. '' (none) for every ranking but a retriever's; never in the JSON, and not kept by top()."))

    def top(self, k: int) -> "Ranking":
        """The first ``k`` entries (a new Ranking)."""
        return Ranking(ids=self.ids[:k], scores=self.scores[:k])

    def __len__(self) -> int:
        return len(self.ids)


class Citation(BaseModel):
    """One answer sentence and the context passages it cites (CIR §2; GINGER §3)."""

    sentence: str
    passage_ids: list[str] = Field(default_factory=list)


class NuggetRecord(BaseModel):
    """One information nugget (GINGER §3.2): a verbatim span of a context passage,
    ``passage_text[start:end] == text``."""

    text: str
    passage: int = Field(ge=1, description="1-based number of the context passage (Trace.context_ids order).")
    start: int = Field(ge=0, description="Character offset of the span in the passage's text.")
    end: int = Field(ge=0)


class ClusterRecord(BaseModel):
    """A cluster of nuggets (one facet of the answer, GINGER §3.2), in ranked order."""

    nuggets: list[int] = Field(description="Indices into GenerationDetails.nuggets.")
    passages: list[int] = Field(default_factory=list, description="1-based passages its nuggets come from.")
    text: str = Field("", description="The nuggets joined by '; ': what is ranked and summarised.")
    score: float | None = Field(None, description=(
        "The ranking score (pairwise: sym-sum); None when ranked by passage rank or alone."))


class SummaryRecord(BaseModel):
    """The answer sentence made for one cluster (GINGER §3.3, App. B.3)."""

    cluster: int = Field(description="Index into GenerationDetails.clusters.")
    text: str = Field(description="The sentence used (the LLM's summary, or the fallback).")
    fallback: str | None = Field(None, description=(
        "Why the LLM's summary was replaced by the cluster's first nugget (verbatim); None: the summary was used."))


class FluencyRecord(BaseModel):
    """The fluency pass (GINGER §3.3): the summaries before and the LLM's rephrasing after."""

    before: str
    after: str | None = Field(None, description="The rephrasing the LLM wrote (None: the call failed).")
    used: bool = Field(False, description="Whether the rephrasing is the answer (else the summaries are).")
    fallback: str | None = Field(None, description="Why the rephrasing was rejected.")


class GenerationDetails(BaseModel):
    """How a multi-step generator built the answer (``Trace.generation``): for GINGER the
    nuggets, their clusters in ranked order, the summary per cluster and the fluency pass."""

    generator: str
    nuggets: list[NuggetRecord] = Field(default_factory=list)
    clusters: list[ClusterRecord] = Field(default_factory=list, description="Best first.")
    cluster_ranking: str | None = Field(None, description="How clusters were ranked ('pairwise', 'passage-rank').")
    summaries: list[SummaryRecord] = Field(default_factory=list, description=(
        "One per summarised cluster (the top ones), in answer order, before the word cap."))
    fluency: FluencyRecord | None = Field(None, description="None when no fluency pass ran.")


class StageBatch(BaseModel):
    """How a stage ran for the batch a question was processed in: ``size`` questions together,
    ``seconds`` of wall time for all of them (the question's own share is in ``Trace.seconds``)."""

    size: int = Field(ge=1)
    seconds: float = Field(ge=0)


class Trace(BaseModel):
    """Per-question record of what every stage did (written to ``*.traces.jsonl``).

    Attributes:
        id: question id.
        classification: classifier output.
        plan: rewriter output.
        rankings: stage name (``sparse``, ``dense``, ``merged``, ``reranked``) → one
            Ranking per sub-query; ``final`` → a single-element list with the ranking
            whose head is given to the generator.
        context_ids: passage ids put in the prompt, in prompt order.
        seconds: stage name → this question's share of the stage's wall seconds: the batch's
            seconds divided by the batch size (stages run batched; see ``batches``).
        batches: stage name → the batch that stage ran in (:class:`StageBatch`: its size and wall
            seconds); the sum of a trace's batch seconds is the wall time from its batch's start to
            its answer.
        fallbacks: every fallback taken, across stages.
        truncations: what was cut to fit a model's context window (question, passages).
        citations: per answer sentence, the passages it cites (generators that cite);
            ``None`` for generators that do not.
        removed_citations: citations to passages that were not in the context, removed.
        degradation_level: the ``[deadline] levels`` index the question was answered at
            (``preqrag run --deadline``; 0 = the full pipeline, also for runs without a deadline).
        learned_models: trained models used (``preqrag train-ranker`` / ``train-encoder``); omitted
            from the JSON when empty.
        candidates: ``"given"`` when the context came from the question's own candidates (a
            ragnarok request's ``candidates``, ``[run] use_given_candidates``): retrieval was
            skipped. Omitted from the JSON when None (the context was retrieved).
        generation: a multi-step generator's record (:class:`GenerationDetails`; GINGER);
            omitted from the JSON when None.
    """

    id: str | int
    classification: Classification
    plan: QueryPlan
    rankings: dict[str, list[Ranking]] = Field(default_factory=dict)
    context_ids: list[str] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict, description=(
        "Stage -> this question's share of the stage's wall seconds (its batch's seconds / batch size)."))
    batches: dict[str, StageBatch] = Field(default_factory=dict, exclude_if=lambda v: not v, description=(
        "Stage -> the batch it ran in: its size and wall seconds for the whole batch."))
    fallbacks: list[str] = Field(default_factory=list)
    truncations: list[str] = Field(default_factory=list, description=(
        "What was cut to fit a model's window, e.g. 'generate: question: 200740 -> 960 tokens'."))
    citations: list[Citation] | None = None
    removed_citations: int = 0
    degradation_level: int = Field(0, ge=0, description=(
        "Index in [deadline] levels of what answered this question (0: the full pipeline; see "
        "preqrag.run.deadline); a question whose LLM call ran out of time records the extractive level."))
    learned_models: list[dict[str, str]] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "Trained models this answer used ({'kind': 'ranker' | 'encoder', 'path', 'sha256'}; see "
        "preqrag.learned.guard): evaluation refuses questions they were trained on. Left out of the JSON "
        "when empty, so traces of runs without learned models are unchanged."))
    candidates: Literal["given"] | None = Field(None, exclude_if=lambda v: v is None, description=(
        "'given': the context is the question's own candidates (ragnarok request 'candidates', in their "
        "order; [run] use_given_candidates) and retrieval was skipped (rankings hold 'given' and 'final'). "
        "Left out of the JSON when None (retrieved)."))
    generation: GenerationDetails | None = Field(None, exclude_if=lambda v: v is None, description=(
        "How the generator built the answer (GINGER: nuggets, ranked clusters, summaries, fluency pass). "
        "Left out of the JSON when None, so traces of other generators are unchanged."))


class LiveRAGPassage(BaseModel):
    """One supporting passage of a LiveRAG answer."""

    model_config = ConfigDict(extra="forbid")

    passage: str
    doc_IDs: list[str] = Field(min_length=1)


class LiveRAGAnswer(BaseModel):
    """One line of a LiveRAG answer file; ``extra="forbid"`` mirrors the challenge schema.

    ``passages`` are ordered by importance (the order they were given to the LLM).
    """

    model_config = ConfigDict(extra="forbid")

    id: str | int
    question: str
    passages: list[LiveRAGPassage]
    final_prompt: str
    answer: str


class Failure(BaseModel):
    """A question that could not be answered; written to ``*.failed.jsonl``."""

    id: str | int
    question: str
    error: str
    stage: str | None = None
