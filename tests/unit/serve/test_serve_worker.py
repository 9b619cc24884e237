"""`preqrag serve`'s parts in-process, deterministic: the interval-union model timing, the
OpenAI-compatible backend called from inside a running event loop (a small fake server), the
worker's queue/timeout/failure handling with a fake pipeline, and the loopback check. The server
process itself: tests/e2e/test_serve.py."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import _free_port
from fakes import chat_completion, http, send_json


# ---------------------------------------------------------------------- helpers

# ---------------------------------------------------------------------- timing, unit
def test_model_time_counts_overlapping_calls_once():
    from preqrag.core.timing import model_busy_seconds, model_calls, model_seconds, model_time

    s0, b0, c0 = model_seconds().get("llm", 0.0), model_busy_seconds(), model_calls().get("llm", 0)
    e0 = model_seconds().get("embedder", 0.0)
    barrier = threading.Barrier(4)  # three llm threads and this one

    def call():
        barrier.wait()
        with model_time("llm"):
            time.sleep(0.3)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    with model_time("embedder"):  # overlaps the llm calls
        barrier.wait()
        time.sleep(0.1)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    llm = model_seconds()["llm"] - s0
    assert 0.29 <= llm <= wall + 0.01, (llm, wall)  # three threads in flight at once: counted once
    assert model_calls()["llm"] - c0 == 3
    assert 0.09 <= model_seconds()["embedder"] - e0 <= 0.2
    busy = model_busy_seconds() - b0
    assert llm - 0.01 <= busy <= wall + 0.01  # union across kinds too


# ---------------------------------------------------------------------- OpenAI backend inside a running loop
class _FakeOpenAI(BaseHTTPRequestHandler):
    connections: set = set()

    def do_POST(self):  # noqa: N802
        type(self).connections.add(self.client_address)
        n = int(self.headers.get("Content-Length", 0))
        req = json.loads(self.rfile.read(n))
        send_json(self, 200, chat_completion(req["model"], "echo: " + req["messages"][-1]["content"]))

    def log_message(self, *args):
        pass


def test_openai_backend_works_inside_a_running_event_loop():
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.openai_backend import OpenAICompatibleLLM

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{httpd.server_port}/v1",
                                        model="fake", concurrency=2, max_retries=0, timeout_s=10))
    try:
        msgs = [[{"role": "user", "content": f"q{i}"}] for i in range(4)]

        async def inside_a_loop():  # what a server's request handler does
            return llm.chat_many(msgs, max_tokens=4), llm.chat_many(msgs[:1], max_tokens=4)

        first, second = asyncio.run(inside_a_loop())
        assert first == [f"echo: q{i}" for i in range(4)] and second == ["echo: q0"]
        assert llm.chat([{"role": "user", "content": "plain"}], max_tokens=4) == "echo: plain"
        with cf.ThreadPoolExecutor(3) as pool:  # several threads at once share the backend's loop
            assert list(pool.map(lambda i: llm.chat(msgs[i], max_tokens=4), range(3))) == [
                f"echo: q{i}" for i in range(3)]
        assert len(llm._clients) == 1  # one client (one connection pool) for every call above
        assert asyncio.run(llm.achat_many(msgs[:2], max_tokens=4)) == ["echo: q0", "echo: q1"]
    finally:
        llm.close()
        httpd.shutdown()


# ---------------------------------------------------------------------- worker, fake pipeline (in-process)
class _FakePipeline:
    """Answers instantly, except 'slow' (sleeps) and 'boom' (a failed Outcome)."""

    def __init__(self):
        from preqrag.core.config import load_config
        from preqrag.core.records import Passage

        self.cfg = load_config(None, {"run": {"batch_size": 2}})
        self.index = type("I", (), {"passages": {"d#0": Passage(id="d#0", doc_id="d", position=0, text="t")}})()

    def prepare(self, qs):
        from preqrag.run.pipeline import Outcome
        from preqrag.core.records import Classification, Failure, QueryPlan, Ranking, SubQuery, Trace

        out = []
        for q in qs:
            if q.question == "slow":
                time.sleep(3.0)
            if q.question == "boom":
                out.append(Outcome(q, failure=Failure(id=q.id, question=q.question, error="boom", stage="rerank")))
                continue
            out.append(Outcome(q, trace=Trace(
                id=q.id, classification=Classification(question_type="single", classifier="fake"),
                plan=QueryPlan(question_type="single", rewriter="none",
                               sub_queries=[SubQuery(text=q.question, sparse=q.question, dense=q.question)]),
                rankings={"final": [Ranking(ids=["d#0"], scores=[1.0])]}, context_ids=["d#0"])))
        return out

    def answer(self, qs):
        from preqrag.core.records import LiveRAGAnswer, LiveRAGPassage

        out = self.prepare(qs)
        for o in out:
            if o.failure is None:
                o.answer = LiveRAGAnswer(id=o.question.id, question=o.question.question, final_prompt="p",
                                         passages=[LiveRAGPassage(passage="t", doc_IDs=["d"])],
                                         answer="It is so [1]. Also this [1, 2]. Not cited.")
        return out


@pytest.fixture()
def fake_server():
    import uvicorn

    from preqrag.core.config import load_config
    from preqrag.serve.app import ServeSettings, create_app

    def factory():
        time.sleep(0.5)
        return _FakePipeline()

    app = create_app({"default": factory}, {"default": load_config()},
                     ServeSettings(max_queue=2, timeout_s=1.0))
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if http("GET", f"{url}/healthz", timeout=2)[0] == 200:
                break
        except (urllib.error.URLError, OSError):
            pass
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield url, app
    srv.should_exit = True
    t.join(timeout=10)


def test_failures_timeouts_and_a_full_queue_keep_the_server_up(fake_server):
    url, app = fake_server
    status, body, _ = http("POST", f"{url}/v1/answer", {"question": "boom"})
    assert (status, body["error"], body["stage"]) == (500, "question_failed", "rerank")
    status, body, _ = http("POST", f"{url}/v1/batch", {"questions": ["fine"] * 3})
    assert (status, body["error"]) == (422, "too_many_questions")  # a batch never exceeds the queue (2)
    status, body, _ = http("POST", f"{url}/v1/batch", {"questions": ["fine", "boom"]})
    assert status == 200
    assert "answer" in body["results"][0] and body["results"][1]["error"] == "question_failed"
    assert body["results"][0]["citations"] == [{"sentence": "It is so [1].", "passages": [1]},
                                               {"sentence": "Also this [1, 2].", "passages": [1]}]
    status, body, _ = http("POST", f"{url}/v1/answer", {"question": "slow"})  # 3 s > timeout 1 s
    assert (status, body["error"]) == (504, "timeout")
    # the worker is still busy with 'slow': two jobs fill the queue, the next gets 429
    with cf.ThreadPoolExecutor(2) as pool:
        waiting = [pool.submit(http, "POST", f"{url}/v1/retrieve", {"question": f"w{i}"}) for i in range(2)]
        time.sleep(0.1)
        status, body, hdrs = http("POST", f"{url}/v1/answer", {"question": "one too many"})
        assert (status, body["error"]) == (429, "queue_full") and int(hdrs["retry-after"]) >= 1
        assert {w.result()[0] for w in waiting} <= {200, 504}
    deadline = time.monotonic() + 30
    while True:  # timed-out jobs left the queue at once; wait for the worker to finish 'slow'
        stats = http("GET", f"{url}/v1/stats")[1]
        if stats["queued"] == 0 and stats["submitted"] == stats["answered"] + stats["failed"] + stats["cancelled"]:
            break
        assert time.monotonic() < deadline, stats
        time.sleep(0.1)
    status, body, _ = http("POST", f"{url}/v1/answer", {"question": "after all that"})
    assert status == 200 and body["answer"]["question"] == "after all that"
    assert app.state.worker.ready


def test_is_loopback():
    from preqrag.cli.commands.serve import is_loopback

    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.org"))
