"""What every ``preqrag`` command shares: the error console, the ``--config`` option, and opening
the configuration and the pipeline with clear errors (exit 2) before the first question. Used by
:mod:`preqrag.cli.app` and its sub-commands (:mod:`preqrag.cli.commands`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from ..core.config import ConfigError, PipelineConfig, load_config

err = Console(stderr=True, soft_wrap=True)  # no wrapping: messages name files and lines

ConfigOpt = typer.Option(None, "--config", "-c", help="preqrag.toml (defaults when omitted).")


def escape_help_markup(command) -> None:
    """Make the help texts of ``command`` and of every sub-command below it (a click command tree
    built by typer) plain text for typer's Rich help: typer parses help as Rich markup, which eats
    bracketed words such as ``[n]``, ``[index]`` or ``[llm]`` (a TOML table named in a help text).
    Escapes only where the command renders with ``rich_markup_mode == "rich"``; each object once."""
    from rich.markup import escape
    from typer.core import HAS_RICH

    if HAS_RICH and getattr(command, "rich_markup_mode", None) == "rich":
        for obj, attrs in [(command, ("help", "short_help", "epilog")),
                           *((p, ("help",)) for p in command.params)]:
            if getattr(obj, "_preqrag_help_escaped", False):
                continue
            obj._preqrag_help_escaped = True
            for attr in attrs:
                text = getattr(obj, attr, None)
                # ANSI-coloured text is not parsed as markup by typer: leave it as it is
                if isinstance(text, str) and "[" in text and "\x1b" not in text:
                    setattr(obj, attr, escape(text))
    for sub in (getattr(command, "commands", None) or {}).values():
        escape_help_markup(sub)


class PlainHelpGroup(TyperGroup):
    """The root group of ``preqrag``: its help texts, and every sub-command's, are plain text
    (:func:`escape_help_markup`), whatever renders it (``preqrag``, ``typer.main.get_command``,
    ``CliRunner``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        escape_help_markup(self)


def open_config(path: Optional[Path], pipeline: Optional[str] = None) -> PipelineConfig:
    """The validated configuration of ``path`` (defaults for None), on preset ``pipeline`` when
    given (else the file's); a ConfigError is printed and exits 2."""
    try:
        return load_config(path, pipeline=pipeline)
    except ConfigError as e:  # escaped: a message names tables as [table], which rich takes for markup
        err.print(f"[red]config error:[/red] {escape(str(e))}")
        raise typer.Exit(2)


def open_pipeline(index_dir: Path | None, cfg: PipelineConfig):
    """Check every configured model, open the index, build the stages and load every model,
    so that a configuration that cannot work fails (exit 2) before the first question."""
    from ..index.embedded import IndexOpenError
    from ..run.pipeline import Pipeline
    from ..models.preflight import ModelUnavailable, require_models

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
