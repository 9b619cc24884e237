"""CIR at TREC 2024 RAG: MMR-diversified passages and expertise-adapted, cited answers.

CIR's augmented-generation runs at TREC 2024 RAG (paper §2, Tables 1-3). Components, each
filling one slot of :class:`preqrag.run.pipeline.Pipeline` (preset ``cir``):

* :mod:`.mmr` – Maximal Marginal Relevance over the cross-encoder's ranking (§2.1, Eq. 1):
  rerank step ``mmr``;
* :mod:`.generator` – the base prompt with an expertise prompt P.0-P.3 and a cited JSON answer,
  hallucinated citations removed (§2.2, Table 2): generator ``cir``.

Settings: the ``[cir]`` and ``[mmr]`` tables and the preset (:mod:`.settings`). A question's own
pre-ranked candidates (a ragnarok request) are read by :mod:`preqrag.components.candidates`, which every
preset can use (``run.use_given_candidates``). Deviations from the paper and why:
docs/preset-cir.md.
"""

from __future__ import annotations

from .generator import CIRGenerator, cir_answer_schema, parse_cir_answer
from .mmr import MMRStep, load_mmr_step
from .settings import CIRConfig, MMRConfig
from . import build  # noqa: F401  (registers the components)

__all__ = ["CIRConfig", "CIRGenerator", "MMRConfig", "MMRStep", "cir_answer_schema", "load_mmr_step",
           "parse_cir_answer"]
