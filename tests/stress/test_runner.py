"""Batch runs through the real CLI: bad input lines, resume, SIGKILL at a random point."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import TEST_OVERRIDES, run_cli
from conftest import config_toml as _toml


@pytest.fixture()
def cfg_file(tmp_path):
    p = tmp_path / "preqrag.toml"
    p.write_text(_toml(TEST_OVERRIDES))
    return p


@pytest.fixture(scope="module")
def bm25_index(small_corpus, tmp_path_factory):
    """The small corpus indexed BM25-only (``preqrag index --sparse-only``, in-process: a second or
    two), for the batch runs: BM25 and the cross-encoder, no embedder, so that the process killed
    below does not spend its time importing sentence-transformers."""
    d = tmp_path_factory.mktemp("bm25_index")
    r = run_cli("index", "--corpus", small_corpus[0], "--index", d / "index", "--sparse-only")
    assert r.returncode == 0, r.stderr
    return d / "index"


def _cli(*args, **kw):
    return run_cli(*args, **kw)


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_bad_lines_reported_and_run_resumes(tmp_path, bm25_index, small_corpus, cfg_file):
    """No LLM here (the extractive generator): the subject is the input, the resume and the report."""
    cfg_file.write_text(_toml({**TEST_OVERRIDES, "generator": {"name": "extractive"}}))
    questions = small_corpus[2][:2]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("\n".join([json.dumps(questions[0]), "{broken", json.dumps({"id": "x1", "question": ""}),
                                json.dumps({"question": "no id"}), json.dumps(questions[1])]) + "\n")
    out = tmp_path / "answers.jsonl"
    r = _cli("run", qfile, "--index", bm25_index, "-o", out, "--config", cfg_file)
    assert r.returncode == 0, r.stderr
    assert f"{qfile}:2: <line>: invalid JSON" in r.stderr
    assert f"{qfile}:3: question: missing or empty" in r.stderr
    assert f"{qfile}:4: id: missing" in r.stderr
    answers = _lines(out)
    assert [a["id"] for a in answers] == [questions[0]["id"], questions[1]["id"]]
    assert len(_lines(tmp_path / "answers.traces.jsonl")) == 2
    failed = _lines(tmp_path / "answers.failed.jsonl")
    assert [(f["line"], f["field"]) for f in failed] == [(2, "<line>"), (3, "question"), (4, "id")]
    # second run: nothing left to do, nothing duplicated
    r = _cli("run", qfile, "--index", bm25_index, "-o", out, "--config", cfg_file)
    assert r.returncode == 0 and "2 already answered" in r.stderr
    assert len(_lines(out)) == 2

    # the run output on smoke questions becomes an evaluation report
    report = tmp_path / "report"
    r = _cli("eval", out, "--questions", qfile, "-o", report)
    assert r.returncode == 0, r.stderr
    md = (report / "report.md").read_text()
    assert "hit@1" in md and "recall@10" in md
    metrics = json.loads((report / "metrics.json").read_text())
    assert "final" in json.dumps(metrics) and (report / "report.html").exists()


def test_sigkill_at_random_point_then_rerun_holds_each_id_once(tmp_path, bm25_index, small_corpus, cfg_file):
    """The killed run is a process of its own; the rerun is the same command in-process. Answers
    are extractive (no LLM: the runner is under test, not the model), one question per batch, and
    the kill point is drawn in answers rather than seconds, so it falls inside the run on a fast
    machine as on a loaded one: after a random number of answers (1 to all but one), a random
    moment into the next batch."""
    questions = small_corpus[2]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    out = tmp_path / "answers.jsonl"
    cfg_file.write_text(_toml({**TEST_OVERRIDES, "run": {"batch_size": 1}, "generator": {"name": "extractive"}}))
    rng = random.Random(os.getpid())
    after = rng.randint(1, len(questions) - 1)
    proc = subprocess.Popen([sys.executable, "-m", "preqrag.cli", "run", str(qfile), "--index", str(bm25_index),
                             "-o", str(out), "--config", str(cfg_file)], stderr=subprocess.DEVNULL)
    # wait for `after` answers, then kill at a random moment during the following ones
    deadline = time.monotonic() + 300
    while ((not out.exists() or out.read_bytes().count(b"\n") < after) and time.monotonic() < deadline
           and proc.poll() is None):
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.2))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(read_valid(out))
    assert after <= before <= len(questions)
    r = _cli("run", qfile, "--index", bm25_index, "-o", out, "--config", cfg_file)
    assert r.returncode == 0, r.stderr
    ids = [a["id"] for a in _lines(out)]  # every line valid JSON
    assert sorted(ids) == sorted(q["id"] for q in questions)
    traces = {t["id"] for t in read_valid(tmp_path / "answers.traces.jsonl")}
    assert traces == set(ids)


def read_valid(path):
    from preqrag.core.io import read_jsonl_tolerant

    return read_jsonl_tolerant(path)


def test_ask_and_config_commands(small_index, cfg_file):
    r = _cli("config")
    assert r.returncode == 0 and "[cross_encoder]" in r.stdout and 'name = "cross-encoder/ms-marco-MiniLM-L-12-v2"' in r.stdout
    bad = cfg_file.parent / "bad.toml"
    bad.write_text("[cross_encoder]\ndepht = 3\n")
    r = _cli("config", "--config", bad)
    assert r.returncode == 2 and "cross_encoder.depht" in r.stderr
    # the LLM answers from one short passage, in a few tokens (the record's fields are under test)
    cfg_file.write_text(_toml({**TEST_OVERRIDES, "generator": {"sentence_scorer": "words", "context_top_k": 1, "max_passage_tokens": 64,
                                                                "max_new_tokens": 4}}))
    r = _cli("ask", "--index", small_index, "--config", cfg_file, "--trace",
             "What data should a hotel look at to set room rates?")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert set(rec) == {"id", "question", "passages", "final_prompt", "answer", "trace"}
