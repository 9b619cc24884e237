"""Pipeline presets: the settings of each published system, selected with ``pipeline = NAME``.

A preset is a partial configuration (tables of :class:`preqrag.config.PipelineConfig`);
:func:`preqrag.config.load_config` starts from it and applies the file on top, so any
setting of a preset can be overridden. ``preqrag config --pipeline NAME`` prints one.

* ``preqrag``: PreQRAG (Martinez, Riano & Fang, SIGIR 2025 LiveRAG, arXiv 2506.17493) as
  measured in docs/bench/ablation.md: learned classifier (§2.1), 2 rewrites / 2
  sub-questions replacing the question (§2.2), BM25 + dense top-100 each, round-robin
  union (§2.3), cross-encoder on the depth-30 head (§2.4), top-3 passages, prompt B (§2.5).
* ``preqrag-keep``: the same, keeping the original question beside the rewrites and
  sub-questions (``rewriter.keep_original``; GINGER, UiS-IAI@LiveRAG, Table 1: original +
  rewrites beats rewrites alone), so a weak LLM's rewrites cannot lose what the question
  itself retrieves.
* ``hybrid``: no LLM before generation: BM25 + dense on the raw question, union,
  cross-encoder (the ablation ladder's ``hybrid-rerank`` row).
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "preqrag": {},
    "preqrag-keep": {"rewriter": {"keep_original": True}},
    "hybrid": {"rewriter": {"name": "none"}},
}
"""Preset name → partial configuration (table → settings)."""
