"""``preqrag train-classifier`` and ``preqrag classify`` (registered on the main typer app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the ``train-classifier`` and ``classify`` commands to ``app``."""

    @app.command("train-classifier")
    def train_classifier(
        questions: Path = typer.Argument(..., help="JSONL questions with labels: question_type "
                                         "('single'|'multi'), n_gold or gold_doc_ids."),
        output: Path = typer.Option(..., "-o", "--output", help="Model file to write (JSON)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the threshold-tuning folds and the estimator."),
    ) -> None:
        """Train the learned single/multi classifier (PreQRAG §2.1) and write its model file.

        Deterministic: the same file and seed give the same model, byte for byte.
        """
        from ...components.classifiers.train import load_labelled, train_model
        from ...core.io import atomic_write_text

        try:
            data = load_labelled(questions)
        except FileNotFoundError:
            _fail(f"{questions}: no such file")
        except ValueError as e:
            _fail(str(e))
        for err in data.errors:
            typer.echo(str(err), err=True)
        model = train_model(data, seed=seed)
        atomic_write_text(output, model.to_json())
        meta = model.metadata
        typer.echo(f"trained {meta['candidate']} on {meta['n_questions']} questions "
                   f"({meta['n_single']} single / {meta['n_multi']} multi; {len(data.errors)} lines skipped); "
                   f"threshold {model.threshold:.4f}; wrote {output}")

    @app.command("classify")
    def classify(
        questions: Path = typer.Argument(..., help="JSONL questions ({'id', 'question', ...} per line)."),
        output: Path = typer.Option(..., "-o", "--output", help="JSONL predictions to write."),
        config: Optional[Path] = typer.Option(None, "--config", help="preqrag.toml (default: built-in defaults)."),
        classifier: Optional[str] = typer.Option(None, "--classifier",
                                                 help="learned | rules | llm | combined (overrides the config)."),
        batch_size: int = typer.Option(256, "--batch-size", min=1, help="Questions per classify call."),
    ) -> None:
        """Classify questions as single- or multi-document (PreQRAG §2.1).

        Writes one {"id", "question_type"} per line (in input order); bad input lines are
        reported on stderr as file:line: field: message and skipped.
        """
        from ...components.classifiers import load_classifier
        from ...core.config import ConfigError, load_config
        from ...core.io import atomic_write_text, read_questions

        overrides = {"classifier": {"name": classifier}} if classifier else None
        try:
            cfg = load_config(config, overrides=overrides)
            clf = load_classifier(cfg)
        except (ConfigError, ValueError) as e:
            _fail(str(e))
        try:
            qs, errors = read_questions(questions)
        except FileNotFoundError:
            _fail(f"{questions}: no such file")
        for err in errors:
            typer.echo(str(err), err=True)
        lines: list[str] = []
        n_fallback = n_multi = 0
        for start in range(0, len(qs), batch_size):
            batch = qs[start:start + batch_size]
            for q, c in zip(batch, clf.classify([q.question for q in batch])):
                n_fallback += c.fallback is not None
                n_multi += c.question_type == "multi"
                lines.append(json.dumps({"id": q.id, "question_type": c.question_type}, ensure_ascii=False))
        atomic_write_text(output, "".join(line + "\n" for line in lines))
        typer.echo(f"{clf.name}: {len(lines)} questions, {n_multi} multi, {len(lines) - n_multi} single"
                   f"{f', {n_fallback} fallbacks' if n_fallback else ''}; {len(errors)} bad lines; wrote {output}")
