"""Batch runs: answer a question file, appending each answer as soon as it is ready.

Files written for ``-o answers.jsonl``:

* ``answers.jsonl`` — LiveRAG answer lines (schema-valid), one per answered question;
* ``answers.traces.jsonl`` — one :class:`~preqrag.records.Trace` per answered question;
* ``answers.failed.jsonl`` — failures of the last run (bad input lines and questions whose
  processing failed), rewritten atomically at the end of each run.

Re-running the same command resumes: ids already in ``answers.jsonl`` are skipped, failed
ones are retried. A run killed at any point leaves at most one torn last line, which the
next run removes before appending (see :func:`preqrag.io.read_jsonl_tolerant`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .io import InputError, append_jsonl, atomic_write_text, read_jsonl_tolerant, read_questions
from .pipeline import Outcome, Pipeline
from .records import Failure, Question


def sidecar(output: str | Path, kind: str) -> Path:
    """``answers.jsonl`` → ``answers.<kind>.jsonl``."""
    output = Path(output)
    stem = output.name[:-len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.{kind}.jsonl")


@dataclass
class RunSummary:
    """Counts of one ``run`` call."""

    total: int = 0
    skipped: int = 0
    answered: int = 0
    failed: int = 0
    input_errors: list[InputError] = field(default_factory=list)


def answered_ids(output: str | Path) -> set[str]:
    """Ids (as str) already in an answer file; repairs a torn last line first."""
    return {str(r["id"]) for r in read_jsonl_tolerant(output, repair=True) if "id" in r}


def run_questions(pipeline: Pipeline, questions_path: str | Path, output: str | Path, *,
                  limit: int | None = None,
                  on_progress: Callable[[int, int], None] | None = None) -> RunSummary:
    """Answer every question of ``questions_path`` not yet in ``output``.

    Args:
        pipeline: the pipeline.
        questions_path: JSONL question file (see :func:`preqrag.io.read_questions`).
        output: the LiveRAG answer file (created or resumed).
        limit: answer at most this many questions of the file (in file order).
        on_progress: called with ``(done, todo)`` after each batch.

    Returns:
        RunSummary. Bad input lines are in ``input_errors`` and in the failed file.
    """
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    questions, errors = read_questions(questions_path)
    if limit is not None:
        questions = questions[:limit]
    done = answered_ids(output)
    read_jsonl_tolerant(sidecar(output, "traces"), repair=True)
    todo: list[Question] = [q for q in questions if q.key not in done]
    summary = RunSummary(total=len(questions), skipped=len(questions) - len(todo), input_errors=errors)
    failures: list[Failure] = []
    bs = pipeline.cfg.run.batch_size
    for start in range(0, len(todo), bs):
        outcomes: list[Outcome] = pipeline.answer(todo[start:start + bs])
        traces = [o.trace.model_dump(mode="json") for o in outcomes if o.trace is not None and o.answer is not None]
        append_jsonl(sidecar(output, "traces"), traces)  # traces first: an answer never lacks its trace
        append_jsonl(output, [o.answer.model_dump(mode="json") for o in outcomes if o.answer is not None])
        for o in outcomes:
            if o.failure is not None:
                failures.append(o.failure)
        summary.answered += sum(o.answer is not None for o in outcomes)
        summary.failed += sum(o.failure is not None for o in outcomes)
        if on_progress:
            on_progress(min(start + bs, len(todo)), len(todo))
    lines = [json.dumps({"id": None, "question": None, "error": str(e), "stage": "input",
                         "file": e.file, "line": e.line, "field": e.field}) for e in errors]
    lines += [f.model_dump_json() for f in failures]
    atomic_write_text(sidecar(output, "failed"), "".join(line + "\n" for line in lines))
    return summary
