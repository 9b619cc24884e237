"""``preqrag train-ranker`` and ``preqrag train-encoder`` (issue 14; docs/learned.md).

    preqrag train-ranker QUESTIONS.jsonl --index IDX -o RANKER.json [--config CFG] [--folds K]
    preqrag train-encoder QUESTIONS.jsonl --index IDX -o MODEL_DIR [--epochs E --batch-size B
                          --hard-negatives N --seed S]
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

err = Console(stderr=True, soft_wrap=True)


def _questions_with_gold(path: Path, err):
    import typer

    from ...evaluation.retrieval import gold_docs
    from ...core.io import read_questions

    try:
        qs, bad = read_questions(path)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="QUESTIONS") from e
    for b in bad[:10]:
        err.print(f"[yellow]skipped input line[/yellow] {b}")
    with_gold = [q for q in qs if gold_docs(q)]
    if not with_gold:
        err.print(f"[red]error:[/red] {path}: no question has gold_doc_ids")
        raise typer.Exit(2)
    if len(with_gold) < len(qs):
        err.print(f"{len(qs) - len(with_gold)} questions without gold_doc_ids skipped")
    return with_gold


def _open_pipeline(index_dir: Path, cfg, err):
    import typer

    from ...index.embedded import IndexOpenError
    from ...run.pipeline import Pipeline

    try:
        return Pipeline.from_config(index_dir, cfg)
    except (IndexOpenError, ValueError, FileNotFoundError, ImportError, OSError) as e:
        err.print(f"[red]error:[/red] {type(e).__name__}: {e}")
        raise typer.Exit(2)


def register(app) -> None:
    """Add ``train-ranker`` and ``train-encoder`` to a ``typer.Typer`` app."""
    app.command("train-ranker")(train_ranker_cmd)
    app.command("train-encoder")(train_encoder_cmd)


def train_ranker_cmd(
    questions: Path = typer.Argument(..., exists=True, dir_okay=False,
                                     help="Questions JSONL with gold_doc_ids (e.g. dev.jsonl)."),
    index_dir: Path = typer.Option(..., "--index", help="Index built by `preqrag index`."),
    output: Path = typer.Option(..., "--output", "-o", help="Ranker model file to write (JSON)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="preqrag.toml of the pipeline "
                                          "whose candidates are ranked (defaults when omitted)."),
    folds: int = typer.Option(0, "--folds", min=0, help="Also report K-fold cross-validation grouped by "
                              "gold document (0: none)."),
    num_trees: int = typer.Option(300, "--num-trees", min=1),
    learning_rate: float = typer.Option(0.05, "--learning-rate"),
    num_leaves: int = typer.Option(15, "--num-leaves", min=2),
    min_data_in_leaf: int = typer.Option(20, "--min-data-in-leaf", min=1),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(2, "--threads", min=1, help="LightGBM threads."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Questions per retrieval batch."),
):
    """Learn the final ranking of candidate documents (LightGBM LambdaMART) from gold documents.

    Retrieval traces are cached in <output stem>.traces.jsonl: an interrupted run resumes and
    re-training with other parameters does not retrieve again."""
    import json

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..common import open_config as _config
    from ...core.io import atomic_write_text
    from ...learned.ranker import RankerParams
    from ...learned.train import collect_traces, cross_validate, fit, training_config

    qs = _questions_with_gold(questions, err)
    cfg = training_config(_config(config))
    params = RankerParams(num_trees=num_trees, learning_rate=learning_rate, num_leaves=num_leaves,
                          min_data_in_leaf=min_data_in_leaf, seed=seed, num_threads=threads)
    pipeline = _open_pipeline(index_dir, cfg, err)
    cache = output.with_name(output.stem + ".traces.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("retrieving"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as bar:
        task = bar.add_task("retrieving", total=len(qs))
        traces = collect_traces(pipeline, qs, cache, batch_size=batch_size,
                                progress=lambda d, t: bar.update(task, completed=d, total=t))
    if folds:
        try:
            cv = cross_validate(qs, traces, params, folds)
        except ValueError as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
        err.print(f"{folds}-fold cross-validation (grouped by gold document), baseline -> learned: "
                  + ", ".join(f"{m} {cv['baseline'][m]:.3f} -> {cv['learned'][m]:.3f}"
                              for m in ("single_hit@1", "single_mrr@10", "multi_recall@10")
                              if cv["baseline"][m] is not None))
        atomic_write_text(output.with_name(output.stem + ".cv.json"), json.dumps(cv, indent=1))
    try:
        ranker = fit(qs, traces, params, config=cfg.model_dump(mode="json"))
    except ValueError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    sha = ranker.save(output)
    t = ranker.training
    err.print(f"trained on {t['n_used']} of {t['n_questions']} questions ({t['n_documents']} candidate "
              f"documents) in {t['seconds']:.1f}s -> {output} (sha256 {sha[:12]})\n"
              f"use it with:\n  [merge]\n  name = \"learned\"\n  model = \"{output}\"", markup=False)


def train_encoder_cmd(
    questions: Path = typer.Argument(..., exists=True, dir_okay=False,
                                     help="Questions JSONL with gold_doc_ids (e.g. dev.jsonl)."),
    index_dir: Path = typer.Option(..., "--index", help="Index built by `preqrag index` (the corpus "
                                   "passages, and the retrievers that pick positives and hard negatives)."),
    output: Path = typer.Option(..., "--output", "-o", help="Model directory to write "
                                "(usable as \\[embedder] name)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="preqrag.toml (its \\[embedder] is "
                                          "the base model; defaults when omitted)."),
    epochs: int = typer.Option(1, "--epochs", min=1),
    batch_size: int = typer.Option(32, "--batch-size", min=2, help="Pairs per step (in-batch negatives)."),
    hard_negatives: int = typer.Option(1, "--hard-negatives", min=0, help="Mined hard negatives per pair."),
    learning_rate: float = typer.Option(2e-5, "--learning-rate"),
    max_seq_length: int = typer.Option(256, "--max-seq-length", min=16),
    max_steps: int = typer.Option(0, "--max-steps", min=0, help="Stop after N steps (0: all epochs)."),
    checkpoint_every: int = typer.Option(100, "--checkpoint-every", min=1, help="Steps between checkpoints."),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(2, "--threads", min=1, help="torch threads."),
):
    """Fine-tune the dense encoder on (question, gold passage) pairs with in-batch and mined hard
    negatives (MultipleNegativesRankingLoss). Resumes from <output>.checkpoint/ when interrupted."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..common import open_config as _config
    from ...learned.encoder import EncoderParams, train_encoder

    qs = _questions_with_gold(questions, err)
    cfg = _config(config)
    params = EncoderParams(epochs=epochs, batch_size=batch_size, hard_negatives=hard_negatives,
                           learning_rate=learning_rate, max_seq_length=max_seq_length, max_steps=max_steps,
                           checkpoint_every=checkpoint_every, seed=seed, threads=threads)
    pipeline = _open_pipeline(index_dir, training_retrieval_config(cfg), err)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as bar:
        tasks: dict[str, int] = {}

        def progress(phase: str, done: int, total: int):
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        try:
            record = train_encoder(pipeline, qs, output, params, progress=progress)
        except ValueError as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
    err.print(f"fine-tuned on {record['n_pairs']} pairs, {record['steps']} steps in {record['seconds']:.0f}s "
              f"-> {output}\nre-index the corpus with it:\n  [embedder]\n  name = \"{output}\"\n"
              f"  preqrag index --corpus CORPUS --index NEW_IDX --config CFG", markup=False)


def training_retrieval_config(cfg):
    """The retrieval used to pick positives and mine negatives: the configured pipeline with
    the interleave merge and deep traces (see :func:`preqrag.learned.train.training_config`)."""
    from ...learned.train import training_config

    return training_config(cfg)
