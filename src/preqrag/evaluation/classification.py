"""Single- vs multi-document question classification accuracy (PreQRAG §2.1, Table 1).

Gold label: ``n_gold == 1`` → ``"single"``, ``n_gold >= 2`` → ``"multi"`` (the bench README's
ground truth; :func:`preqrag.evaluation.retrieval.gold_type`). The paper's Table 1 reports
accuracy separately on gold single-doc and gold multi-doc questions (i.e. the recall of each
class); we add overall accuracy, balanced accuracy (the mean of the two, insensitive to the
class mix of the question file) and a confusion table by DataMorgana ``answer_type``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.records import Question, Trace
from .retrieval import category_value, gold_type

LABELS = ("single", "multi")


def predictions_from_traces(traces: Iterable[Trace | Mapping[str, Any]]) -> dict[str, str]:
    """``{str(id): classification.question_type}`` from traces (later duplicates win)."""
    out: dict[str, str] = {}
    for t in traces:
        if isinstance(t, Trace):
            out[str(t.id)] = t.classification.question_type
        else:
            out[str(t["id"])] = t["classification"]["question_type"]
    return out


def read_predictions(path: str | Path) -> dict[str, str]:
    """Read a ``preqrag classify`` output: one ``{"id", "question_type"}`` per line.

    Lines that are not JSON objects with an ``id`` and a ``question_type`` in
    ``{"single", "multi"}`` (or a nested ``classification.question_type``, as in traces) are
    skipped.

    Raises:
        FileNotFoundError: missing file.
    """
    from ..core.io import iter_json_lines

    out: dict[str, str] = {}
    for _, obj, _ in iter_json_lines(path):
        if not isinstance(obj, dict) or "id" not in obj:
            continue
        qt = obj.get("question_type")
        if qt is None and isinstance(obj.get("classification"), dict):
            qt = obj["classification"].get("question_type")
        if qt in LABELS:
            out[str(obj["id"])] = qt
    return out


def _acc(correct: int, n: int) -> float | None:
    return correct / n if n else None


def evaluate_classification(pred: Mapping[str, str], questions: Sequence[Question]) -> dict:
    """Accuracy of single/multi predictions against the gold type.

    Args:
        pred: ``{str(question id): "single" | "multi"}``.
        questions: questions with ``n_gold`` or ``gold_doc_ids``; those without gold, and
            those without a prediction, are not scored (counted in ``n_no_gold`` /
            ``n_missing``).

    Returns:
        ``{"n": scored, "n_missing", "n_no_gold", "n_single", "n_multi",
        "accuracy_single"`` (Table 1 "Single-doc": share of gold-single predicted single),
        ``"accuracy_multi"`` (Table 1 "Multi-doc"), ``"accuracy"`` (overall, Table 1's
        definition over all questions), ``"balanced_accuracy"`` (mean of the two),
        ``"confusion": {gold: {pred: count}}``, ``"by_answer_type": {answer_type: {"n",
        "gold_single", "gold_multi", "pred_single", "pred_multi", "correct", "accuracy"}}}``.
        Accuracies are ``None`` when their denominator is 0.
    """
    confusion = {g: {p: 0 for p in LABELS} for g in LABELS}
    by_at: dict[str, dict[str, Any]] = {}
    n_missing = n_no_gold = 0
    for q in questions:
        g = gold_type(q)
        if g is None:
            n_no_gold += 1
            continue
        p = pred.get(q.key)
        if p not in LABELS:
            n_missing += 1
            continue
        confusion[g][p] += 1
        at = category_value(q, "answer_type")
        row = by_at.setdefault(at, {"n": 0, "gold_single": 0, "gold_multi": 0,
                                    "pred_single": 0, "pred_multi": 0, "correct": 0})
        row["n"] += 1
        row[f"gold_{g}"] += 1
        row[f"pred_{p}"] += 1
        row["correct"] += int(g == p)
    for row in by_at.values():
        row["accuracy"] = _acc(row["correct"], row["n"])
    n_s = sum(confusion["single"].values())
    n_m = sum(confusion["multi"].values())
    acc_s = _acc(confusion["single"]["single"], n_s)
    acc_m = _acc(confusion["multi"]["multi"], n_m)
    return {
        "n": n_s + n_m,
        "n_missing": n_missing,
        "n_no_gold": n_no_gold,
        "n_single": n_s,
        "n_multi": n_m,
        "accuracy_single": acc_s,
        "accuracy_multi": acc_m,
        "accuracy": _acc(confusion["single"]["single"] + confusion["multi"]["multi"], n_s + n_m),
        "balanced_accuracy": (acc_s + acc_m) / 2 if acc_s is not None and acc_m is not None else None,
        "confusion": confusion,
        "by_answer_type": dict(sorted(by_at.items())),
    }
