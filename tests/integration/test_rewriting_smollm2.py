"""PreQRAG's rewriting with the bundled SmolLM2-135M in-process: every plan is usable whatever the
model writes (constrained decoding: every reply parses)."""

import json

from preqrag.core.config import LLMConfig, RewriterConfig
from preqrag.systems.preqrag.rewriting import PreQRAGRewriter

Q = "I'm developing new methods for protein analysis and wondering what improvements are made to HDX methodology?"
MULTI = "How does Azure Firewall enable network segmentation, and what are the compliance aspects of Key Vault?"


def test_real_smollm2_rewrites_are_parsed_or_fall_back():
    """The bundled 135M model: every plan is usable whatever the model writes."""
    from preqrag.models.llm import load_llm

    rw = PreQRAGRewriter(load_llm(LLMConfig()), RewriterConfig())
    single, multi = rw.plan([Q, MULTI], ["single", "multi"])
    for plan in (single, multi):
        assert plan.sub_queries and all(s.sparse.strip() and s.dense.strip() for s in plan.sub_queries)
        # constrained decoding: every reply parses (a fallback may only be about sense)
        assert set(plan.llm_outputs) == ({"sparse", "dense"} if plan is single else {"decompose"})
        assert not [f for f in plan.fallbacks if "unparsable" in f or f.endswith(": empty")], plan.fallbacks
    assert set(json.loads(multi.llm_outputs["decompose"])) == {"sub_questions"}
    assert len(json.loads(multi.llm_outputs["decompose"])["sub_questions"]) == 2
    assert len(single.sub_queries) == 1
    assert 1 <= len(multi.sub_queries) <= 2
    if not multi.fallbacks:
        assert len(multi.sub_queries) == 2
