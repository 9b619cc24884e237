"""The built-in systems, one package each: ``preqrag`` (PreQRAG, SIGIR 2025 LiveRAG), ``cir``
(CIR at TREC 2024 RAG), ``dota`` (DoTA-RAG, SIGIR 2025 LiveRAG) and ``ginger`` (GINGER, SIGIR
2025 LiveRAG).

Each package holds its components (registered with :func:`preqrag.components.registry.register` when the
package is imported), its ``settings`` module (its tables, :func:`preqrag.core.config.register_table`,
and presets, :func:`preqrag.core.presets.register_preset`) and, optionally, a ``commands`` module whose
``register(app)`` adds sub-commands to the ``preqrag`` CLI. A system imports the core modules and
never another system. :data:`preqrag.core.config.SYSTEMS` lists them; the core imports them only by
name, so adding a built-in system is a folder here and its name in that list."""
