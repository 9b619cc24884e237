"""What every ``preqrag`` command shares: the error console, the ``--config`` option, and opening
the configuration and the pipeline with clear errors (exit 2) before the first question. Used by
:mod:`preqrag.cli` and its sub-commands (:mod:`preqrag.commands`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .config import ConfigError, PipelineConfig, load_config

err = Console(stderr=True, soft_wrap=True)  # no wrapping: messages name files and lines

ConfigOpt = typer.Option(None, "--config", "-c", help="preqrag.toml (defaults when omitted).")


def open_config(path: Optional[Path]) -> PipelineConfig:
    """The validated configuration of ``path`` (defaults for None); a ConfigError is printed and
    exits 2."""
    try:
        return load_config(path)
    except ConfigError as e:
        err.print(f"[red]config error:[/red] {e}")
        raise typer.Exit(2)


def open_pipeline(index_dir: Path | None, cfg: PipelineConfig):
    """Check every configured model, open the index, build the stages and load every model,
    so that a configuration that cannot work fails (exit 2) before the first question."""
    from .index import IndexOpenError
    from .pipeline import Pipeline
    from .preflight import ModelUnavailable, require_models

    try:
        require_models(cfg)
        pipeline = Pipeline.from_config(index_dir, cfg)
        pipeline.warm_up()
        return pipeline
    except ModelUnavailable as e:
        for problem in e.problems:
            err.print(f"[red]model unavailable:[/red] {problem}")
        raise typer.Exit(2)
    except (IndexOpenError, ValueError, FileNotFoundError, ImportError, OSError) as e:
        err.print(f"[red]error:[/red] {type(e).__name__}: {e}")
        raise typer.Exit(2)
