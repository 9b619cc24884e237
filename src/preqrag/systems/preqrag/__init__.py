"""PreQRAG: query rewriting and decomposition before hybrid retrieval.

Martinez, Riano & Fang, "PreQRAG – Classify and Rewrite for Enhanced RAG" (SIGIR 2025 LiveRAG,
arXiv 2506.17493). The pipeline this project is built around: each question is classified
single- or multi-document (§2.1), rewritten for BM25 and for dense retrieval or decomposed into
sub-questions (§2.2), retrieved by BM25 + dense and united (§2.3), reranked by a cross-encoder
(§2.4) and answered from the top 3 passages (§2.5).

Most of its stages are the core every system shares, so they live in the core modules: the
classifiers (:mod:`preqrag.components.classifiers`), retrieval and fusion, the cross-encoder step
(:mod:`preqrag.components.reranking`) and the grounded-answer generator ``preqrag``
(:mod:`preqrag.components.generation`, prompts A-D of App. B.3), and its settings are the core tables.
What is PreQRAG's alone is here:

* :mod:`.rewriting` – the rewrites and sub-questions (§2.2): rewriter ``preqrag``;
* :mod:`.settings` – the presets ``preqrag``, ``preqrag-keep`` and ``hybrid``.
"""

from __future__ import annotations

from .rewriting import PreQRAGRewriter, decompose_schema, parse_rewrite_reply, parse_sub_questions_reply, rewrite_schema
from . import build  # noqa: F401  (registers the components)

__all__ = ["PreQRAGRewriter", "decompose_schema", "parse_rewrite_reply", "parse_sub_questions_reply", "rewrite_schema"]
