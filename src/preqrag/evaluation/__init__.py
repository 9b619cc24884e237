"""Evaluation of pipeline runs: retrieval vs gold documents, classification, LLM judging, reports.

Public API::

    run = load_run("runs/a/answers.jsonl")             # answers, traces, failures
    evaluate_retrieval(run.traces, questions, failed_ids=run.failed_ids)   # retrieval.py
    evaluate_classification(run.predictions, questions)                    # classification.py
    judge_answers(run.answers, questions, llm, "judgments.jsonl")           # judge.py
    write_report([...], "report_dir")                                      # report.py

CLI: ``preqrag eval RUN... --questions dev.jsonl -o DIR`` (:mod:`preqrag.cli.commands.evaluation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ..core.io import read_jsonl_tolerant, sidecar
from ..core.records import Trace
from .classification import evaluate_classification, predictions_from_traces, read_predictions
from .judge import judge_answers, summarise_judgments
from .report import write_report
from .retrieval import evaluate_retrieval


@dataclass
class RunData:
    """What a ``preqrag run`` (or ``preqrag classify``) wrote.

    Attributes:
        name: display name (default: the run's directory name).
        path: the answers (or classify output) file.
        kind: ``"run"`` (answers + traces) or ``"classify"`` (``{"id", "question_type"}`` lines).
        answers: LiveRAG answer dicts, file order, one per id (a later line wins).
        traces: Trace per id (a later line wins); ``[]`` if the traces file is missing.
        failures: ``{id, question, error, stage}`` of questions that have no answer.
        predictions: ``{id: "single" | "multi"}`` (from traces, or the classify output).
        warnings: problems met while reading (missing files, invalid lines).
    """

    name: str
    path: Path
    kind: Literal["run", "classify"] = "run"
    answers: list[dict] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    predictions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def failed_ids(self) -> list[str]:
        """Ids of the failed questions."""
        return [str(f["id"]) for f in self.failures]


def _is_classify_output(path: Path) -> bool:
    from ..core.io import iter_json_lines

    for _, obj, _ in iter_json_lines(path):
        if obj is not None:
            return isinstance(obj, dict) and "question_type" in obj and "answer" not in obj
    return False


def load_run(answers_path: str | Path, name: str | None = None) -> RunData:
    """Load a run's answers, traces (``<stem>.traces.jsonl``) and failures (``<stem>.failed.jsonl``).

    Args:
        answers_path: an ``answers.jsonl``, a directory holding one, or a ``preqrag classify``
            output (detected by a first line with ``question_type`` and no ``answer``).
        name: display name; default the parent directory's name (the file stem when the
            file is in the current directory).

    Returns:
        RunData. Torn or invalid lines are skipped and reported in ``warnings``.

    Raises:
        FileNotFoundError: the answers file does not exist.
    """
    p = Path(answers_path)
    if p.is_dir():
        p = p / "answers.jsonl"
    if not p.is_file():
        raise FileNotFoundError(f"run file not found: {p}")
    if name is None:
        parent = p.resolve().parent.name
        name = parent if parent and p.parent != Path(".") else p.stem
    run = RunData(name=name, path=p)
    if _is_classify_output(p):
        run.kind = "classify"
        run.predictions = read_predictions(p)
        return run

    answers: dict[str, dict] = {}
    for obj in read_jsonl_tolerant(p):
        if "id" in obj and "answer" in obj:
            answers[str(obj["id"])] = obj
        else:
            run.warnings.append(f"{p}: a line without id/answer skipped")
    run.answers = list(answers.values())

    tpath = sidecar(p, "traces")
    traces: dict[str, Trace] = {}
    if tpath.exists():
        bad = 0
        for obj in read_jsonl_tolerant(tpath):
            try:
                t = Trace.model_validate(obj)
            except ValidationError:
                bad += 1
                continue
            traces[str(t.id)] = t
        if bad:
            run.warnings.append(f"{tpath}: {bad} invalid trace line(s) skipped")
    else:
        run.warnings.append(f"{tpath}: missing (no retrieval or classification metrics)")
    run.traces = list(traces.values())
    run.predictions = predictions_from_traces(run.traces)

    fpath = sidecar(p, "failed")
    done = set(answers) | set(traces)
    failures = {str(f["id"]): f for f in read_jsonl_tolerant(fpath) if "id" in f}
    run.failures = [f for fid, f in failures.items() if fid not in done]
    return run


__all__ = ["RunData", "load_run", "evaluate_retrieval", "evaluate_classification",
           "predictions_from_traces", "read_predictions", "judge_answers", "summarise_judgments",
           "write_report"]
