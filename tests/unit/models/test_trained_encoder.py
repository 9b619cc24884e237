"""A fine-tuned encoder's identity (``preqrag train-encoder``'s record in its directory), which the
encoder carries and every trace of a pipeline searching with it records."""

from __future__ import annotations

import json
import os

from preqrag.models.encoders.trained import ENCODER_RECORD, encoder_identity


def test_an_encoder_directory_with_a_training_record_has_an_identity(tmp_path):
    assert encoder_identity(tmp_path) is None  # any other model
    assert encoder_identity(tmp_path / "weights.safetensors") is None
    (tmp_path / ENCODER_RECORD).write_text(json.dumps({"model_sha256": "abc", "trained_on": {}}))
    assert encoder_identity(tmp_path) == {"kind": "encoder", "path": os.path.abspath(tmp_path), "sha256": "abc"}
    (tmp_path / ENCODER_RECORD).write_text("{torn")
    assert encoder_identity(tmp_path) == {"kind": "encoder", "path": os.path.abspath(tmp_path), "sha256": ""}
