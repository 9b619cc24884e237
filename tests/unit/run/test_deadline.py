"""`preqrag run --deadline`, its logic: planning with a fake clock, the deadline record, the
extractive level, the level overrides, and the OpenAI backend's Retry-After / adaptive concurrency
and call deadline against small fake HTTP servers. The level pipelines on the small index:
tests/integration/test_deadline_levels.py; a real run through a slow server:
tests/e2e/test_deadline_run.py."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from preqrag.core.config import ConfigError, LLMConfig, load_config
from preqrag.run.deadline import (Deadline, DeadlineController, ExtractiveGenerator, deadline_path, level_overrides,
                                  parse_deadline, resolve_deadline, summary_line)
from preqrag.models.llm.openai_backend import OpenAICompatibleLLM, retry_after_seconds
from preqrag.core.contracts import LLMError

from fakes import chat_completion, send_json

NOW = datetime(2026, 11, 22, 8, 0, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------------------------- the deadline itself
@pytest.mark.parametrize("spec, seconds", [("2h", 7200), ("30m", 1800), ("600s", 600), ("1h30m", 5400),
                                           ("90", 90), ("0.5h", 1800)])
def test_durations(spec, seconds):
    assert parse_deadline(spec, NOW) == NOW + timedelta(seconds=seconds)


def test_timestamps_and_errors():
    assert parse_deadline("2026-11-22T10:00:00Z", NOW) == datetime(2026, 11, 22, 10, tzinfo=timezone.utc)
    assert parse_deadline("2026-11-22T12:00:00+02:00", NOW) == datetime(2026, 11, 22, 10, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="time zone"):
        parse_deadline("2026-11-22T10:00:00", NOW)
    with pytest.raises(ValueError, match="expected a duration"):
        parse_deadline("tomorrow", NOW)
    with pytest.raises(ValueError, match="positive"):
        parse_deadline("0s", NOW)


def test_deadline_record_kept_on_restart_overridden_and_dropped(tmp_path):
    out = tmp_path / "answers.jsonl"
    assert resolve_deadline(out, None, NOW) == (None, None)
    first, note = resolve_deadline(out, "2h", NOW)
    assert first.at == NOW + timedelta(hours=2) and "recorded" in note
    assert deadline_path(out) == tmp_path / "answers.deadline.json" and deadline_path(out).exists()
    later = NOW + timedelta(minutes=50)
    for spec in (None, "2h"):  # a restart, with or without the same --deadline, keeps the original
        kept, note = resolve_deadline(out, spec, later)
        assert kept.at == first.at and "keeping" in note
    new, note = resolve_deadline(out, "30m", later)
    assert new.at == later + timedelta(minutes=30) and "overrides" in note
    assert resolve_deadline(out, None, later)[0].at == new.at
    none, note = resolve_deadline(out, "none", later)
    assert none is None and "dropped" in note and not deadline_path(out).exists()
    deadline_path(out).write_text("{not json")
    with pytest.raises(ValueError, match="answers.deadline.json"):
        resolve_deadline(out, None, later)


def test_the_run_record_and_its_console_line():
    """``answers.run.json``'s ``deadline`` (:meth:`Deadline.summary`) and the line ``preqrag run`` prints."""
    cfg = load_config(None)
    future = Deadline(datetime.now(timezone.utc) + timedelta(hours=1), "1h", NOW)
    assert not future.passed() and Deadline(NOW, "0s", NOW).passed()
    record = future.summary(cfg, None, 2, [{"level": 0}])
    assert list(record) == ["deadline", "spec", "set_at", "level_names", "finished_before_deadline", "seconds_left",
                            "fallbacks", "batches"]
    assert record["finished_before_deadline"] and 3590 < record["seconds_left"] <= 3600
    assert record["level_names"] == cfg.deadline.levels and record["batches"] == [{"level": 0}]
    assert not future.summary(cfg, future.timestamp + 1, 0, [])["finished_before_deadline"]
    line = summary_line(record, {"0": 3, "4": 1})
    assert line.startswith(f"deadline {record['deadline']}: met (") and " s left); questions per level: full 3, " in line
    assert line.endswith(", extractive 1; 2 extractive after an LLM timeout or failure")
    past = Deadline(NOW, "2h", NOW).summary(cfg, NOW.timestamp() - 5, 0, [])
    assert past["finished_before_deadline"] and " MISSED " not in summary_line(past, {})
    assert "passed" in summary_line(past, {}) and "s ago)" in summary_line(past, {})


def test_a_passed_deadline_note_and_each_workers_share():
    """What a run started too late says, and the share of the remaining questions each of the live
    Ray actors plans for (``ceil(left / live)``, at least one actor)."""
    note = Deadline(NOW, "0s", NOW).passed_note()
    assert note.startswith(f"the deadline {NOW.isoformat(timespec='seconds')} has passed: ")
    assert note.endswith("answered extractively (no LLM)")
    assert [Deadline.share(left, live) for left, live in ((10, 3), (9, 3), (1, 4), (0, 2), (5, 0))] == [4, 3, 1, 0, 5]


def test_levels_config_is_validated():
    cfg = load_config(None, {"deadline": {"levels": ["full", "short-context", "extractive"]}})
    assert cfg.deadline.levels == ["full", "short-context", "extractive"]
    for bad, msg in ((["full", "fast", "extractive"], "unknown level"),
                     (["full", "short-context", "no-rewrite", "extractive"], "order"),
                     (["full", "no-rewrite"], "end with 'extractive'"),
                     (["no-rewrite", "extractive"], "start with 'full'")):
        with pytest.raises(ConfigError, match=msg):
            load_config(None, {"deadline": {"levels": bad}})


# ---------------------------------------------------------------------------------- planning, fake clock
class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _controller(deadline_s: float = 100.0):
    cfg = load_config(None, {"cross_encoder": {"depth": 30}, "generator": {"max_new_tokens": 200},
                             "deadline": {"reserve_s": 2.0, "safety": 0.9, "recover_margin": 0.75,
                                          "rerank_depth": 10, "max_new_tokens": 64, "extractive_prior_s": 0.5}})
    clock = FakeClock()
    return DeadlineController(deadline_s, cfg, clock), clock


# a measured full-pipeline batch: seconds per question by stage
FULL = {"rewrite": 1.0, "sparse": 0.02, "dense": 0.03, "rerank": 0.3, "generate": 1.0, "other": 0.05}


def test_controller_starts_full_then_degrades_when_behind():
    ctl, clock = _controller()
    assert ctl.choose(remaining=100) == 0  # nothing measured: try the full pipeline
    assert ctl.cutoff(remaining=100) == pytest.approx(100 - 2 - 0.5 * 100)  # time kept to answer all extractively
    ctl.record(0, FULL)
    clock.t = 2.4
    # 2.4 s/q full; without rewriting 1.4; + rerank depth 10/30: 1.2; + 64/200 of the generation: 0.52
    assert ctl.estimate(0) == pytest.approx(2.4)
    assert ctl.estimate(1) == pytest.approx(1.4)
    assert ctl.estimate(2) == pytest.approx(1.2)
    assert ctl.estimate(3) == pytest.approx(0.52)
    assert ctl.estimate(4) == pytest.approx(0.5)  # derived 0.2, but never below the prior until measured
    assert ctl.choose(remaining=99) == 3  # 0.9 * 95.6 s fit 99 x 0.52 s, not 99 x 1.2 s
    ctl.record(3, {"sparse": 0.02, "dense": 0.03, "rerank": 0.1, "generate": 0.9, "other": 0.05})  # slower than planned
    clock.t = 60.0
    assert ctl.choose(remaining=60) == 4  # 60 x 1.1 s > 0.9 * 38 s: extractive
    ctl.record(4, {"sparse": 0.02, "dense": 0.03, "rerank": 0.1, "other": 0.05})
    assert ctl.estimate(4) == pytest.approx(0.2)  # measured now
    clock.t = 97.9
    assert ctl.choose(remaining=1) == 4 and ctl.cutoff(remaining=1) < clock.t + 0.01  # no time for an LLM


def test_controller_recovers_when_caught_up_with_hysteresis():
    ctl, clock = _controller()
    ctl.choose(100)
    ctl.record(0, FULL)
    assert ctl.choose(100) == 3
    ctl.record(3, {"rerank": 0.1, "generate": 0.32, "other": 0.1})
    clock.t = 10.0
    # 8 questions left, 88 s: the full pipeline fits again (8 x 2.4 = 19.2 <= 0.75 x 0.9 x 88)
    assert ctl.choose(8) == 0
    # 30 left: 30 x 2.4 = 72 fits 0.9 x 88 = 79.2 but not the recovery margin from level 3 ...
    ctl.level = 3
    assert ctl.choose(30) == 1  # ... so it recovers only as far as level 1 (30 x 1.4 = 42 <= 59.4)
    assert ctl.choose(30) == 1  # from level 1, going back to 0 still needs the margin: 72 > 0.75 x 79.2
    ctl.level = 0
    assert ctl.choose(30) == 0  # staying at level 0 needs no margin


def test_controller_pace_is_a_moving_average():
    ctl, _ = _controller()
    ctl.record(0, {"generate": 1.0})
    ctl.record(0, {"generate": 2.0})
    assert ctl.estimate(0) == pytest.approx(0.3 * 2.0 + 0.7 * 1.0)


# ---------------------------------------------------------------------------------- levels
def test_level_overrides_are_cumulative():
    cfg = load_config(None, {"classifier": {"name": "llm"}})
    assert level_overrides(cfg, 0) == {}
    assert level_overrides(cfg, 1) == {"rewriter": {"name": "none"}, "classifier": {"name": "rules"}}
    assert level_overrides(cfg, 2)["cross_encoder"] == {"depth": 10}
    three = level_overrides(cfg, 3)
    assert three["generator"] == {"context_top_k": 1, "max_new_tokens": 64} and three["cross_encoder"] == {"depth": 10}
    assert level_overrides(cfg, 4)["generator"]["context_top_k"] == 1
    short = load_config(None, {"deadline": {"levels": ["full", "extractive"]}})
    assert level_overrides(short, 1) == {"rewriter": {"name": "none"},
                                         "generator": {"name": "extractive", "context_top_k": 1}}


def test_extractive_answer_takes_the_top_passage_sentences_closest_to_the_question():
    gen = ExtractiveGenerator(n_sentences=2, max_words=300)
    passage = ("Coral reefs cover less than one percent of the ocean floor. The weather was fine that day. "
               "Reefs support about a quarter of all marine species. Tourists like boats.")
    (g,) = gen.generate(["How many marine species do coral reefs support?"], [[passage, "another passage"]])
    assert g.answer == ("Coral reefs cover less than one percent of the ocean floor. "
                        "Reefs support about a quarter of all marine species.")
    assert "no LLM call" in g.final_prompt and g.truncations == []
    assert gen.answer("anything", "no sentence boundary here") == "no sentence boundary here"


# ---------------------------------------------------------------------------------- OpenAI backend
class _RateLimited(BaseHTTPRequestHandler):
    """A chat-completions endpoint answering 429 with ``Retry-After`` to the first ``limited``
    requests, then echoing; records the time of each request."""

    limited = 2
    retry_after = "1"
    seen: list = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", 0))
        req = json.loads(self.rfile.read(n))
        with self.lock:
            type(self).seen.append(time.monotonic())
            limited = len(self.seen) <= self.limited
        if limited:
            send_json(self, 429, json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode(),
                      {"Retry-After": self.retry_after})
        else:
            send_json(self, 200, chat_completion(req["model"], "ok " + req["messages"][-1]["content"]))

    def log_message(self, *args):
        pass


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "Sun, 22 Nov 2026 08:00:05 GMT"}, now=NOW) == 5.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None


def test_openai_backend_honours_retry_after_and_halves_concurrency():
    handler = type("H", (_RateLimited,), {"seen": [], "limited": 2, "retry_after": "1"})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{httpd.server_port}/v1",
                                        model="fake", concurrency=4, max_retries=3, timeout_s=10))
    try:
        replies = llm.chat_many([[{"role": "user", "content": f"q{i}"}] for i in range(2)], max_tokens=4)
        stats = llm.stats()
    finally:
        llm.close()
        httpd.shutdown()
    assert replies == ["ok q0", "ok q1"]
    assert stats["rate_limited"] == 2 and stats["retries"] == 2 and stats["lowest"] == 1  # 4 -> 2 -> 1
    assert stats["concurrency"] == 3  # +1 per success after that
    first_429, retried = min(handler.seen[:2]), min(handler.seen[2:])
    assert retried - first_429 >= 1.0  # waited as long as the server asked


class _Slow(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        time.sleep(3)
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_call_deadline_stops_waiting_for_the_llm():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{httpd.server_port}/v1",
                                        model="fake", max_retries=5, timeout_s=30))
    try:
        llm.set_call_deadline(time.time() + 1.0)
        with pytest.raises(LLMError, match="Timeout"):
            llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)
        llm.set_call_deadline(time.time() - 1)
        with pytest.raises(LLMError, match="call deadline reached"):
            llm.chat([{"role": "user", "content": "hi"}], max_tokens=4)
        assert llm.stats()["retries"] == 0  # no retry could end before the call deadline
    finally:
        llm.close()
        httpd.shutdown()
