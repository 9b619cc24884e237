"""PreQRAG's presets: ``preqrag``, ``preqrag-keep`` and ``hybrid`` (see :mod:`preqrag.core.presets`).

The base configuration (the defaults of :class:`preqrag.core.config.PipelineConfig`) is neutral:
it is ``hybrid``, the default preset, which calls no LLM before the answer (BM25 + dense on the
question, union, cross-encoder, top-3 passages, prompt B). PreQRAG is one preset among the
others: its rewriting and decomposition (§2.2) are the one thing it changes from that base, as
DoTA-RAG, GINGER and CIR change theirs. The tables PreQRAG shares with the base
(``[classifier]``, ``[retrieval]``, ``[fusion]``, ``[cross_encoder]``, ``[generator]``) keep the
paper's values, which ``hybrid`` uses too.
"""

from __future__ import annotations

from ...core.presets import register_preset

register_preset("preqrag", {"rewriter": {"name": "preqrag"}})
register_preset("preqrag-keep", {"rewriter": {"name": "preqrag", "keep_original": True}})
register_preset("hybrid", {})
