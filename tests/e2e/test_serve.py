"""`preqrag serve`, tested for real: server processes on free localhost ports over a real small
index with the bundled models (started and stopped by the tests), its HTTP API, and its page in
headless Chromium (Debian's `chromium` driven by Playwright; no browser download).

Two server processes serve the whole module: the main one (two pipelines, gold questions; the API
tests, the fuzzer, the page), then, once it has been SIGKILLed under load, one started again on its
port with an API key and a small queue (the key and 429 tests). The worker, timing and backend
in-process with fakes: tests/unit/serve/test_serve_worker.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from _bench import unavailable
from conftest import REPO, TEST_OVERRIDES, _free_port, config_toml, run_cli
from fakes import http

SERVE_OVERRIDES = {**TEST_OVERRIDES, "embedder": {"name": "wordllama"}, "rewriter": {"name": "none"},
                   "cross_encoder": {"depth": 8, "max_length": 128},
                   "generator": {"sentence_scorer": "words", "max_new_tokens": 8, "max_passage_tokens": 32},
                   "llm": {"n_threads": 1}, "run": {"batch_size": 4}}
"""Fast test pipeline: no LLM rewriting, the WordLlama embedder (no torch to import: a server
process starts in seconds), the default classifier, cross-encoder and LLM, short answers from
short prompts (32 tokens per passage; 128 per reranked pair), and llama.cpp on one thread: two
threads on a busy 2-core machine (the fuzzer, the browser and the test itself beside the
server) spin at llama.cpp's barriers and answer many times slower. The servers also get a
content cache (``run.cache_dir``, :func:`serve_data`): a question asked again (the same question
on the page, the fuzzer's many ``"0"`` questions) skips the models it already ran."""
OTHER_OVERRIDES = {**SERVE_OVERRIDES, "classifier": {"name": "rules"}, "cross_encoder": {"name": "none"},
                   "fusion": {"name": "rrf"}}
"""The second preset served for side-by-side comparison."""
MAX_BATCH = 3
"""The main server's ``--max-batch``: room for the 3-question micro-batch test, and the largest
batch the fuzzer sends (the schema's ``maxItems``)."""
START_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 900
"""Generous: on a busy 2-core machine llama.cpp slows down many times over."""
API_KEY = "test-key-5b1f0c"
KEYED_QUEUE = 4
"""The keyed server's ``--max-queue`` (with ``--batch-size 1``): the restart test's four clients
always find room; the 429 test's twelve concurrent requests cannot."""
XSS_DOC = {"id": "<urn:uuid:xss-probe>",
           "text": "The zorblax quantum frobnicator manual. <script>window.__xss=1</script> "
                   "<img src=x onerror=\"window.__xss=2\"> The zorblax quantum frobnicator is calibrated "
                   "every Tuesday by the night shift, using the brass frobnicator calibration key."}
XSS_QUESTION = "How often is the zorblax quantum frobnicator calibrated?"


# ---------------------------------------------------------------------- helpers

class ServeProcess:
    """``python -m preqrag.cli serve ...`` on 127.0.0.1 (a free port unless ``port`` is given).
    ``start()`` returns as soon as the socket answers, recording the first ``/healthz`` status
    in ``first_health``; ``wait_ready()`` waits for 200."""

    def __init__(self, args: list[str], env: dict | None = None, port: int | None = None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]), **(env or {})}
        self.log = tempfile.NamedTemporaryFile(prefix="preqrag_serve_", suffix=".log", delete=False)
        self.proc: subprocess.Popen | None = None
        self.first_health: tuple[int, dict | None] | None = None

    def start(self) -> "ServeProcess":
        cmd = [sys.executable, "-m", "preqrag.cli", "serve", "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.first_health is None:
            self._check_alive()
            try:
                status, body, _ = http("GET", f"{self.url}/healthz", timeout=5)
                self.first_health = (status, body)
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"preqrag serve did not bind {self.url} within {START_TIMEOUT_S}s:\n{self.tail()}")
                time.sleep(0.05)
        return self

    def wait_ready(self) -> "ServeProcess":
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            time.sleep(0.2)
            self._check_alive()
            try:
                status, _, _ = http("GET", f"{self.url}/healthz", timeout=5)
            except (urllib.error.URLError, OSError):
                status = None  # shutting down after a failed load: _check_alive reports it
            if status == 200:
                return self
            if time.monotonic() > deadline:
                pytest.fail(f"preqrag serve not ready within {START_TIMEOUT_S}s:\n{self.tail()}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"preqrag serve exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        if not self.log.closed:
            self.log.close()
            os.unlink(self.log.name)


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def serve_data(small_corpus, tmp_path_factory):
    """(index dir, questions file, questions, config path, other config path): the gold documents
    of the small real corpus's questions, three other documents and one document whose text holds
    HTML/JS, indexed with the test settings. Both configs share one content cache
    (``run.cache_dir``) in the same directory."""
    from preqrag.core.config import load_config
    from preqrag.index.embedded import build_index

    if importlib.util.find_spec("wordllama") is None:
        unavailable('the test pipeline\'s embedder needs wordllama: pip install "wordllama==0.4.0.post1"')
    corpus, qpath, questions = small_corpus
    gold = {g for q in questions for g in q["gold_doc_ids"]}
    docs = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    others = [d for d in docs if d["id"] not in gold][:3]  # enough distractors; fewer passages to encode
    d = tmp_path_factory.mktemp("serve")
    mixed = d / "corpus.jsonl"
    mixed.write_text("".join(json.dumps(x) + "\n" for x in docs if x["id"] in gold or x in others)
                     + json.dumps(XSS_DOC) + "\n", encoding="utf-8")
    index = d / "index"
    build_index(mixed, index, load_config(None, SERVE_OVERRIDES))
    cache = {"run": {**SERVE_OVERRIDES["run"], "cache_dir": str(d / "cache")}}
    cfg = d / "serve.toml"
    cfg.write_text(config_toml({**SERVE_OVERRIDES, **cache}))
    other = d / "other.toml"
    other.write_text(config_toml({**OTHER_OVERRIDES, **cache}))
    return index, qpath, questions, cfg, other


def _main_server(serve_data) -> ServeProcess:
    index, qpath, _, cfg, other = serve_data
    return ServeProcess(["--index", str(index), "--config", str(cfg), "--compare", f"no-rerank={other}",
                         "--questions", str(qpath), "--max-queue", "8", "--max-batch", str(MAX_BATCH),
                         "--max-question-chars", "300", "--max-body-bytes", "4096",
                         "--timeout", str(REQUEST_TIMEOUT_S)])


def _keyed_server(serve_data, port: int | None = None) -> ServeProcess:
    index, _, _, cfg, _ = serve_data
    return ServeProcess(["--index", str(index), "--config", str(cfg), "--api-key-env", "PREQRAG_TEST_API_KEY",
                         "--host", "127.0.0.1", "--max-queue", str(KEYED_QUEUE), "--batch-size", "1",
                         "--timeout", str(REQUEST_TIMEOUT_S)],
                        env={"PREQRAG_TEST_API_KEY": API_KEY}, port=port)


@pytest.fixture(scope="module")
def servers():
    """The module's server processes by role (``"main"``, ``"keyed"``), each started by the first
    test that needs it and stopped at the end of the module. The restart test SIGKILLs the main
    one and starts the keyed one in its place; a later test that needs the main one (only when
    tests run in another order than the file's) gets a new one."""
    procs: dict[str, ServeProcess] = {}
    try:
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


def _running(servers: dict, role: str, make) -> ServeProcess:
    proc = servers.get(role)
    if proc is None or not proc.running:
        if proc is not None:
            proc.stop()
        proc = servers[role] = make()
        proc.start().wait_ready()
    return proc


@pytest.fixture()
def server(servers, serve_data):
    """The main server: default + 'no-rerank' presets, gold from the small question file, batches
    of at most :data:`MAX_BATCH` questions."""
    return _running(servers, "main", lambda: _main_server(serve_data))


@pytest.fixture()
def keyed_server(servers, serve_data):
    """A server requiring an API key, with a :data:`KEYED_QUEUE`-place queue and one question per
    micro-batch (the one the restart test started, when it ran first)."""
    return _running(servers, "keyed", lambda: _keyed_server(serve_data))


# ---------------------------------------------------------------------- API, real server
def test_health_before_and_after_warm_up(server):
    status, body = server.first_health
    assert status == 503, "the socket should answer before the models are loaded"
    assert body["error"] == "not_ready" and body["state"] == "loading"
    status, body, _ = http("GET", f"{server.url}/healthz")
    assert status == 200 and body["status"] == "ready"
    assert body["pipelines"] == ["default", "no-rerank"]


def test_answer(server, serve_data):
    from preqrag.core.records import LiveRAGAnswer

    q = serve_data[2][0]
    status, body, _ = http("POST", f"{server.url}/v1/answer", {"question": q["question"], "id": q["id"]})
    assert status == 200, body
    answer = LiveRAGAnswer.model_validate(body["answer"])  # the LiveRAG answer object, schema-valid
    assert answer.id == q["id"] and answer.question == q["question"]
    assert len(answer.passages) == SERVE_OVERRIDES["generator"].get("context_top_k", 3)
    assert answer.final_prompt and isinstance(answer.answer, str)
    trace = body["trace"]
    assert set(trace["rankings"]) >= {"sparse", "dense", "merged", "reranked", "final"}
    assert set(trace["seconds"]) >= {"classify", "rewrite", "sparse", "dense", "fusion", "rerank", "generate"}
    assert trace["classification"]["question_type"] in ("single", "multi")
    assert body["gold_doc_ids"] == q["gold_doc_ids"]
    for stage, rankings in trace["rankings"].items():  # every candidate's document is given
        assert all(body["doc_ids"][pid] for r in rankings for pid in r["ids"]), stage
    assert isinstance(body["citations"], list)
    assert body["pipeline"] == "default" and body["served"]["batch_size"] >= 1


def test_retrieve_has_no_generation(server, serve_data):
    q = serve_data[2][1]
    status, body, _ = http("POST", f"{server.url}/v1/retrieve", {"question": q["question"]})
    assert status == 200, body
    assert "answer" not in body
    assert "generate" not in body["trace"]["seconds"]
    assert len(body["context"]) == len(body["trace"]["context_ids"]) == 3
    assert all(c["passage"] and c["doc_IDs"] for c in body["context"])


def test_batch_shares_one_micro_batch(server, serve_data):
    qs = serve_data[2][:3]
    payload = {"questions": [{"question": q["question"], "id": q["id"]} for q in qs[:2]] + [qs[2]["question"]]}
    status, body, _ = http("POST", f"{server.url}/v1/batch", payload)
    assert status == 200, body
    results = body["results"]
    assert [r["id"] for r in results[:2]] == [q["id"] for q in qs[:2]]
    assert all(r["answer"]["question"] == q["question"] for r, q in zip(results, qs))
    # submitted together, they went through the same batched stage calls (run.batch_size = 4)
    assert [r["served"]["batch_size"] for r in results] == [3, 3, 3]


def test_concurrent_requests_are_micro_batched(server, serve_data):
    qs = [q["question"] for q in serve_data[2]][:4]
    together = threading.Barrier(len(qs))  # sent at once: an answer from the cache takes milliseconds

    def ask(q: str):
        together.wait(timeout=60)
        return http("POST", f"{server.url}/v1/answer", {"question": q})

    with cf.ThreadPoolExecutor(len(qs)) as pool:
        replies = list(pool.map(ask, qs))
    assert [r[0] for r in replies] == [200] * len(qs)
    assert [r[1]["answer"]["question"] for r in replies] == qs  # each client got its own answer
    assert max(r[1]["served"]["batch_size"] for r in replies) > 1


def test_second_preset_and_config(server, serve_data):
    q = serve_data[2][0]["question"]
    status, body, _ = http("POST", f"{server.url}/v1/answer", {"question": q, "pipeline": "no-rerank"})
    assert status == 200, body
    assert body["pipeline"] == "no-rerank"
    assert "reranked" in body["trace"]["rankings"]  # the fused list, unchanged
    assert body["trace"]["classification"]["classifier"] == "rules"
    status, cfg, _ = http("GET", f"{server.url}/v1/config")
    assert status == 200
    assert list(cfg["pipelines"]) == ["default", "no-rerank"] and cfg["default"] == "default"
    assert cfg["pipelines"]["no-rerank"]["cross_encoder"]["name"] == "none"
    assert q in cfg["examples"]
    status, schema, _ = http("GET", f"{server.url}/openapi.json")
    assert status == 200 and {"/v1/answer", "/v1/retrieve", "/v1/batch", "/v1/config"} <= set(schema["paths"])
    with urllib.request.urlopen(f"{server.url}/docs", timeout=30) as resp:
        assert resp.status == 200


@pytest.mark.parametrize("raw, status, code", [
    (b'{"question": "unterminated', 400, "bad_json"),
    (b'{"question": "   "}', 422, "empty_question"),
    (json.dumps({"question": "why " * 100}).encode(), 422, "question_too_long"),
    (json.dumps({"question": "x" * 5000}).encode(), 413, "body_too_large"),
    (b'{"question": "ok?", "pipeline": "nope"}', 422, "unknown_pipeline"),
    (b'{"question": "ok?", "path": "/etc/passwd"}', 422, "bad_request"),
    (b'["not", "an", "object"]', 422, "bad_request"),
    (b'{"questions": []}', 422, "bad_request"),
])
def test_bad_requests_get_json_errors(server, raw, status, code):
    got, body, _ = http("POST", f"{server.url}/v1/answer", raw=raw)
    assert (got, body["error"]) == (status, code), body
    assert body["message"]


def test_other_json_errors(server):
    status, body, _ = http("POST", f"{server.url}/v1/batch", {"questions": ["fine?", ""]})
    assert (status, body["error"]) == (422, "empty_question") and "questions[1]" in body["message"]
    status, body, _ = http("POST", f"{server.url}/v1/batch", {"questions": ["q?"] * (MAX_BATCH + 1)})
    assert (status, body["error"]) == (422, "too_many_questions")  # over --max-batch (the fake server: the queue)
    status, body, _ = http("GET", f"{server.url}/v1/nothing-here")
    assert (status, body["error"]) == (404, "not_found")
    status, body, _ = http("GET", f"{server.url}/v1/answer")
    assert (status, body["error"]) == (405, "method_not_allowed")


def test_client_disconnecting_mid_request(server, serve_data):
    q = serve_data[2][2]["question"]
    body = json.dumps({"question": q}).encode()
    head = (f"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    # 1. gone after sending the whole request, while the question waits or runs
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head + body)
        time.sleep(0.2)
    # 2. gone halfway through the body
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head + body[: len(body) // 2])
    status, _, _ = http("GET", f"{server.url}/healthz")
    assert status == 200
    status, reply, _ = http("POST", f"{server.url}/v1/answer", {"question": q})
    assert status == 200 and reply["answer"]["question"] == q
    deadline = time.monotonic() + 60
    while True:  # nothing is left behind in the queue
        _, stats, _ = http("GET", f"{server.url}/v1/stats")
        if stats["queued"] == 0 and stats["submitted"] == stats["answered"] + stats["failed"] + stats["cancelled"]:
            break
        assert time.monotonic() < deadline, stats
        time.sleep(0.2)
    assert server.proc.poll() is None


def test_api_fuzzed_by_schemathesis(server, tmp_path):
    """Schemathesis (property-based, from /openapi.json) against the real server, bounded: its
    coverage phase (each operation's schema boundaries: shortest and longest questions, the
    largest batch, every field left out, invalid types and methods) and 2 random examples per
    operation. Its default checks (no 5xx, responses match the declared schemas, schema-valid
    requests accepted and invalid ones refused, ...) pass, every operation was tested, and the
    server still answers afterwards. The long run is bench/fuzz_serve.py."""
    pytest.importorskip("schemathesis")
    r = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", f"{server.url}/openapi.json",
                        "--max-examples", "2", "--seed", "1", "--request-timeout", "300", "--no-color"],
                       capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    summary = r.stdout[-3000:]
    assert r.returncode == 0 and "No issues found" in summary, summary
    assert re.search(r"Tested: 6\b", summary), summary  # the 6 operations were really exercised
    generated = int(re.search(r"(\d+) generated", summary).group(1))
    assert generated >= 30, summary
    status, body, _ = http("GET", f"{server.url}/healthz")
    assert status == 200 and server.proc.poll() is None


# ---------------------------------------------------------------------- the page, headless Chromium
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    unavailable("Debian's chromium is not installed (apt-get install -y chromium)")


@pytest.fixture()
def browser():
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install playwright; no `playwright install` needed)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(url + "/")
    page.wait_for_selector("#status[data-state='ready']", timeout=60_000)
    page.wait_for_selector("#pipeline-a option", state="attached", timeout=30_000)
    return page, errors


def _ask(page, question: str, compare: bool = False) -> None:
    page.fill("#question", question)
    if compare:
        page.check("#compare")
        page.select_option("#pipeline-b", "no-rerank")
    page.evaluate("delete document.getElementById('results').dataset.done")
    page.click("#submit")
    page.wait_for_selector("#results[data-done]", timeout=600_000)


def test_page_answers_and_shows_every_stage(server, serve_data, browser, tmp_path):
    q = serve_data[2][0]
    page, errors = _open_page(browser, server.url)
    _ask(page, q["question"], compare=True)
    columns = page.locator("#results section.column")
    assert columns.count() == 2
    assert [columns.nth(i).get_attribute("data-pipeline") for i in range(2)] == ["default", "no-rerank"]
    for i in range(2):
        col = columns.nth(i)
        assert col.locator("[data-testid='failure']").count() == 0, col.inner_text()
        answer = col.locator("[data-testid='answer']")
        assert answer.is_visible() and answer.inner_text().strip()
        assert col.locator("[data-testid='citations']").count() == 1
        passages = col.locator("[data-testid='passages'] li")
        assert passages.count() == 3
        assert all(passages.nth(j).locator(".passage-text").inner_text().strip() for j in range(3))
        for stage in ("classify", "rewrite", "fallbacks", "sparse", "dense", "merged", "reranked", "final",
                      "timing"):
            summary = col.locator(f"details[data-stage='{stage}'] > summary")
            assert summary.count() == 1 and summary.is_visible(), (i, stage)
        for stage in ("classify", "rewrite", "sparse", "dense", "fusion", "generate") + (("rerank",) if i == 0 else ()):
            assert col.locator(f"[data-stage-time='{stage}']").count() == 1, (i, stage)
        assert "confidence" in col.locator("details[data-stage='classify']").inner_text()
        assert col.locator("details[data-stage='final'] tbody tr").count() >= 3
        # the question came from the --questions file: its gold documents are marked
        assert col.locator("details[data-stage='sparse'] .gold-badge").count() >= 1
    assert "rules" in columns.nth(1).locator("details[data-stage='classify']").inner_text()
    out = Path(REPO / "docs" / "img" / "serve.png") if os.environ.get("PREQRAG_SAVE_SCREENSHOT") \
        else tmp_path / "serve.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 10_000
    assert errors == []


def test_page_shows_html_in_passages_as_text(server, browser):
    page, errors = _open_page(browser, server.url)
    _ask(page, XSS_QUESTION)
    passages = page.locator("[data-testid='passages'] .passage-text")
    texts = [passages.nth(i).inner_text() for i in range(passages.count())]
    assert any("<script>window.__xss=1</script>" in t and '<img src=x onerror="window.__xss=2">' in t
               for t in texts), texts
    page.wait_for_timeout(500)  # an injected <img src=x> would have failed to load and fired by now
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#results script, #results img").count() == 0
    assert errors == []


# ---------------------------------------------------------------------- killed and restarted: the keyed server
def test_server_killed_and_restarted_under_load(server, serve_data, servers):
    """SIGKILL mid-load: clients get connection errors (then 503 not_ready while the new one
    loads), never a wrong answer; a server started again on the same port answers again (every
    reply checked against its request's id and question).

    The killed one is the main server (the tests above are done with it); the one started in
    its place is the keyed server of the tests below (the clients send its key)."""
    import http.client as http_client
    import signal

    questions = serve_data[2]
    first = server
    if "keyed" in servers:  # started already (tests run in another order): this one replaces it
        servers.pop("keyed").stop()
    second = servers["keyed"] = _keyed_server(serve_data, port=first.port)  # restarted on the same address
    key = {"Authorization": f"Bearer {API_KEY}"}
    results: list[tuple[str, str]] = []
    stop = threading.Event()

    def client(c: int):
        n = 0
        while not stop.is_set():
            qid = f"c{c}-{n}"
            q = questions[(c + n) % len(questions)]["question"]
            n += 1
            try:
                status, body, _ = http("POST", f"{first.url}/v1/retrieve", {"question": q, "id": qid},
                                       headers=key, timeout=120)
            except (urllib.error.URLError, http_client.HTTPException, OSError):
                results.append(("connection_error", qid))
                time.sleep(0.1)
                continue
            if status == 503 and (body or {}).get("error") == "not_ready":  # the new server still loading
                results.append(("not_ready", qid))
                time.sleep(0.1)
                continue
            ok = status == 200 and body["id"] == qid and body["question"] == q
            results.append(("ok" if ok else f"wrong {status} {(body or {}).get('error')}", qid))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(KEYED_QUEUE)]
    try:
        for th in threads:
            th.start()
        deadline = time.monotonic() + 300
        while sum(r[0] == "ok" for r in results) < 8:  # under load
            assert time.monotonic() < deadline, results[-5:]
            time.sleep(0.05)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
        before = len(results)
        second.start().wait_ready()
        deadline = time.monotonic() + 300
        while sum(r[0] == "ok" for r in results[before:]) < 8:  # the restarted server answers the clients
            assert time.monotonic() < deadline, results[-5:]
            time.sleep(0.05)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=180)
    kinds = {k for k, _ in results}
    assert kinds <= {"ok", "connection_error", "not_ready"}, sorted(kinds)
    assert "connection_error" in kinds  # the kill was felt
    assert len({qid for _, qid in results}) == len(results)  # one outcome per request


def test_api_key_required_on_every_v1_route(keyed_server):
    url = keyed_server.url
    for method, path, body in [("POST", "/v1/answer", {"question": "q?"}), ("POST", "/v1/retrieve", {"question": "q?"}),
                               ("POST", "/v1/batch", {"questions": ["q?"]}), ("GET", "/v1/config", None),
                               ("GET", "/v1/stats", None), ("POST", "/v1/answer", None)]:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": API_KEY + "x"}):
            status, reply, hdrs = http(method, url + path, body, headers=headers)
            assert (status, reply["error"]) == (401, "unauthorized"), (path, headers, reply)
            assert hdrs.get("www-authenticate") == "Bearer"
    assert http("GET", f"{url}/v1/config", headers={"Authorization": f"Bearer {API_KEY}"})[0] == 200
    assert http("GET", f"{url}/v1/config", headers={"X-API-Key": API_KEY})[0] == 200
    assert http("GET", f"{url}/healthz")[0] == 200  # health and the page need no key
    with urllib.request.urlopen(f"{url}/", timeout=30) as resp:
        assert resp.status == 200


def test_queue_full_answers_429(keyed_server, serve_data):
    """Concurrent requests beyond the queue get 429 queue_full with Retry-After; those that found
    room are answered. One question that no test asked before (no cache hit: the LLM runs)
    keeps the one worker busy while twelve others arrive for the four places."""
    key = {"Authorization": f"Bearer {API_KEY}"}
    url = keyed_server.url
    submitted = http("GET", f"{url}/v1/stats", headers=key)[1]["submitted"]
    busy = "Which night shift calibrates the zorblax quantum frobnicator, and with which key?"
    with cf.ThreadPoolExecutor(1) as one:
        occupying = one.submit(http, "POST", f"{url}/v1/answer", {"question": busy}, headers=key)
        deadline = time.monotonic() + 60
        while True:  # taken by the worker: submitted, no longer queued
            stats = http("GET", f"{url}/v1/stats", headers=key)[1]
            if stats["submitted"] > submitted and stats["queued"] == 0:
                break
            assert time.monotonic() < deadline and not occupying.done(), stats
            time.sleep(0.01)
        qs = [q["question"] for q in serve_data[2]][:4] * 3
        with cf.ThreadPoolExecutor(len(qs)) as pool:
            replies = list(pool.map(lambda q: http("POST", f"{url}/v1/answer", {"question": q}, headers=key), qs))
        status, body, _ = occupying.result()
    assert status == 200 and body["answer"]["question"] == busy, body
    statuses = [r[0] for r in replies]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(429) >= 1 and statuses.count(200) >= 1, statuses
    for status, body, hdrs in replies:
        if status == 429:
            assert body["error"] == "queue_full" and int(hdrs["retry-after"]) >= 1
        else:
            assert body["answer"]["question"] in qs
    _, stats, _ = http("GET", f"{url}/v1/stats", headers=key)
    assert stats["rejected"] >= statuses.count(429)


def test_non_local_bind_requires_api_key(serve_data, tmp_path, monkeypatch):
    """`preqrag serve` refuses to start (exit 2, a message naming the fix) before loading any model:
    a non-loopback bind without a key, a key variable that is unset, a missing index, an unknown
    preset (run in-process: the command's checks, not a server, are under test)."""
    from preqrag.models import onnx_runtime
    from preqrag.cli.commands.serve import ONEDNN_CACHE_ENV

    index = serve_data[0]
    for var in ("PREQRAG_TEST_API_KEY", "PREQRAG_UNSET_KEY_VAR"):
        monkeypatch.delenv(var, raising=False)
    # what `serve` sets for its own process before the checks: as it was again after the test
    monkeypatch.setattr(onnx_runtime, "RESERVE_PEAK_AT_WARM_UP", onnx_runtime.RESERVE_PEAK_AT_WARM_UP)
    monkeypatch.setenv(ONEDNN_CACHE_ENV, os.environ.get(ONEDNN_CACHE_ENV, ""))  # unset again if it was
    r = run_cli("serve", "--index", index, "--host", "0.0.0.0", "--port", _free_port())
    assert r.returncode == 2 and "--api-key-env" in r.stderr, r
    r = run_cli("serve", "--index", index, "--host", "0.0.0.0", "--api-key-env", "PREQRAG_UNSET_KEY_VAR",
                "--port", _free_port())
    assert r.returncode == 2 and "PREQRAG_UNSET_KEY_VAR" in r.stderr, r
    r = run_cli("serve", "--index", tmp_path / "missing", "--port", _free_port())
    assert r.returncode == 2 and "not an index" in r.stderr, r
    r = run_cli("serve", "--index", index, "--compare", "no-such-preset", "--port", _free_port())
    assert r.returncode == 2 and "unknown preset" in r.stderr, r
