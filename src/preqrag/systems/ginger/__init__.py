"""GINGER: retrieval-augmented information-nugget-based generation of responses.

Łajewska, Kostric, Iturra-Bocaz, Arustashvili & Balog, "UiS-IAI@LiveRAG: Retrieval-Augmented
Information Nugget-Based Generation of Responses" (SIGIR 2025 LiveRAG, arXiv 2506.22210), and the
GINGER generator it builds on (Łajewska & Balog, SIGIR 2025). Components, each filling one slot
of :class:`preqrag.run.pipeline.Pipeline` (preset ``ginger``, :mod:`preqrag.core.presets`):

* :mod:`.rewriting` – multi-query rewriting (§3.1, App. B.1): rewriter ``ginger``;
* :mod:`.pairwise` – DuoT5-style pairwise reranking with sym-sum aggregation (§3.1): rerank
  step ``pairwise`` (after the pointwise ``cross-encoder`` step);
* :mod:`.nuggets`, :mod:`.clustering`, :mod:`.generator` – nugget detection, clustering, cluster
  ranking, one-sentence summaries, fluency pass, length limit (§3.2-3.3, App. B.2-B.3):
  generator ``ginger``.

Settings: the ``[ginger]`` table (:class:`preqrag.systems.ginger.settings.GingerConfig`). Deviations from the
paper and why: docs/preset-ginger.md.
"""

from __future__ import annotations

from .generator import GingerGenerator
from .pairwise import CrossEncoderPreference, DuoT5Preference, PairwiseStep, load_pair_scorer, sym_sum
from .rewriting import GingerRewriter, parse_rewrites
from . import build  # noqa: F401  (registers the components)

__all__ = ["GingerGenerator", "GingerRewriter", "PairwiseStep", "CrossEncoderPreference", "DuoT5Preference",
           "load_pair_scorer", "parse_rewrites", "sym_sum"]
