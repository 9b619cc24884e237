"""Batch runs: answer a question file, appending each answer as soon as it is ready.

Files written for ``-o answers.jsonl``:

* ``answers.jsonl`` — LiveRAG answer lines (schema-valid), one per answered question;
* ``answers.traces.jsonl`` — one :class:`~preqrag.core.records.Trace` per answered question;
* ``answers.failed.jsonl`` — failures of the last run (bad input lines and questions whose
  processing failed), rewritten atomically at the end of each run;
* ``answers.run.json`` — counts and timings of the last run (wall seconds, seconds inside
  model inference by kind, see :mod:`preqrag.core.timing`; questions per degradation level and the
  deadline, see :mod:`preqrag.run.deadline`), rewritten atomically at the end;
* ``answers.deadline.json`` — the absolute deadline of a run with ``--deadline``
  (:func:`preqrag.run.deadline.resolve_deadline`), kept for restarts.

Re-running the same command resumes: ids already in ``answers.jsonl`` are skipped, failed
ones are retried. A run killed at any point leaves at most one torn last line, which the
next run removes before appending (see :func:`preqrag.core.io.read_jsonl_tolerant`).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..core.io import (InputError, append_jsonl, atomic_write_text, read_jsonl_tolerant, read_questions, sidecar,
                 stats_path)
from ..core.config import PipelineConfig
from .deadline import Deadline, level_counts, summary_line
from .pipeline import Outcome, Pipeline
from ..core.records import Failure, Question
from ..core.timing import model_busy_seconds, model_calls, model_seconds, model_usage_since


@dataclass
class RunSummary:
    """Counts of one ``run`` call."""

    total: int = 0
    skipped: int = 0
    answered: int = 0
    failed: int = 0
    input_errors: list[InputError] = field(default_factory=list)
    wall_seconds: float = 0.0
    model_seconds: dict[str, float] = field(default_factory=dict)
    model_calls: dict[str, int] = field(default_factory=dict)
    model_busy_seconds: float | None = None
    levels: dict[str, int] = field(default_factory=dict)
    """Questions answered per degradation level (``"0"``: the full pipeline)."""
    deadline: dict | None = None
    """With a deadline: its record (:meth:`preqrag.run.deadline.Deadline.summary`: the deadline,
    ``level_names``, ``finished_before_deadline``, ``seconds_left`` at the end of the run,
    ``fallbacks``, ``batches``)."""

    def deadline_line(self) -> str | None:
        """One line on the deadline, for the console (None without one;
        :func:`preqrag.run.deadline.summary_line`)."""
        return None if self.deadline is None else summary_line(self.deadline, self.levels)

    def to_dict(self) -> dict:
        """JSON-ready form (input errors as strings); adds ``model_seconds_total`` and
        ``non_model_overhead_fraction`` = 1 − model seconds / wall seconds of this call."""
        # wall time with at least one model call in flight: with run.overlap the LLM and the
        # cross-encoder run at once, and the sum over kinds would overstate model time
        total = self.model_busy_seconds if self.model_busy_seconds is not None else sum(self.model_seconds.values())
        return {"total": self.total, "skipped": self.skipped, "answered": self.answered,
                "failed": self.failed, "input_errors": [str(e) for e in self.input_errors],
                "wall_seconds": round(self.wall_seconds, 3),
                "model_seconds": {k: round(v, 3) for k, v in self.model_seconds.items()},
                "model_calls": self.model_calls, "model_seconds_total": round(total, 3),
                "degradation_levels": self.levels, "deadline": self.deadline,
                "non_model_overhead_fraction": (round(1 - total / self.wall_seconds, 4)
                                                if self.wall_seconds > 0 else None)}


def answered_ids(output: str | Path) -> set[str]:
    """Ids (as str) already in an answer file; repairs a torn last line first."""
    return {str(r["id"]) for r in read_jsonl_tolerant(output, repair=True) if "id" in r}


def _answered_batches(pipeline: Pipeline, batches: list[list[Question]]) -> Iterator[tuple[int, list[Outcome]]]:
    """Yield ``(questions done so far, outcomes)`` per batch, in order.

    With ``run.overlap`` (auto: on for the openai backend), the retrieval stages of batch
    i+1 run in a worker thread while batch i is generating; answers are still written by
    the caller's thread only, batch by batch.
    """
    cfg = pipeline.cfg
    overlap = cfg.run.overlap if cfg.run.overlap is not None else cfg.llm.backend == "openai"
    done = 0
    if not overlap or len(batches) < 2:
        for b in batches:
            done += len(b)
            yield done, pipeline.answer(b)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="preqrag-prepare") as pool:
        nxt: Future = pool.submit(pipeline.prepare, batches[0])
        for i, b in enumerate(batches):
            prepared = nxt.result()
            if i + 1 < len(batches):
                nxt = pool.submit(pipeline.prepare, batches[i + 1])
            done += len(b)
            yield done, pipeline.generate(prepared)


class Executor(Protocol):
    """What answers the batches of :func:`run_questions`: :class:`LocalExecutor` (the pipeline in
    this process), :class:`preqrag.run.deadline.DeadlineRunner` (a level per batch, to a deadline),
    :class:`preqrag.run.distributed.RayExecutor` (Ray actors). The runner owns the loop: it reads the
    questions, skips the answered ones, writes answers, traces and failures as batches complete,
    and reads every member below (none is optional)."""

    cfg: PipelineConfig
    fallbacks: int
    """Questions answered extractively after their LLM work ran past a deadline (0 without one)."""
    batches: list[dict]
    """Per batch under a deadline, what was planned and measured (``answers.run.json``'s
    ``deadline.batches``); empty without one."""

    def answered_batches(self, batches: list[list[Question]]) -> Iterator[tuple[int, list[Outcome]]]:
        """Yield ``(questions done so far, outcomes)`` per batch as batches complete."""
        ...

    def model_usage(self) -> tuple[dict[str, float], dict[str, int]] | None:
        """``(model seconds, model calls)`` by model kind of the models that answered, when they ran
        in other processes (Ray actors: this process's counters did not see them); None: they ran
        here, and the runner reads this process's counters."""
        ...


class LocalExecutor:
    """The pipeline in this process, batch after batch (:func:`_answered_batches`: with
    ``run.overlap``, batch i+1's retrieval runs while batch i generates); no deadline, so no
    fallbacks or per-batch plans."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.cfg = pipeline.cfg
        self.fallbacks = 0
        self.batches: list[dict] = []

    def answered_batches(self, batches: list[list[Question]]) -> Iterator[tuple[int, list[Outcome]]]:
        return _answered_batches(self.pipeline, batches)

    def model_usage(self) -> None:
        """The models ran in this process: None (the runner reads its counters)."""
        return None


def _append(path: Path, records: list[dict]) -> None:
    """:func:`append_jsonl`, its OSError naming ``path`` (a full disk says which file it stopped)."""
    try:
        append_jsonl(path, records)
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise


def _write_batches(answered_batches, output: Path, n_todo: int, summary: RunSummary, failures: list[Failure],
                   on_progress: Callable[[int, int], None] | None) -> tuple[list[int], float | None]:
    """Append each answered batch to ``output`` (traces first, so an answer never lacks its
    trace), count it in ``summary``, collect its failures; returns the answered questions'
    degradation levels and when the last answers were written (epoch seconds; None: none)."""
    levels: list[int] = []
    last_write: float | None = None
    for done_count, outcomes in answered_batches:
        traces = [o.trace.model_dump(mode="json") for o in outcomes if o.trace is not None and o.answer is not None]
        _append(sidecar(output, "traces"), traces)
        _append(output, [o.answer.model_dump(mode="json") for o in outcomes if o.answer is not None])
        last_write = time.time()
        failures += [o.failure for o in outcomes if o.failure is not None]
        levels += [o.trace.degradation_level for o in outcomes if o.answer is not None and o.trace is not None]
        summary.answered += sum(o.answer is not None for o in outcomes)
        summary.failed += sum(o.failure is not None for o in outcomes)
        if on_progress:
            on_progress(done_count, n_todo)
    return levels, last_write


def run_questions(pipeline: Pipeline | None, questions_path: str | Path, output: str | Path, *,
                  limit: int | None = None,
                  on_progress: Callable[[int, int], None] | None = None,
                  deadline: Deadline | None = None,
                  executor: "Executor | None" = None,
                  read: "tuple[list[Question], list[InputError]] | None" = None) -> RunSummary:
    """Answer every question of ``questions_path`` not yet in ``output``.

    Args:
        pipeline: the pipeline (None with ``executor``).
        questions_path: JSONL question file (see :func:`preqrag.core.io.read_questions`).
        output: the LiveRAG answer file (created or resumed).
        limit: answer at most this many questions of the file (in file order).
        on_progress: called with ``(done, todo)`` after each batch.
        deadline: answer every question before it (:mod:`preqrag.run.deadline`: degradation
            levels chosen per batch from the measured pace, extractive answers when the LLM
            cannot make it); ``None``: every question at the full pipeline. Its levels are
            ``pipeline.cfg.deadline``.
        executor: an :class:`Executor` to answer the batches instead, e.g. Ray actors (:class:`preqrag.run.distributed.RayExecutor`,
            ``preqrag run --ray``): this process alone writes answers, traces and failures, batch by
            batch as they complete (so the answer file is in completion order, not file order);
            with ``deadline``, every actor works to the same absolute deadline.
        read: ``questions_path`` as the caller already read it (:func:`preqrag.core.io.read_questions`'s
            ``(questions, errors)``), so that the file is read once; None: read here.

    Returns:
        RunSummary (also written to :func:`stats_path`). Bad input lines are in
        ``input_errors`` and in the failed file. Its wall and model seconds cover this call
        only (not index opening or model loading done before it).
    """
    if (pipeline is None) == (executor is None):
        raise ValueError("give a pipeline or an executor, not both")
    cfg = pipeline.cfg if pipeline is not None else executor.cfg
    t0 = time.perf_counter()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    ms0, mc0, busy0 = model_seconds(), model_calls(), model_busy_seconds()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    questions, errors = read if read is not None else read_questions(questions_path)
    if limit is not None:
        questions = questions[:limit]
    done = answered_ids(output)
    read_jsonl_tolerant(sidecar(output, "traces"), repair=True)
    todo: list[Question] = [q for q in questions if q.key not in done]
    summary = RunSummary(total=len(questions), skipped=len(questions) - len(todo), input_errors=errors)
    failures: list[Failure] = []
    bs = cfg.run.batch_size
    batches = [todo[start:start + bs] for start in range(0, len(todo), bs)]
    if executor is None:
        executor = deadline.runner(pipeline) if deadline is not None else LocalExecutor(pipeline)
    levels, last_write = _write_batches(executor.answered_batches(batches), output, len(todo), summary, failures,
                                        on_progress)
    lines = [json.dumps({"id": None, "question": None, "error": str(e), "stage": "input",
                         "file": e.file, "line": e.line, "field": e.field}) for e in errors]
    lines += [f.model_dump_json() for f in failures]
    atomic_write_text(sidecar(output, "failed"), "".join(line + "\n" for line in lines))
    summary.wall_seconds = time.perf_counter() - t0
    usage = executor.model_usage()
    if usage is not None:  # the models ran elsewhere (Ray actors): their own counters
        summary.model_seconds, summary.model_calls = usage
        summary.model_busy_seconds = None
    else:
        summary.model_seconds, summary.model_calls = model_usage_since(ms0, mc0)
        summary.model_busy_seconds = model_busy_seconds() - busy0
    summary.levels = level_counts(levels, cfg.deadline.levels)
    if deadline is not None:
        summary.deadline = deadline.summary(cfg, last_write, executor.fallbacks, executor.batches)
    stats = {"started": started, "questions_file": str(questions_path), **summary.to_dict()}
    atomic_write_text(stats_path(output), json.dumps(stats, indent=2) + "\n")
    return summary
