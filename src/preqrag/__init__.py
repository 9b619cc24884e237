"""preqrag: question-type-aware retrieval-augmented generation (PreQRAG, SIGIR 2025 LiveRAG).

Entry points: the ``preqrag`` command (:mod:`preqrag.cli.app`), :class:`preqrag.run.pipeline.Pipeline`
and :func:`preqrag.core.config.load_config`.
"""

__version__ = "0.1.0"

LAYERS: tuple[str, ...] = (
    "core", "models", "retrieval", "index", "components", "evaluation", "learned", "trec", "systems",
    "run", "serve", "cli")
"""The packages of preqrag, bottom up, each one layer: a module imports only from its own package
or one before it here (``tests/unit/repo/test_contracts.py`` checks every import; docs/architecture.md
draws them)."""
