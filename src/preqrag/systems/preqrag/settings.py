"""PreQRAG's presets: ``preqrag``, ``preqrag-keep`` and ``hybrid`` (see :mod:`preqrag.core.presets`).

PreQRAG's settings are the core tables (``[classifier]``, ``[rewriter]``, ``[retrieval]``,
``[fusion]``, ``[cross_encoder]``, ``[generator]`` of :class:`preqrag.core.config.PipelineConfig`): their
defaults are the paper's, and the other systems' presets change them. A preset here is what a
configuration changes from those defaults.
"""

from __future__ import annotations

from ...core.presets import register_preset

register_preset("preqrag", {})
register_preset("preqrag-keep", {"rewriter": {"keep_original": True}})
register_preset("hybrid", {"rewriter": {"name": "none"}})
