"""Pipeline presets: the settings of each published system, selected with ``pipeline = NAME``.

A preset is a partial configuration (tables of :class:`preqrag.core.config.PipelineConfig`);
:func:`preqrag.core.config.load_config` starts from it and applies the file on top, so any
setting of a preset can be overridden. ``preqrag config --pipeline NAME`` prints one.

Each system registers its presets next to its settings with :func:`register_preset` (the
built-in ones in ``preqrag.<system>.settings``, :data:`preqrag.core.config.SYSTEMS`); a system of
your own does the same in a module named by ``imports = [...]`` in the TOML. The built-in
presets:

* ``preqrag``: PreQRAG (Martinez, Riano & Fang, SIGIR 2025 LiveRAG, arXiv 2506.17493) as
  measured in docs/results/ablation.md: learned classifier (§2.1), 2 rewrites / 2
  sub-questions replacing the question (§2.2), BM25 + dense top-100 each, round-robin
  union (§2.3), cross-encoder on the depth-30 head (§2.4), top-3 passages, prompt B (§2.5).
* ``preqrag-keep``: the same, keeping the original question beside the rewrites and
  sub-questions (``rewriter.keep_original``; GINGER, UiS-IAI@LiveRAG, Table 1: original +
  rewrites beats rewrites alone), so a weak LLM's rewrites cannot lose what the question
  itself retrieves.
* ``hybrid``: no LLM before generation: BM25 + dense on the raw question, union,
  cross-encoder (the ablation ladder's ``hybrid-rerank`` row).
* ``cir``: CIR at TREC 2024 RAG (augmented generation; paper §2, Tables 1-3), its
  priority-1 run (Table 3, run 3): the raw question (CIR rewrites nothing), BM25 + dense,
  cross-encoder, MMR with cosine similarity and λ = 0.5 over the top j = 100 (§2.1), k = 8
  passages (Table 1: 20 and 50) to the P.1 expertise prompt (or the question's ``user_expertise``) with a
  cited JSON answer (§2.2). A question with its own pre-ranked ``candidates`` (a ragnarok request,
  CIR's task) is answered from the top k of them without retrieval (``run.use_given_candidates``).
  docs/preset-cir.md lists the deviations (:mod:`preqrag.systems.cir`).
* ``dota``: DoTA-RAG (Ruangtanusak et al., SIGIR 2025 LiveRAG, arXiv 2506.12571): typo-fixing
  rewrite (§2.1, Fig. 3), routing to the top-2 of 4 votes over WebOrganizer's 24 topic
  namespaces (§2.2, Fig. 4), dense top-100 inside them, BM25 pruning to 20, cross-encoder to 10
  (§2.3), the passages' answer-bearing sentences (512 tokens; the paper: whole passages in an
  8k-token budget, §2.4) joined by blank lines, Fig. 5 prompt, 300-word cap (§2.5).
  docs/preset-dota.md lists the deviations.
* ``ginger``: GINGER (Łajewska et al., UiS-IAI@LiveRAG, SIGIR 2025 LiveRAG, arXiv 2506.22210):
  the original question + 3 LLM rewrites (§3.1, App. B.1), BM25 + dense per query fused by RRF
  (§3.1), pointwise cross-encoder (stand-in for monoT5) then pairwise sym-sum reranking of the
  top k = 20 (§3.1; k = 40 in the paper), nuggets in the top m = 5 passages (m = 10; each
  passage's 3 best sentences by the cross-encoder, where the paper's LLM annotates them),
  clustered, ranked pairwise, one summary sentence per cluster, at most 3 sentences and 300
  words, a fluency pass (§3.2-3.3, App. B.2-B.3). docs/preset-ginger.md lists the
  deviations.
"""

from __future__ import annotations

import sys

PRESETS: dict[str, dict] = {}
"""Preset name → partial configuration (table → settings), in registration order."""
_OWNER: dict[str, str] = {}


def register_preset(name: str, settings: dict, module: str | None = None) -> None:
    """Register preset ``name``: ``settings`` is a partial configuration, ``{table: {key: value}}``
    (top-level keys of a TOML file may be given as plain values), applied before the user's file.

    Args:
        name: the value of ``pipeline`` that selects it.
        settings: the partial configuration; validated with the rest when a configuration uses it.
        module: the registering module (default: the caller's), so that a re-import (a test's
            reload) may register the same name again while another module may not.

    Raises:
        ValueError: ``name`` is already a preset of another module.
    """
    if module is None:
        module = sys._getframe(1).f_globals.get("__name__", "?")
    owner = _OWNER.get(name)
    if owner is not None and owner != module:
        raise ValueError(f"register_preset: preset {name!r} is already registered by {owner}")
    PRESETS[name] = settings
    _OWNER[name] = module
