"""`preqrag run --deadline` for real: a local llama.cpp server behind a delaying proxy makes the full
pipeline too slow for the budget, yet every question is answered before the deadline; a run
without a deadline is unaffected."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from urllib.parse import urlparse

from conftest import TEST_OVERRIDES, TCPProxy, config_toml, run_cli
from preqrag.run.deadline import deadline_path
from preqrag.core.records import LiveRAGAnswer


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


# ---------------------------------------------------------------------------------- for real
BUDGET_S = 14
"""The deadline of the real run, in seconds from the command's start (model loading included: a
second or two in-process, where the models' libraries are already imported)."""

DELAY_S = 7.0
"""Seconds the proxy holds each LLM request. The full pipeline of the test below (the ``hybrid``
preset) makes one LLM call per question, 2 at a time: the 6 questions need at least
6 / 2 x 7 = 21 s, 1.5 times the budget, and the first batch of 3 alone 2 x 7 s, the whole
budget, so it cannot finish at the full pipeline before its cut-off."""


def test_deadline_met_through_a_slow_llm_server_then_a_run_without_deadline_is_unaffected(
        tmp_path, llama_server, small_index, small_corpus):
    """``preqrag run --deadline`` through the slow proxy, then a run without a deadline straight to
    the server; both are the CLI command in-process (``run_cli``)."""
    proxy = TCPProxy(urlparse(llama_server).port, delay_s=DELAY_S)
    questions = small_corpus[2]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    llm = {"backend": "openai", "model": "smollm2", "structured_output": "json_object", "concurrency": 2, "max_retries": 1, "timeout_s": 60}
    # no cross-encoder (~7 pairs/s on 2 idle cores): the extractive level, the one every question can
    # fall back to, stays fast on a loaded machine; short prompts and answers (passages cut to 32
    # tokens, 4 answer tokens): the answers are not under test
    settings = {**TEST_OVERRIDES, "cross_encoder": {"name": "none"},
                "generator": {"sentence_scorer": "words", "max_new_tokens": 4, "max_passage_tokens": 32}}
    slow_cfg = tmp_path / "slow.toml"
    slow_cfg.write_text(config_toml({**settings, "llm": {**llm, "base_url": f"{proxy.url}/v1"}}))
    out = tmp_path / "answers.jsonl"
    try:
        t0 = datetime.now(timezone.utc)
        r = run_cli("run", qfile, "--index", small_index, "-o", out, "--config", slow_cfg,
                    "--deadline", f"{BUDGET_S}s")
        ended = datetime.now(timezone.utc)
    finally:
        proxy.close()
    assert r.returncode == 0, r.stderr
    record = json.loads(deadline_path(out).read_text())
    due = datetime.fromisoformat(record["deadline"])
    # from the command's start (the record keeps whole seconds)
    assert t0 + timedelta(seconds=BUDGET_S - 1) <= due <= t0 + timedelta(seconds=BUDGET_S + 30)
    # every answer is on disk by the deadline (the file's last write); the command may then take a
    # few more seconds to end (writing the run's files on a loaded 2-core machine)
    written = datetime.fromtimestamp(out.stat().st_mtime, timezone.utc)
    assert written <= due + timedelta(seconds=1), f"last answer written {written}, deadline {due}:\n{r.stderr}"
    assert ended <= due + timedelta(seconds=30), f"ended {ended}, deadline {due}:\n{r.stderr}"
    answers = _lines(out)
    assert sorted(str(a["id"]) for a in answers) == sorted(str(q["id"]) for q in questions)
    for a in answers:
        LiveRAGAnswer.model_validate(a)
    levels = [t["degradation_level"] for t in _lines(out.with_name("answers.traces.jsonl"))]
    assert len(levels) == len(questions) and max(levels) > 0
    stats = json.loads(out.with_name("answers.run.json").read_text())
    assert stats["deadline"]["deadline"] == record["deadline"] and stats["deadline"]["finished_before_deadline"]
    assert sum(stats["degradation_levels"].values()) == len(questions)
    assert sum(n for lv, n in stats["degradation_levels"].items() if lv != "0") > 0
    assert "deadline" in r.stderr and "questions per level" in r.stderr

    # a later run without a deadline, on a fresh output, straight to the server: the full pipeline
    direct_cfg = tmp_path / "direct.toml"
    direct_cfg.write_text(config_toml({**settings, "llm": {**llm, "base_url": f"{llama_server}/v1"}}))
    fresh = tmp_path / "fresh" / "answers.jsonl"
    r = run_cli("run", qfile, "--index", small_index, "-o", fresh, "--config", direct_cfg, "--limit", "2")
    assert r.returncode == 0, r.stderr
    assert len(_lines(fresh)) == 2 and not deadline_path(fresh).exists()
    assert [t["degradation_level"] for t in _lines(fresh.with_name("answers.traces.jsonl"))] == [0, 0]
    assert all(not any(f.startswith("deadline:") for f in t["fallbacks"])
               for t in _lines(fresh.with_name("answers.traces.jsonl")))
    stats = json.loads(fresh.with_name("answers.run.json").read_text())
    assert stats["deadline"] is None and stats["degradation_levels"]["0"] == 2
