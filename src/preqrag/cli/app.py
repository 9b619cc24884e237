"""The ``preqrag`` command line (typer + rich).

    preqrag index --corpus CORPUS --index IDX         build an index
    preqrag index --corpus CORPUS --index S --shard i/N   build shard i of N (cluster jobs)
    preqrag index merge S0 S1 ... --index IDX         merge the N shards into one index
    preqrag ask --index IDX "question"               answer one question
    preqrag run --index IDX QUESTIONS -o OUT.jsonl   answer a question file (resumable)
    preqrag classify QUESTIONS -o PRED.jsonl         single/multi classification
    preqrag train-classifier QUESTIONS -o MODEL      train the learned classifier
    preqrag eval RUN... --questions GOLD -o DIR      evaluate runs
    preqrag demo                                     index the bundled corpus, answer 5 questions
    preqrag config                                   print the default configuration
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import tempfile
from importlib import resources
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from .common import ConfigOpt, PlainHelpGroup, err
from .common import open_config as _config
from .common import open_pipeline as _pipeline
from ..core.config import SYSTEMS, dump_config
from ..core.io import out_of_space

# A newcomer's screen shows stage progress and answers, not a library's per-model loading bars
# ("Loading weights" from transformers, once per model load). Users can still set these.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

# PlainHelpGroup: help texts are plain text, not Rich markup ([n], [index] and [llm] show)
app = typer.Typer(add_completion=False, no_args_is_help=True, cls=PlainHelpGroup,
                  help="PreQRAG: classify, rewrite, retrieve, rerank and answer (LiveRAG format).")


index_app = typer.Typer(add_completion=False, help="Build an index (one go, or one shard of N), or merge shards.")
app.add_typer(index_app, name="index")


def _progress_bar():
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TimeElapsedColumn(), console=err)
    tasks: dict[str, int] = {}

    def progress(phase: str, done: int, total: int):
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=total or None)
        bar.update(tasks[phase], completed=done, total=total or None)

    return bar, progress


def _require_models(cfg) -> None:
    """Every configured model is available (:func:`preqrag.models.preflight.require_models`), else
    each problem printed and exit 2, before any work."""
    from ..models.preflight import ModelUnavailable, require_models

    try:
        require_models(cfg)
    except ModelUnavailable as e:
        for problem in e.problems:
            err.print(f"[red]model unavailable:[/red] {problem}")
        raise typer.Exit(2)


def _verify_index(verify: Path) -> None:
    """``preqrag index --verify``: every damaged file named, exit 2; else one line saying all match."""
    from ..index.embedded import IndexOpenError, verify_index

    try:
        problems = verify_index(verify)
    except IndexOpenError as e:
        problems = [str(e)]
    for problem in problems:
        err.print(f"[red]error:[/red] {problem}")
    if problems:
        raise typer.Exit(2)
    err.print(f"{verify}: every file matches its manifest record (size and SHA-256)")


def _build_reporting_errors(build: Callable, index_dir: Path) -> dict:
    """``build(progress)`` under a progress bar; its manifest. Bad settings, an existing index
    and a full disk end with a message and exit 2 (a full disk keeps the finished steps in
    ``IDX.partial`` for the resumed build)."""
    bar, progress = _progress_bar()
    with bar:
        try:
            return build(progress)
        except (FileExistsError, ValueError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
        except OSError as e:
            if not out_of_space(e):
                raise
            err.print(f"[red]error:[/red] cannot write {e.filename or index_dir}: {e.strerror} (disk full, quota or "
                      f"file size limit). Nothing was published at {index_dir}; the finished steps are kept in "
                      f"{index_dir}.partial: run the same command again when there is space: it resumes.")
            raise typer.Exit(2)


@index_app.callback(invoke_without_command=True)
def index(ctx: typer.Context,
          corpus: Optional[Path] = typer.Option(None, "--corpus", exists=True, help=(
              "JSONL(.gz) or Parquet corpus with id, text; or a directory of such files (FineWeb's Parquet "
              "shards).")),
          index_dir: Optional[Path] = typer.Option(None, "--index", help="Index (or shard) directory to create."),
          config: Optional[Path] = ConfigOpt,
          overwrite: bool = typer.Option(False, help="Replace an existing index."),
          sparse_only: bool = typer.Option(False, "--sparse-only", help="BM25 only, no dense index."),
          shard: Optional[str] = typer.Option(None, "--shard", help=(
              "i/N: chunk and encode only documents o with o % N == i (one job of a Slurm array, Kubernetes "
              "jobs ...); combine the N shard directories with `preqrag index merge`.")),
          backend: Optional[str] = typer.Option(None, "--backend", help=(
              "milvus: load the embedded index --index (built first from --corpus if it does not exist) into "
              "the Milvus collection of [index] uri/collection, resumably. Default: [index] backend.")),
          verify: Optional[Path] = typer.Option(None, "--verify", help=(
              "Check an index's files against the sizes and SHA-256 its manifest records (nothing is built); "
              "exit 2 naming every damaged file.")),
          ray: bool = typer.Option(False, "--ray", help=(
              "Build on Ray: one task per shard (GPU when the cluster has one), retried when a worker dies, "
              "then the merge. Alone, a local Ray is started for the call; with --ray-address, a running "
              "cluster is joined. Needs pip install \"preqrag\\[ray]\"; shards go to IDX.shards/, which every "
              "node must see.")),
          ray_address: Optional[str] = typer.Option(None, "--ray-address", help=(
              "With --ray: the cluster (auto, host:6379, ray://host:10001); default a local Ray for the call.")),
          shards: Optional[int] = typer.Option(None, "--shards", min=1, help=(
              "With --ray: number of shards (default: the tasks the cluster can run at once)."))):
    """Chunk a corpus into passages and build the BM25 and dense indexes (or one shard of them)."""
    if ctx.invoked_subcommand is not None:
        return
    if verify is not None:
        _verify_index(verify)
        return
    if (backend or "embedded") not in ("embedded", "milvus"):
        err.print(f"[red]error:[/red] --backend {backend!r}: embedded or milvus")
        raise typer.Exit(2)
    if backend == "milvus" or (backend is None and corpus is None and index_dir is not None
                               and _config(config).index.backend == "milvus"):
        _index_milvus(corpus, index_dir, config, overwrite)
        return
    if corpus is None or index_dir is None:
        err.print("[red]error:[/red] --corpus and --index are required (or: preqrag index merge SHARD... --index IDX)")
        raise typer.Exit(2)
    from ..index.embedded import build_index
    from ..index.shards import build_shard, parse_shard

    cfg = _config(config)
    if ray_address is not None and not ray:
        err.print("[red]error:[/red] --ray-address needs --ray")
        raise typer.Exit(2)
    if ray and (shard is not None or sparse_only):
        err.print("[red]error:[/red] --ray builds every shard and merges them; it cannot be combined with "
                  "--shard or --sparse-only")
        raise typer.Exit(2)
    def build(progress):
        if ray:
            from ..run.distributed import build_index_ray

            return build_index_ray(corpus, index_dir, cfg, address=ray_address, n_shards=shards,
                                   overwrite=overwrite, progress=progress)
        if shard is not None:
            if sparse_only:
                raise ValueError("--shard builds passages and vectors; BM25 is built by `preqrag index merge`")
            i, n = parse_shard(shard)
            return build_shard(corpus, index_dir, cfg, i, n, overwrite=overwrite, progress=progress)
        return build_index(corpus, index_dir, cfg, overwrite=overwrite, dense=not sparse_only, progress=progress)

    manifest = _build_reporting_errors(build, index_dir)
    if shard is not None:
        err.print(f"shard {shard}: {manifest['n_documents']} of {manifest['corpus']['n_documents']} documents, "
                  f"{manifest['n_passages']} passages in {manifest['seconds']['total']:.1f}s -> {index_dir}")
    else:
        err.print(f"indexed {manifest['corpus']['n_documents']} documents into {manifest['n_passages']} passages "
                  f"in {manifest['seconds']['total']:.1f}s ({manifest['size_bytes'] / 1e6:.1f} MB) -> {index_dir}")
    typer.echo(json.dumps(manifest, indent=2))


def _index_milvus(corpus: Optional[Path], index_dir: Optional[Path], config: Optional[Path], overwrite: bool):
    """`preqrag index --backend milvus`: (build the embedded index, then) load it into Milvus."""
    from ..index.embedded import IndexOpenError, build_index
    from ..index.milvus import MilvusError, load_collection

    if index_dir is None:
        err.print("[red]error:[/red] --index is required: the embedded index whose passages and vectors are loaded "
                  "(with --corpus, it is built first)")
        raise typer.Exit(2)
    cfg = _config(config)
    cfg = cfg.model_copy(update={"index": cfg.index.model_copy(update={"backend": "milvus"})})
    bar, progress = _progress_bar()
    with bar:
        try:
            if not (index_dir / "manifest.json").is_file():
                if corpus is None:
                    raise ValueError(f"{index_dir} is not an index; pass --corpus to build it first")
                build_index(corpus, index_dir, cfg, progress=progress)
            manifest = load_collection(index_dir, cfg, overwrite=overwrite,
                                       progress=lambda d, t: progress("milvus upsert", d, t))
        except (IndexOpenError, MilvusError, ValueError, FileExistsError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
    err.print(f"loaded {manifest['n_passages']} passages of {index_dir} into Milvus collection "
              f"{cfg.index.collection!r} at {cfg.index.uri} in {manifest['seconds']:.1f}s")
    typer.echo(json.dumps(manifest, indent=2))


@index_app.command("merge")
def index_merge(shards: list[Path] = typer.Argument(..., help="The N shard directories (any order)."),
                index_dir: Path = typer.Option(..., "--index", help="Index directory to create."),
                config: Optional[Path] = ConfigOpt,
                overwrite: bool = typer.Option(False, help="Replace an existing index.")):
    """Merge shards 0..N-1 into one index (global BM25 statistics; same top-k as a one-shot build)."""
    from ..index.shards import merge_shards

    cfg = _config(config)
    bar, progress = _progress_bar()
    with bar:
        try:
            manifest = merge_shards(shards, index_dir, cfg, overwrite=overwrite, progress=progress)
        except (FileExistsError, ValueError) as e:
            err.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
    err.print(f"merged {manifest['shards']} shards: {manifest['n_passages']} passages "
              f"({manifest['size_bytes'] / 1e6:.1f} MB) -> {index_dir}")
    typer.echo(json.dumps(manifest, indent=2))


@app.command()
def ask(question: str = typer.Argument(..., help="The question."),
        index_dir: Optional[Path] = typer.Option(None, "--index", help=(
            "Index built by `preqrag index` (not needed with [index] backend = \"milvus\").")),
        config: Optional[Path] = ConfigOpt,
        trace: bool = typer.Option(False, "--trace", help="With --json: also the stage trace."),
        as_json: bool = typer.Option(False, "--json", help="Print the LiveRAG answer object as JSON.")):
    """Answer one question: the answer with [n] markers on the sentences a passage supports, the
    documents they stand for and the seconds it took (--json: the LiveRAG answer object)."""
    from .display import answer_time, format_answer
    from ..core.records import Question

    cfg = _config(config)
    pipeline = _pipeline(index_dir, cfg)
    (outcome,) = pipeline.answer([Question(id="q", question=question)])
    if outcome.failure is not None:
        err.print(f"[red]failed[/red] at {outcome.failure.stage}: {outcome.failure.error}")
        raise typer.Exit(1)
    record = outcome.answer.model_dump(mode="json")
    if as_json or trace:
        if trace:
            record["trace"] = outcome.trace.model_dump(mode="json")
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        return
    seconds, size = answer_time(outcome.trace.model_dump(mode="json"))
    typer.echo(format_answer(record, seconds, _attributor(pipeline), size))


def _attributor(pipeline):
    """The citation attributor over the pipeline's own ``[cross_encoder]`` cross-encoder (shared from
    its model pool, not loaded again; the bundled one when the preset has none), or ``None`` when
    it cannot load: the answer is then shown unmarked."""
    from ..components.citations import Attributor, load_attributor
    from ..models.rerankers import shared_reranker

    try:
        scorer = shared_reranker(pipeline.ctx)
        if scorer is not None:
            return Attributor(scorer)
        return load_attributor(cache_dir=pipeline.cfg.run.cache_dir)
    except (ImportError, FileNotFoundError, OSError) as e:
        err.print(f"[yellow]no citation markers[/yellow]: {e}")
        return None


def _run_deadline(output: Path, deadline: str | None, now):
    """``preqrag run --deadline``: the run's :class:`~preqrag.run.deadline.Deadline` (or None), kept
    in the output's sidecar; a bad value exits 2; a passed one is announced."""
    from ..run.deadline import resolve_deadline

    try:
        due, note = resolve_deadline(output, deadline, now)
    except ValueError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    if note:
        err.print(note)
    if due is not None and due.passed():
        err.print(due.passed_note(), style="yellow")
    return due


def _ray_executor(index_dir, cfg, workers: int, address, cpus_per_worker, due):
    """``preqrag run --ray``: a started :class:`~preqrag.run.distributed.RayExecutor` (every actor
    has loaded its pipeline), or exit 2 naming what is missing."""
    from ..run.distributed import RayExecutor

    _require_models(cfg)
    executor = RayExecutor(index_dir, cfg, workers, address=address, cpus_per_worker=cpus_per_worker, deadline=due)
    try:
        executor.__enter__()  # every actor has loaded its pipeline, or the error is here
    except ImportError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    return executor


@app.command()
def run(questions: Path = typer.Argument(..., exists=True, dir_okay=False, help="Questions JSONL."),
        index_dir: Optional[Path] = typer.Option(None, "--index", help=(
            "Index built by `preqrag index` (not needed with [index] backend = \"milvus\").")),
        output: Path = typer.Option(..., "--output", "-o", help="LiveRAG answers JSONL (resumed if present)."),
        config: Optional[Path] = ConfigOpt,
        limit: Optional[int] = typer.Option(None, help="Answer only the first N questions."),
        deadline: Optional[str] = typer.Option(None, "--deadline", help=(
            "Answer every question before this: a duration from now (2h, 30m, 600s, 1h30m) or an ISO "
            "timestamp with a time zone (2026-11-22T10:00:00Z). Degrades per batch when behind "
            "(\\[deadline] levels). Kept in <output>.deadline.json: a restarted run keeps it; another "
            "value overrides it; 'none' drops it.")),
        ray: bool = typer.Option(False, "--ray", help=(
            "Answer on Ray actors, each owning one pipeline (models load once per actor); this process "
            "alone writes the files. Alone, a local Ray is started; --ray-address joins a cluster. Needs "
            "pip install \"preqrag\\[ray]\"; the index must be at the same path on every node.")),
        ray_address: Optional[str] = typer.Option(None, "--ray-address", help=(
            "With --ray: the cluster (auto, host:6379, ray://host:10001).")),
        workers: int = typer.Option(1, "--workers", min=1, help="With --ray: number of actors (pipelines)."),
        cpus_per_worker: Optional[float] = typer.Option(None, "--cpus-per-worker", min=0.01, help=(
            "With --ray: CPUs each actor asks for; its models use that many threads. Default: an equal "
            "share of the cluster's CPUs (at most the largest node's)."))):
    """Answer a question file; re-running resumes and retries failed questions."""
    from datetime import datetime, timezone

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..core.io import read_questions
    from ..run.runner import run_questions, sidecar

    now = datetime.now(timezone.utc)  # a duration counts from the command's start, model loading included
    cfg = _config(config)
    qs, bad = read_questions(questions)
    if not qs:
        err.print(f"[red]error:[/red] {questions} holds no questions"
                  + (f" ({len(bad)} bad lines, first: {bad[0]})" if bad else " (it is empty)"))
        raise typer.Exit(2)
    due = _run_deadline(output, deadline, now)
    if (ray_address is not None or workers != 1 or cpus_per_worker is not None) and not ray:
        err.print("[red]error:[/red] --ray-address, --workers and --cpus-per-worker need --ray")
        raise typer.Exit(2)
    executor = None
    if ray:
        executor = _ray_executor(index_dir, cfg, workers, ray_address, cpus_per_worker, due)
        pipeline = None
    else:
        pipeline = _pipeline(index_dir, cfg)
    with Progress(TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err) as bar:
        task = bar.add_task("answering", total=None)
        try:
            summary = run_questions(pipeline, questions, output, limit=limit, deadline=due, executor=executor,
                                    on_progress=lambda d, t: bar.update(task, completed=d, total=t),
                                    read=(qs, bad))
        except OSError as e:
            if not out_of_space(e):
                raise
            err.print(f"[red]error:[/red] cannot write {e.filename or output}: {e.strerror} (disk full, quota or "
                      f"file size limit). The answers written before are intact in {output}; run the same "
                      "command again when there is space: it resumes with the questions left.")
            raise typer.Exit(2)
        finally:
            if executor is not None:
                executor.__exit__(None, None, None)
    for e in summary.input_errors:
        err.print(f"[yellow]skipped input line[/yellow] {e}")
    err.print(f"{summary.answered} answered, {summary.failed} failed, {summary.skipped} already answered, "
              f"{len(summary.input_errors)} bad input lines -> {output}"
              + (f" (failures: {sidecar(output, 'failed')})" if summary.failed or summary.input_errors else ""))
    if summary.deadline is not None:
        err.print(summary.deadline_line())
    if summary.failed:
        raise typer.Exit(1)


@app.command()
def demo(workdir: Optional[Path] = typer.Option(None, help="Where to write the index and answers "
                                                "(a temporary directory by default)."),
         config: Optional[Path] = ConfigOpt):
    """Index the bundled 47-document corpus and answer its 5 questions with the default models."""
    from .display import answer_time, format_answer
    from ..index.embedded import build_index
    from ..run.runner import run_questions, sidecar

    cfg = _config(config)
    _require_models(cfg)
    work = Path(workdir or tempfile.mkdtemp(prefix="preqrag-demo-"))
    data = resources.files("preqrag") / "data"
    with resources.as_file(data / "demo_corpus.jsonl.gz") as corpus, \
            resources.as_file(data / "demo_questions.jsonl") as qfile:
        idx = work / "index"
        if not (idx / "manifest.json").exists():
            err.print(f"indexing the demo corpus into {idx} ...")
            build_index(corpus, idx, cfg, overwrite=True)
        pipeline = _pipeline(idx, cfg)
        out = work / "answers.jsonl"
        summary = run_questions(pipeline, qfile, out)
    seconds = {}
    traces = sidecar(out, "traces")
    if traces.exists():
        for line in traces.read_text().splitlines():
            t = json.loads(line)
            seconds[str(t["id"])] = answer_time(t)
    attributor = _attributor(pipeline)
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        wall, size = seconds.get(str(rec["id"]), (None, 1))
        typer.echo(format_answer(rec, wall, attributor, size))
    err.print(f"{summary.answered} answered, {summary.failed} failed; answers in {out}")
    if summary.failed:
        raise typer.Exit(1)


@app.command("config")
def show_config(config: Optional[Path] = ConfigOpt,
                pipeline: Optional[str] = typer.Option(None, "--pipeline", "-p", help=(
                    "A preset (preqrag.core.presets): print its settings, with the file's on top.")),
                markdown: bool = typer.Option(False, "--markdown", help=(
                    "Print the configuration reference page (docs/configuration-reference.md) instead: "
                    "every core table's settings with defaults and descriptions; with --config/-p, their values.")),
                part: str = typer.Option("core", "--part", help=(
                    "With --markdown, which page: 'core' (index and retrieval tables, "
                    "docs/configuration-reference.md), 'answering' (generator, LLM, classifier, rewriter, run, "
                    "deadline: docs/configuration-answering.md) or 'systems' (docs/configuration-systems.md).")),
                systems: bool = typer.Option(False, "--systems", help=(
                    "With --markdown: the systems' tables ([cir], [dota], [ginger], [mmr], a plugin's); the same as "
                    "--part systems."))):
    """Print the configuration (defaults, a preset's, or a file's values) as documented TOML, or
    with --markdown as the reference pages (without --config/-p: the shipped defaults)."""
    from ..core.config import config_reference

    if part not in ("core", "answering", "systems"):
        from rich.markup import escape

        err.print(f"[red]--part must be core, answering or systems, not {escape(part)}[/red]")
        raise typer.Exit(2)
    part = "systems" if systems else part
    if markdown and not (config or pipeline):
        typer.echo(config_reference(part=part))  # the shipped defaults, whatever $PREQRAG_LLM_MODEL says
        return
    cfg = _config(config, pipeline)
    typer.echo(config_reference(cfg, part) if markdown else dump_config(cfg))


def _register_sub_commands() -> None:
    """The sub-commands of :mod:`preqrag.cli.commands` (classifier training and prediction, evaluation,
    the API, TREC, learned models, model install) and those a built-in system ships in its
    ``commands`` module (DoTA's ``topics``; :data:`preqrag.core.config.SYSTEMS`, imported by name):
    each module's ``register(app)``. An import error here is a bug or a broken install, and surfaces."""
    from .commands import classifiers as classifiers_cli
    from .commands import evaluation as evaluation_cli
    from .commands import learned as learned_cli
    from .commands import llm as llm_cli
    from .commands import serve as serve_cli
    from .commands import trec as trec_cli

    for module in (classifiers_cli, evaluation_cli, serve_cli, trec_cli, learned_cli, llm_cli):
        module.register(app)
    for system in SYSTEMS:
        # look for the file, not the module: find_spec would import every system package at start-up
        *parent, name = system.split(".")
        where = importlib.util.find_spec(".".join(parent)).submodule_search_locations
        if any((Path(d) / name / "commands.py").exists() for d in where):
            importlib.import_module(f"{system}.commands").register(app)


_register_sub_commands()


def main():  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
