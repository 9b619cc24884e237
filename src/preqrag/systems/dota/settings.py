"""The ``[dota]`` table: DoTA-RAG's settings (registered with :func:`preqrag.core.config.register_table`),
and the preset ``dota`` (:func:`preqrag.core.presets.register_preset`; docs/preset-dota.md)."""

from __future__ import annotations

from pydantic import Field

from ...core.config import Section as _Section
from ...core.config import register_table
from ...core.presets import register_preset


class DotaConfig(_Section):
    """DoTA-RAG (Ruangtanusak et al., SIGIR 2025 LiveRAG, arXiv 2506.12571): typo-fixing rewrite
    (§2.1, Fig. 3), namespace routing with self-consistency (§2.2, Fig. 4), BM25 pruning (§2.3),
    context aggregation (§2.4). See preqrag.systems.dota and docs/preset-dota.md."""

    route: bool = Field(True, description=(
        "Route each question to WebOrganizer topic namespaces and search only those (§2.2); false: "
        "the rewrite alone, every namespace searched."))
    route_votes: int = Field(4, ge=1, description="Routing votes per question (§2.2: self-consistency, k=4).")
    route_temperature: float = Field(0.6, gt=0, description=(
        "Sampling temperature of the votes (> 0 so they differ; the authors' code: 0.6)."))
    route_seed: int = Field(0, description=(
        "Vote v samples with seed route_seed + v where the backend takes a seed (in-process llama.cpp), "
        "so votes differ and runs repeat."))
    route_top_n: int = Field(2, ge=1, description=(
        "The most voted namespaces (§2.2: top two): what an index-less plan filters on; with an index, "
        "the votes' shares weigh the parts chosen within route_budget (route_vote_weight)."))
    route_parts: int = Field(8, ge=1, description=(
        "Parts per topic namespace (not in the paper): each topic's passages are split by spherical k-means "
        "(preqrag.systems.dota.topics); the router searches the parts nearest the question."))
    route_budget: float = Field(0.15, gt=0, le=1, description=(
        "Most of the passages a routed dense search covers (a share; the paper's routing searched ~8%): "
        "parts are added best first while they fit."))
    route_bm25_depth: int = Field(30, ge=0, description=(
        "BM25 top passages whose parts the router favours (each adds 1/rank to its part's score; 0 = off). "
        "BM25 over the whole index is cheap next to a dense search over it."))
    route_vote_weight: float = Field(0.1, ge=0, description=(
        "Weight of the LLM votes in a part's routing score: this times the share of valid votes that "
        "named the part's topic (cosine similarities to the part centroids differ by ~0.1)."))
    route_max_new_tokens: int = Field(160, ge=8, description=(
        "Tokens per vote (the authors' code: 128, for free text): an upper bound for the JSON vote, whose "
        "schema fits it (names and the 'about' text at one character per token)."))
    rewrite_temperature: float = Field(0.0, ge=0, description=(
        "Rewrite sampling temperature; §2.1 'low-temp' (the authors' code: 0.2 with top-p 0.1, near greedy)."))
    rewrite_top_p: float | None = Field(None, gt=0, le=1, description=(
        "Rewrite top-p (the authors' code: 0.1); null = llm.top_p."))
    rewrite_max_new_tokens: int = Field(320, ge=8, description=(
        "Tokens of the rewrite (the authors' code: 128, for free text): an upper bound for the JSON reply, "
        "room for a 300-character rewrite at one character per token."))
    search_question: bool = Field(True, description=(
        "Search the user's question beside the rewrite, both in the routed parts, their lists fused (not in "
        "the paper, which searches the rewrite alone: false). With SmolLM2's rewrites on 200 dev questions "
        "the rewrite alone lost 0.049 single hit@10 against hybrid, the two queries none (docs/preset-dota.md)."))
    prune_keep: int = Field(20, ge=1, description=(
        "Candidates the 'bm25-prune' rerank step keeps (§2.3: dense 100 -> BM25 top 20)."))
    context_tokens: int = Field(8000, ge=64, description=(
        "Token budget of the aggregated passages (§2.4: 8k), capped by what llm.n_ctx leaves; passages are "
        "cut proportionally to fit."))


register_table("dota", DotaConfig)

register_preset("dota", {
    "rewriter": {"name": "dota"}, "retrieval": {"use_sparse": True, "dense_top_k": 100},
    "rerank": {"chain": ["bm25-prune", "cross-encoder"]}, "cross_encoder": {"depth": 20},
    "generator": {"name": "dota", "context_top_k": 10, "context_tokens": 512, "max_new_tokens": 200, "max_words": 300},
    "dota": {"route": True, "route_votes": 4, "route_top_n": 2, "prune_keep": 20, "context_tokens": 8000,
             "search_question": True}})
