"""The ``[ginger]`` table: GINGER's settings (registered with :func:`preqrag.core.config.register_table`),
and the preset ``ginger`` (:func:`preqrag.core.presets.register_preset`; docs/preset-ginger.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...core.config import Section as _Section
from ...core.config import register_table
from ...core.presets import register_preset


class GingerConfig(_Section):
    """GINGER (Łajewska et al., UiS-IAI@LiveRAG, SIGIR 2025 LiveRAG, arXiv 2506.22210): multi-query
    rewriting (§3.1, App. B.1), pairwise reranking (§3.1), nugget-based generation (§3.2-3.3, App. B.2-B.3).
    The number of passages nuggets are detected in (the paper's m) is ``generator.context_top_k``;
    the response word cap is ``generator.max_words``. See docs/preset-ginger.md."""

    n_rewrites: int = Field(3, ge=1, le=10, description=(
        "Query rewrites per question (the paper's l, §3.1; App. B.1 asks for 3; Table 1: original + 3 rewrites)."))
    answer_words: int = Field(100, ge=1, le=300, description=(
        "Words of the intermediate answer (App. B.1: 'a short answer' written without documents) that go into "
        "the rewrite prompt; its reply budget is what they take (preqrag.systems.ginger.rewriting."
        "answer_max_tokens), so words after them are not decoded. Not in the paper, which sets no length "
        "(docs/preset-ginger.md has the rows)."))
    query_mode: Literal["fuse", "concatenate"] = Field("fuse", description=(
        "'fuse': the original question and each rewrite are separate queries to BM25 and dense, all lists "
        "fused ([fusion]); 'concatenate': one search string (q + q'1) + ... + (q + q'l) as in §3.1 (long "
        "strings exceed the 256-token window of the default embedder)."))
    pairwise_model: str = Field("cross-encoder", description=(
        "Pairwise preference model of the 'pairwise' rerank step and of cluster ranking: 'cross-encoder' "
        "(offline stand-in: sigmoid of the difference of the [cross_encoder] cross-encoder's scores) or "
        "'castorini/duot5-base-msmarco' (the paper's DuoT5, §3.1; needs transformers and the model hub)."))
    pairwise_top_k: int = Field(20, ge=2, description=(
        "Head of the pointwise ranking reranked pairwise (the paper's k; §4.3, Table 2: k=40 submitted, k=20 "
        "scored 0.404 vs 0.397). Scaled down to 20: DuoT5 costs k(k-1) pair scores."))
    pairwise_batch_size: int = Field(8, ge=1, description="DuoT5: pairs per forward pass.")
    nugget_reply: Literal["numbers", "excerpts"] = Field("numbers", description=(
        "How a nugget reply names the passage's relevant sentences (not in the paper, whose LLM copies the "
        "passage with <START>/</END> tags): 'numbers', the passage shown as numbered sentences and the reply "
        "their numbers (~15 tokens; preqrag.systems.ginger.nuggets.number_schema), or 'excerpts', the "
        "sentences copied out as JSON (~100-150 tokens a passage; nugget_schema). The nuggets are the same "
        "verbatim sentences either way (docs/preset-ginger.md has the rows of both)."))
    nugget_detector: Literal["llm", "cross-encoder"] = Field("llm", description=(
        "Who picks a passage's nuggets (§3.2): 'llm' (the paper: the LLM annotates each passage, App. B.2) or "
        "'cross-encoder' (not in the paper: the passage's sentences scored against the question by the "
        "[cross_encoder] cross-encoder, its best 3 kept in passage order; no LLM call, and nugget detection is "
        "most of GINGER's LLM time; docs/preset-ginger.md has the rows of both)."))
    nugget_sentences: int | None = Field(None, ge=1, description=(
        "nugget_reply = 'numbers': sentences of a passage offered to the nugget call, those holding most of the "
        "question's words (preqrag.components.selection.sentence_scores), in passage order; null: all (up to 40). Not in "
        "the paper, whose LLM reads the whole passage: nugget detection is most of GINGER's prefill "
        "(docs/preset-ginger.md has the rows)."))
    nugget_max_new_tokens: int = Field(512, ge=16, description=(
        "nugget_reply = 'excerpts': tokens a nugget reply may use: the reply lists up to 3 of the passage's "
        "sentences as JSON (preqrag.systems.ginger.nuggets.nugget_schema), and only sentences that fit this "
        "budget are offered."))
    clustering: Literal["agglomerative", "bertopic"] = Field("agglomerative", description=(
        "Nugget clustering (§3.2): 'bertopic' (the paper's BERTopic, UMAP + HDBSCAN, needs `pip install "
        "bertopic`) or 'agglomerative' (scikit-learn, average linkage on cosine distance of the index "
        "embedder's nugget embeddings; stable for the handful of nuggets of one question)."))
    cluster_distance_threshold: float = Field(0.5, gt=0, lt=2, description=(
        "agglomerative: nuggets closer than this cosine distance (1 - cosine similarity) join one cluster."))
    cluster_ranking: Literal["pairwise", "passage-rank"] = Field("pairwise", description=(
        "Cluster ranking (§3.2): 'pairwise' (the paper: DuoT5 on the clusters' text, here the configured "
        "pairwise_model) or 'passage-rank' (best rank of the passages a cluster's nuggets come from)."))
    max_sentences: int = Field(5, ge=1, description=(
        "Response length limit in summarised clusters, one sentence each (§3.3; the authors' code caps "
        "sentences and words). The word cap is generator.max_words (300: LiveRAG reads 300 words)."))
    summary_max_new_tokens: int = Field(80, ge=8, description=(
        "Tokens per cluster summary (App. B.3 asks for one sentence of about 35 words)."))
    fluency: bool = Field(True, description="Rephrase the joined summaries for fluency (§3.3, App. B.3).")
    fluency_max_new_tokens: int = Field(400, ge=16, description="Tokens of the fluency pass reply.")
    max_question_tokens: int = Field(256, ge=8, description=(
        "A longer question is cut to this many LLM tokens in the GINGER prompts (recorded as a fallback)."))


register_table("ginger", GingerConfig)

register_preset("ginger", {
    "rewriter": {"name": "ginger"}, "fusion": {"name": "rrf"}, "rerank": {"chain": ["cross-encoder", "pairwise"]},
    "generator": {"name": "ginger", "context_top_k": 5, "max_words": 300},
    "ginger": {"n_rewrites": 3, "answer_words": 50, "query_mode": "fuse", "pairwise_top_k": 20, "nugget_detector": "cross-encoder",
               "clustering": "agglomerative", "cluster_ranking": "pairwise", "max_sentences": 3, "fluency": True}})
