"""The ``none`` rewriter: the raw question is the BM25 and the dense query (every preset that
rewrites nothing: ``hybrid``, ``cir``; the ablation ladder's baseline). The LLM rewriters live
with their systems: PreQRAG's in :mod:`preqrag.systems.preqrag.rewriting` (§2.2), DoTA-RAG's in
:mod:`preqrag.systems.dota.planning`, GINGER's in :mod:`preqrag.systems.ginger.rewriting`."""

from __future__ import annotations

from .registry import Context, register
from ..core.contracts import Retriever
from ..core.records import QueryPlan, QuestionType, SubQuery


class IdentityRewriter:
    """No rewriting: the original question is the sparse and the dense query (baseline)."""

    name = "none"

    def retriever(self, retriever: Retriever) -> Retriever:
        """Its plans filter nothing: ``retriever`` itself."""
        return retriever

    def plan(self, questions: list[str], types: list[QuestionType]) -> list[QueryPlan]:
        return [QueryPlan(question_type=t, rewriter=self.name, sub_queries=[SubQuery(text=q, sparse=q, dense=q)])
                for q, t in zip(questions, types)]


@register("rewriter", "none")
def _none(ctx: Context) -> IdentityRewriter:
    return IdentityRewriter()
