"""TREC RAG (2024, 2025) in and out: topics are read as question files
(:func:`preqrag.core.io.read_questions`), answers exported in the track's format
(:mod:`preqrag.trec.export`) and checked (:mod:`preqrag.trec.validate`); formats in
:mod:`preqrag.trec.formats`, commands in :mod:`preqrag.cli.commands.trec`."""
