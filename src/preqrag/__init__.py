"""preqrag: question-type-aware retrieval-augmented generation (PreQRAG, SIGIR 2025 LiveRAG).

Entry points: the ``preqrag`` command (:mod:`preqrag.cli`), :class:`preqrag.pipeline.Pipeline`
and :func:`preqrag.config.load_config`.
"""

__version__ = "0.1.0"
