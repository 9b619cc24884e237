"""Refuse to evaluate a learned model on the questions it was trained on (issue 14).

Both training commands record their training questions in their output: ``trained_on``
(``ids`` and ``question_sha256``, the SHA-256 of the lower-cased, whitespace-collapsed text,
so a renamed copy is caught too) in the ranker's JSON file, and in
``<MODEL_DIR>/preqrag_training.json`` for a fine-tuned encoder
(:mod:`preqrag.models.encoders.trained`). A pipeline using such a model records
``{"kind", "path", "sha256"}`` per model in every trace (``Trace.learned_models``, collected from
its components' ``learned_models``: :class:`preqrag.learned.ranker.LearnedMerge`'s ranker, a dense
retriever's fine-tuned encoder); ``preqrag eval`` and the bench scripts call
:func:`check_traces` / :func:`check_models`, which raise :class:`TrainedOnError` when an
evaluated question was a training question.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..core.records import Question
from ..models.encoders.trained import ENCODER_RECORD


class TrainedOnError(ValueError):
    """Evaluated questions overlap a learned model's training questions (or it cannot be checked)."""


def _question_sha256(text: str) -> str:
    from .ranker import question_sha256

    return question_sha256(text)


def trained_on(model: dict[str, str]) -> dict[str, set[str]]:
    """The training questions of a model recorded in a trace.

    Returns:
        ``{"ids": {...}, "question_sha256": {...}}``.

    Raises:
        TrainedOnError: the model file is gone, unreadable, or its hash differs from the one the
            trace recorded (it cannot be checked; retrain-and-evaluate must use the same file).
    """
    path = Path(model.get("path", ""))
    kind = model.get("kind")
    file = path / ENCODER_RECORD if kind == "encoder" else path
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainedOnError(f"cannot check the {kind} model {path} the run used ({e}); evaluation needs it to "
                             "refuse its training questions (or pass --allow-trained-on)") from e
    recorded = model.get("sha256") or ""
    actual = obj.get("sha256") if kind != "encoder" else obj.get("model_sha256")
    if recorded and actual != recorded:
        raise TrainedOnError(f"the {kind} model {path} changed since the run (sha256 {actual} != {recorded}); "
                             "re-run with the current model (or pass --allow-trained-on)")
    t = obj.get("trained_on") or {}
    return {"ids": {str(x) for x in t.get("ids", [])}, "question_sha256": set(t.get("question_sha256", []))}


def check_models(models: Iterable[dict[str, str]], questions: Sequence[Question]) -> None:
    """Raise if any of ``questions`` is a training question of any of ``models``.

    Args:
        models: model identities (``Trace.learned_models`` entries).
        questions: the questions being evaluated.

    Raises:
        TrainedOnError: naming the model, the number of overlapping questions and a few ids.
    """
    seen: set[tuple[str, str]] = set()
    for m in models:
        key = (m.get("path", ""), m.get("sha256", ""))
        if key in seen:
            continue
        seen.add(key)
        t = trained_on(m)
        overlap = [q.key for q in questions
                   if q.key in t["ids"] or _question_sha256(q.question) in t["question_sha256"]]
        if overlap:
            raise TrainedOnError(
                f"{len(overlap)} of the {len(questions)} evaluated questions were used to train the "
                f"{m.get('kind')} model {m.get('path')} (e.g. {', '.join(overlap[:5])}); evaluate on held-out "
                "questions (bench/learned.py cross-validates) or pass --allow-trained-on to score anyway")


def check_traces(traces: Iterable[Any], questions: Sequence[Question]) -> None:
    """:func:`check_models` for the models recorded in traces (Trace objects or their dicts),
    against the questions those traces answer."""
    models: dict[tuple[str, str], dict[str, str]] = {}
    ids: set[str] = set()
    for t in traces:
        lm = t.get("learned_models") if isinstance(t, dict) else getattr(t, "learned_models", None)
        tid = t.get("id") if isinstance(t, dict) else t.id
        ids.add(str(tid))
        for m in lm or []:
            models[(m.get("path", ""), m.get("sha256", ""))] = m
    if models:
        check_models(models.values(), [q for q in questions if q.key in ids])
