"""``preqrag topics --index IDX``: assign DoTA-RAG's WebOrganizer topic namespaces to an index
(:mod:`preqrag.systems.dota.topics`). Registered by :mod:`preqrag.cli.app`,
which adds every built-in system's ``commands`` module (:data:`preqrag.core.config.SYSTEMS`)."""

from __future__ import annotations

from pathlib import Path


def register(app) -> None:
    """Add the ``topics`` command to a ``typer.Typer`` app."""
    import typer

    @app.command("topics")
    def topics_cmd(index_dir: Path = typer.Option(..., "--index", help="Index built by `preqrag index`."),
                   config: Path = typer.Option(None, "--config", "-c", help="preqrag.toml (defaults when omitted)."),
                   rebuild: bool = typer.Option(False, "--rebuild", help="Reassign even if topics.npz is current.")):
        """Assign a WebOrganizer topic (DoTA-RAG namespace) to every document of an index, by
        embedding similarity to the topic descriptions; writes <index>/topics.npz."""
        from .topics import main

        args = ["--index", str(index_dir)] + (["--config", str(config)] if config else []) + \
            (["--rebuild"] if rebuild else [])
        raise typer.Exit(main(args))
