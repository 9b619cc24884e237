"""CIR's settings tables (``[cir]``, ``[mmr]``) and its preset ``cir``.

The preset is CIR at TREC 2024 RAG's priority-1 run (Table 3, run 3): the raw question (CIR
rewrites nothing), BM25 + dense, cross-encoder, MMR with cosine similarity and λ = 0.5 over the
top j = 100 (§2.1), k = 8 passages (Table 1 has k = 20 and 50; 8 segments' answer-bearing
sentences in 512 LLM tokens answered better with the 1.5B default LLM: docs/preset-cir.md) to the P.1 expertise prompt (or the question's
``user_expertise``) with a cited JSON answer (§2.2). A question with its own pre-ranked
``candidates`` (a ragnarok request, CIR's task) is answered from the top k of them without
retrieval (``run.use_given_candidates``). docs/preset-cir.md lists the deviations.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...core.config import Section as _Section
from ...core.config import register_table
from ...core.presets import register_preset


class CIRConfig(_Section):
    """The 'cir' generator: expertise-adapted prompt and cited JSON answer (CIR at TREC 2024 RAG,
    §2.2, Table 2). See preqrag.systems.cir.generator and docs/preset-cir.md."""

    prompt: Literal["P.0", "P.1", "P.2", "P.3"] = Field("P.1", description=(
        "Expertise prompt of Table 2: P.0 none, P.1 beginner, P.2 expert, P.3 some foundational knowledge. "
        "P.1 is the paper's priority-1 run (Table 3, run 3)."))
    use_question_expertise: bool = Field(True, description=(
        "Choose the prompt per question from its 'user_expertise' field when present (novice -> P.1, "
        "expert -> P.2, intermediate -> P.3); questions without it use 'prompt'."))
    rewrite_copies: bool = Field(True, description=(
        "Not in the paper: an answer whose sentences copy 12+ consecutive words of a segment is written "
        "again in one more, short LLM turn (question + draft; preqrag.systems.cir.generator.REWRITE_PROMPT)."))
    paraphrase_copies: bool = Field(True, description=(
        "Not in the paper: an answer sentence that still copies 12+ consecutive words of a segment (after "
        "rewrite_copies) is said again in a short turn of its own (the sentence alone; "
        "preqrag.systems.cir.generator.PARAPHRASE_PROMPT), keeping its citations (docs/preset-cir.md has the rows)."))
    rewrite_min_sentences: int | None = Field(None, ge=1, le=12, description=(
        "Not in the paper: fewest sentences the rewrite turn's JSON schema allows (rewrite_copies); null: "
        "min_sentences, as the first answer. 1 lets the rewrite leave out a sentence that does not answer the "
        "query, as its prompt asks (preqrag.systems.cir.generator.REWRITE_PROMPT)."))
    answer_format: Literal["json", "text"] = Field("json", description=(
        "'json': the paper's output method (Table 2: 'give the output as a json'), a sentence list with each "
        "sentence's ids, constrained by a JSON schema; 'text' (not in the paper): sentences each followed by "
        "its ids in brackets ('... [1][3].'), unconstrained; one citation list per sentence either way "
        "(docs/preset-cir.md has the rows). min_sentences applies to 'json'."))
    min_sentences: int = Field(1, ge=1, le=12, description=(
        "Not in the paper: fewest sentences the answer's JSON schema allows (minItems; capped at what "
        "generator.max_new_tokens holds). The paper's 'short and concise sentences' make a 1.5B model answer in "
        "~30 words where the LiveRAG reference answers have ~80; a floor makes it state more of what the "
        "segments say (docs/preset-cir.md has the rows)."))
    max_sentences: int | None = Field(None, ge=1, le=12, description=(
        "Not in the paper: most sentences the answer's JSON schema allows (maxItems), also capped by what "
        "generator.max_new_tokens holds (300 characters + 24 tokens a sentence); null: only that cap. The cir "
        "preset allows 2: fewer tokens to decode in the first answer and in its rewrite, with the same token F1 "
        "(docs/preset-cir.md has the rows)."))


class MMRConfig(_Section):
    """The 'mmr' rerank step: Maximal Marginal Relevance diversification (CIR at TREC 2024 RAG,
    §2.1, Eq. 1; Carbonell & Goldstein 1998). Defaults: CIR's priority-1 run (Table 3, run 3:
    cosine, λ = 0.5, j = 100). See preqrag.systems.cir.mmr and docs/preset-cir.md."""

    lambda_: float = Field(0.5, ge=0.0, le=1.0, description=(
        "MMR λ: weight of relevance against (1 - λ) for dissimilarity to the passages already chosen; "
        "the paper's runs use 0.25, 0.5, 0.75, 1 (Table 1); 0.5 is its priority-1 run. 1 = no diversification."))
    similarity: Literal["cosine", "jaccard"] = Field("cosine", description=(
        "Passage-passage similarity (§2.1): 'cosine' of the index's stored dense vectors, mapped to [0, 1] "
        "as (1 + cos) / 2, or 'jaccard' over the BM25 terms (stopwords removed, stemmed, as the paper)."))
    top_j: int = Field(100, ge=1, description=(
        "Head of each ranking diversified and kept (the paper's j = 100, Table 1); after the cross-encoder "
        "it is at most cross_encoder.depth. The generator takes generator.context_top_k of it (the paper's k)."))
    relevance: Literal["scores", "similarity"] = Field("scores", description=(
        "MMR's relevance term: 'scores' = the incoming ranking's scores (the cross-encoder's) min-max "
        "normalised per ranking; 'similarity' = the paper's Sim1, the same similarity between query and passage."))


register_table("cir", CIRConfig)
register_table("mmr", MMRConfig)

register_preset("cir", {
    "rewriter": {"name": "none"}, "rerank": {"chain": ["cross-encoder", "mmr"]},
    "mmr": {"lambda_": 0.5, "similarity": "cosine", "top_j": 100, "relevance": "scores"},
    "generator": {"name": "cir", "context_top_k": 8, "max_new_tokens": 1024, "context_tokens": 512},
    "cir": {"prompt": "P.1", "use_question_expertise": True, "min_sentences": 2, "max_sentences": 2},
    "run": {"use_given_candidates": True}})
