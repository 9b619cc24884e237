"""The training record of an encoder fine-tuned on the user's questions (``preqrag train-encoder``,
:mod:`preqrag.learned.encoder`): ``<MODEL_DIR>/preqrag_training.json`` holds its training questions
and the weights' fingerprint. An encoder loaded from such a directory carries its identity
(``Encoder.learned_models``, set by :func:`preqrag.models.encoders.load_encoder`), which every trace
of a pipeline searching with it records, so that evaluation refuses its training questions
(:mod:`preqrag.learned.guard`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

ENCODER_RECORD = "preqrag_training.json"
"""File inside a fine-tuned encoder's directory holding its training record."""


def encoder_identity(location: str | Path) -> dict[str, str] | None:
    """``{"kind": "encoder", "path", "sha256"}`` of a directory written by ``preqrag train-encoder``
    (``sha256``: the weights' fingerprint in its training record; ``""`` when the record cannot be
    read), or ``None`` for any other model (no record in ``location``)."""
    record = Path(location) / ENCODER_RECORD
    if not record.is_file():
        return None
    try:
        obj = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"kind": "encoder", "path": os.path.abspath(location), "sha256": ""}
    return {"kind": "encoder", "path": os.path.abspath(location), "sha256": str(obj.get("model_sha256", ""))}
