"""``preqrag export`` and ``preqrag validate``: TREC RAG runs out of LiveRAG answer files, and
the checks of both formats. Registered by :mod:`preqrag.cli.app` like the other stage commands.

    preqrag export --format trec-rag24 answers.jsonl -o run.jsonl --run-id ID
    preqrag export --format trec-rag25 answers.jsonl -o run.jsonl --run-id ID --team-id TEAM
    preqrag validate FILE [--format liverag|trec-rag24|trec-rag25] [--topics TOPICS]
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def register(app) -> None:
    """Add the ``export`` and ``validate`` commands to a ``typer.Typer`` app."""
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    _register_export(app, err)
    _register_validate(app, err)


def _register_export(app, err) -> None:
    import typer

    @app.command("export")
    def export_cmd(answers: Path = typer.Argument(..., exists=True, dir_okay=False,
                                                  help="LiveRAG answers JSONL from `preqrag run` (its "
                                                       ".traces.jsonl beside it)."),
                   fmt: str = typer.Option(..., "--format", "-f", help="trec-rag24 or trec-rag25."),
                   output: Path = typer.Option(..., "--output", "-o", help="The TREC RAG run file to write."),
                   run_id: str = typer.Option(..., "--run-id", help="The run's id (run_id / metadata.run_id)."),
                   team_id: Optional[str] = typer.Option(None, "--team-id",
                                                         help="metadata.team_id (required for trec-rag25)."),
                   run_type: str = typer.Option("automatic", "--type", help="metadata.type for trec-rag25: "
                                                "automatic or manual."),
                   ids: str = typer.Option("passage", "--ids", help=(
                       "references as 'passage' ids (<doc id>#<n>) or 'document' ids (use 'document' with the "
                       "MS MARCO V2.1 segmented collection indexed one segment per document).")),
                   config: Optional[Path] = typer.Option(None, "--config", "-c", help=(
                       "preqrag.toml: its [cross_encoder] is the cross-encoder that attributes citations; [run] "
                       "cache_dir caches its scores.")),
                   threshold: Optional[float] = typer.Option(None, "--threshold", help=(
                       "Cross-encoder score for a citation (default: DEFAULT_THRESHOLD in preqrag.components.citations)."))):
        """Write a TREC RAG 2024/2025 run from a LiveRAG answer file: sentences with citations to
        passage ids, references, and the track's fields; sentences of generators that do not cite
        are attributed to their best-supporting passages."""
        from ...components.citations import DEFAULT_THRESHOLD, load_attributor
        from ..common import open_config
        from ...trec.export import ExportError, export_run
        from ...trec.formats import TREC_FORMATS

        if fmt not in TREC_FORMATS:
            err.print(f"[red]error:[/red] --format must be one of {', '.join(TREC_FORMATS)}, not {fmt!r}")
            raise typer.Exit(2)
        cfg = open_config(config)
        thr = DEFAULT_THRESHOLD if threshold is None else threshold
        try:
            summary = export_run(answers, output, fmt, run_id, team_id=team_id, run_type=run_type, ids=ids,
                                 attributor=lambda: load_attributor(cfg.cross_encoder, threshold=thr,
                                                                    cache_dir=cfg.run.cache_dir))
        except ExportError as e:
            for p in e.problems:
                err.print(f"[red]error:[/red] {p}")
            raise typer.Exit(2)
        except (ValueError, FileNotFoundError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
        err.print(f"{summary.answers} answers -> {output} ({fmt}): {summary.generator_cited} with the generator's "
                  f"citations, {summary.attributed} attributed (threshold {thr}); {summary.sentences} sentences, "
                  f"{summary.citations} citations, {summary.uncited_sentences} sentences citing nothing"
                  + (f"; {summary.cut_sentences} sentences cut to 400 words" if summary.cut_sentences else "")
                  + (f"; {summary.dropped_references} references over the limit dropped"
                     if summary.dropped_references else ""))


def _register_validate(app, err) -> None:
    import typer

    @app.command("validate")
    def validate_cmd(file: Path = typer.Argument(..., exists=True, dir_okay=False, help="The file to check."),
                     fmt: Optional[str] = typer.Option(None, "--format", "-f", help=(
                         "liverag, trec-rag24 or trec-rag25 (detected when omitted).")),
                     topics: Optional[Path] = typer.Option(None, "--topics", exists=True, dir_okay=False, help=(
                         "Topics (qid<TAB>query TSV or JSONL): check topic ids and texts, report unanswered "
                         "topics.")),
                     msmarco_ids: bool = typer.Option(False, "--msmarco-ids", help=(
                         "Require references to be MS MARCO V2.1 segment ids (the track's collection)."))):
        """Check a LiveRAG answer file or a TREC RAG run: prints every problem as FILE:LINE: FIELD: message;
        exit 1 when there is an error, 0 when there is none (warnings do not fail)."""
        from ...trec.formats import FORMATS
        from ...trec.validate import validate_file

        if fmt is not None and fmt not in FORMATS:
            err.print(f"[red]error:[/red] --format must be one of {', '.join(FORMATS)}, not {fmt!r}")
            raise typer.Exit(2)
        detected, problems = validate_file(file, fmt, topics=topics, msmarco_ids=msmarco_ids)
        for p in problems:
            typer.echo(str(p))
        errors = sum(p.severity == "error" for p in problems)
        warnings = len(problems) - errors
        err.print(f"{file}: {detected or 'unknown format'}: {errors} error(s), {warnings} warning(s)")
        raise typer.Exit(1 if errors else 0)
