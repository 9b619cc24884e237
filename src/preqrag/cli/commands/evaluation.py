"""``preqrag eval``: score one or more runs against a question file with gold, write a report.

    preqrag eval runA/answers.jsonl runB/answers.jsonl --questions dev.jsonl -o report_dir \\
        [--name A --name B] [--judge --config preqrag.toml --judge-limit 100]

Writes to ``report_dir``: ``report.md``, ``report.html`` (self-contained), ``metrics.json``,
``plots/*.png``, ``trec/<run>/{qrels,<stage>}.trec`` and, with ``--judge``,
``judgments/<run>.jsonl`` (resumable: re-running skips what is already judged).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...core.io import read_questions
from ...core.records import Question
from ...core.contracts import LLM
from ...evaluation import RunData, load_run
from ...evaluation.classification import evaluate_classification
from ...evaluation.judge import judge_answers, judge_is_meaningless, summarise_judgments
from ...evaluation.retrieval import evaluate_retrieval, gold_docs
from ...evaluation.report import write_report


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "run"


def evaluate_run(run: RunData, questions: Sequence[Question], out_dir: str | Path, *,
                 judge_llm: LLM | None = None, judge_model: str | None = None,
                 judge_limit: int | None = None, progress=None) -> dict:
    """Everything measurable about one run, as the dict :func:`report.write_report` takes.

    Args:
        run: from :func:`load_run`.
        questions: questions with gold (``gold_doc_ids``, ``n_gold``, ``answer``).
        out_dir: report directory; TREC files go to ``trec/<run>/``, judgments to
            ``judgments/<run>.jsonl``.
        judge_llm: the judge; ``None`` skips judging.
        judge_model: the judge's configured model name (for the 135M warning); default
            ``judge_llm.name``.
        judge_limit: judge only the first N answers.
        progress: ``progress(done, total)`` during judging.

    Returns:
        ``{"name", "summary", "retrieval", "classification", "judge"}``; a part that cannot be
        computed (no traces, classify-only input, no judge) is ``None``.
    """
    out = Path(out_dir)
    summary = {"kind": run.kind, "path": str(run.path), "answers": len(run.answers),
               "traces": len(run.traces), "failed": len(run.failures),
               "predictions": len(run.predictions), "warnings": list(run.warnings)}
    retrieval = None
    if run.traces or run.failures:
        retrieval = evaluate_retrieval(run.traces, questions, failed_ids=run.failed_ids,
                                       trec_dir=out / "trec" / _safe(run.name), run_name=_safe(run.name))
    classification = None
    if run.predictions:
        # A run is scored on the questions it covers (answered, traced or failed): a failed
        # question counts as "without prediction", questions it never saw do not count.
        covered = set(run.predictions) | {str(a["id"]) for a in run.answers} | set(run.failed_ids)
        scope = questions if run.kind == "classify" else [q for q in questions if q.key in covered]
        classification = evaluate_classification(run.predictions, scope)
    judge = None
    if judge_llm is not None and run.answers:
        model = judge_model or getattr(judge_llm, "name", "")
        recs = judge_answers(run.answers, questions, judge_llm,
                             out / "judgments" / f"{_safe(run.name)}.jsonl",
                             limit=judge_limit, progress=progress)
        judge = {"model": model, "meaningless": judge_is_meaningless(model) or
                 judge_is_meaningless(getattr(judge_llm, "name", "")),
                 "n_answers_judged": len({r["id"] for r in recs}),
                 "summary": summarise_judgments(recs, questions)}
    return {"name": run.name, "summary": summary, "retrieval": retrieval,
            "classification": classification, "judge": judge}


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            n = f"{n}-{seen[n]}"
        else:
            seen[n] = 1
        out.append(n)
    return out


def register(app) -> None:
    """Add the ``eval`` command to a ``typer.Typer`` app."""
    import typer

    @app.command("eval")
    def eval_cmd(
        runs: list[Path] = typer.Argument(..., help="answers.jsonl of each run (or its directory, or a "
                                          "`preqrag classify` output)."),
        questions: Path = typer.Option(..., "--questions", help="Question file with gold "
                                       "(gold_doc_ids, n_gold, answer), e.g. dev.jsonl."),
        out: Path = typer.Option(Path("eval_report"), "-o", "--out", help="Report directory."),
        name: list[str] = typer.Option(None, "--name", help="Run name (repeat, one per run; "
                                       "default: the run's directory name)."),
        judge: bool = typer.Option(False, "--judge/--no-judge", help="Judge answers with the LLM of "
                                   "--config (PreQRAG C.1 + LiveRAG scales)."),
        config: Path = typer.Option(None, "--config", help="preqrag.toml whose [llm] is the judge."),
        judge_limit: int = typer.Option(None, "--judge-limit", min=1, help="Judge only the first N "
                                        "answers of each run."),
        breakdown_stage: str = typer.Option(None, "--breakdown-stage", help="Stage of the breakdown "
                                            "tables (default: final)."),
        allow_trained_on: bool = typer.Option(False, "--allow-trained-on", help="Score a run whose learned "
                                              "models (train-ranker, train-encoder) were trained on some of the "
                                              "evaluated questions (refused by default: in-sample figures)."),
    ) -> None:
        """Score runs against gold documents/answers and write report.md, report.html, metrics.json."""
        if name and len(name) != len(runs):
            raise typer.BadParameter(f"--name given {len(name)} time(s) for {len(runs)} run(s)",
                                     param_hint="--name")
        try:
            qs, errors = read_questions(questions)
        except FileNotFoundError as e:
            raise typer.BadParameter(str(e), param_hint="--questions") from e
        for err in errors[:10]:
            typer.echo(f"warning: {err}", err=True)
        if not any(gold_docs(q) for q in qs):
            raise typer.BadParameter(f"{questions}: no question has gold_doc_ids", param_hint="--questions")
        loaded: list[RunData] = []
        for i, path in enumerate(runs):
            try:
                loaded.append(load_run(path, name[i] if name else None))
            except FileNotFoundError as e:
                raise typer.BadParameter(str(e), param_hint="RUNS") from e
        for r, n in zip(loaded, _unique([r.name for r in loaded])):
            r.name = n
        if not allow_trained_on:
            from ...learned.guard import TrainedOnError, check_traces

            for r in loaded:
                try:
                    check_traces(r.traces, qs)
                except TrainedOnError as e:
                    typer.echo(f"error: {r.name}: {e}", err=True)
                    raise typer.Exit(2)
        llm = model = None
        if judge:
            from ...core.config import ConfigError, load_config
            from ...models.llm import load_llm

            try:
                cfg = load_config(config)
            except ConfigError as e:
                raise typer.BadParameter(str(e), param_hint="--config") from e
            llm, model = load_llm(cfg.llm, cache_dir=cfg.run.cache_dir), cfg.llm.model
            if judge_is_meaningless(model):
                typer.echo("WARNING: the judge is SmolLM2-135M; its scores are not meaningful "
                           "(use --config with a capable [llm]).", err=True)
        results = []
        for r in loaded:
            for w in r.warnings:
                typer.echo(f"warning: {w}", err=True)
            typer.echo(f"evaluating {r.name} ({r.path}) ...", err=True)
            prog = (lambda d, t, n=r.name: typer.echo(f"  judged {d}/{t} ({n})", err=True)) if llm else None
            results.append(evaluate_run(r, qs, out, judge_llm=llm, judge_model=model,
                                        judge_limit=judge_limit, progress=prog))
        paths = write_report(results, out, questions_path=str(questions), breakdown_stage=breakdown_stage)
        for k, p in paths.items():
            typer.echo(f"{k}: {p}")
