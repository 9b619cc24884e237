"""Fault tolerance, tested for real: a local LLM server killed and restarted mid-run, LLM calls
that hang (a TCP proxy in front of the real server that never answers), retries exhausted; a
full disk (a file size limit) during a run or a build, and a build killed mid-encoding.

Every run scenario must end with each question either answered or recorded as failed with its
error, and a re-run must retry exactly the failed ones; an interrupted build, run again, must
resume to the same index.
"""

import json
import subprocess
import sys
import time
from urllib.parse import urlparse

import pytest

from conftest import TEST_OVERRIDES, LlamaServer, TCPProxy, config_toml, run_cli
from preqrag.core.config import LLMConfig, load_config
from preqrag.models.llm.openai_backend import OpenAICompatibleLLM
from preqrag.run.pipeline import Pipeline
from preqrag.run.runner import run_questions, sidecar, stats_path


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


RUN_SETTINGS = {**TEST_OVERRIDES, "cross_encoder": {"name": "none"}}
"""The runs' settings: the test settings without the cross-encoder. Over :func:`bm25_index` a run
loads no embedder and no cross-encoder: these scenarios are about LLM calls and output files,
not retrieval."""


def _openai_overrides(base_url: str, **llm) -> dict:
    return {**RUN_SETTINGS, "llm": {"backend": "openai", "base_url": f"{base_url}/v1", "model": "smollm2",
                                    "structured_output": "json_object", "concurrency": 2, **llm}}


@pytest.fixture(scope="module")
def bm25_index(small_corpus, tmp_path_factory):
    """The small corpus indexed BM25-only (``preqrag index --sparse-only``, in-process: a second or two)."""
    d = tmp_path_factory.mktemp("bm25_index")
    cfg = d / "t.toml"
    cfg.write_text(config_toml(RUN_SETTINGS))
    r = run_cli("index", "--corpus", small_corpus[0], "--index", d / "index", "--sparse-only", "--config", cfg)
    assert r.returncode == 0, r.stderr
    return d / "index"


def test_llm_server_killed_mid_run_and_restarted(tmp_path, bm25_index, small_corpus, monkeypatch):
    """``preqrag run`` (in-process) against a server of its own, batch by batch: once the first
    batch is written the server is killed (SIGKILL, a crash), and once the next batch is written it
    is restarted on the same port. The second batch's generation calls (and their retry) meet a
    dead server, so it fails; the third is answered. The kill and the restart hook into the run's
    progress callback, so the down time is exactly one batch on any machine."""
    from preqrag.run import runner

    server = LlamaServer().start()
    try:
        questions = small_corpus[2][:3]
        all_ids = [str(q["id"]) for q in questions]
        qfile = tmp_path / "q.jsonl"
        qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
        cfg = tmp_path / "preqrag.toml"
        # a generous timeout: the down time must show as connection errors, not as slow replies
        # on a loaded machine (the re-run must succeed); short prompts and answers (one cut passage,
        # 4 tokens: the answers are not under test)
        overrides = _openai_overrides(server.url, max_retries=1, timeout_s=120)
        cfg.write_text(config_toml({**overrides, "run": {"batch_size": 1},
                                    "generator": {"sentence_scorer": "words", "max_new_tokens": 4, "max_passage_tokens": 32,
                                                  "context_top_k": 1}}))
        out = tmp_path / "answers.jsonl"
        args = ["run", qfile, "--index", bm25_index, "-o", out, "--config", cfg]
        events = []
        run_questions_ = runner.run_questions

        def crash_after_the_first_batch(*a, on_progress=None, **kw):
            def progress(done, todo):
                if on_progress is not None:
                    on_progress(done, todo)
                if done == 1:
                    server.kill()  # crash mid-run
                    events.append(("killed", len(_lines(out))))
                elif done == 2:
                    server.start()  # same port
                    events.append(("restarted", len(_lines(out))))
            return run_questions_(*a, on_progress=progress, **kw)

        with monkeypatch.context() as m:
            m.setattr(runner, "run_questions", crash_after_the_first_batch)  # cli.run imports it when called
            r = run_cli(*args)
        assert events == [("killed", 1), ("restarted", 1)], r.stderr

        answered = [str(a["id"]) for a in _lines(out)]
        failed = [f for f in _lines(sidecar(out, "failed")) if f["stage"] != "input"]
        failed_ids = [str(f["id"]) for f in failed]
        assert len(answered) == len(set(answered)) and len(failed_ids) == len(set(failed_ids))
        assert set(answered) | set(failed_ids) == set(all_ids) and not set(answered) & set(failed_ids)
        assert (answered, failed_ids) == ([all_ids[0], all_ids[2]], [all_ids[1]]), r.stderr  # the batch sent while down
        assert all(f["error"] and f["stage"] == "generate" and "openai backend" in f["error"] for f in failed)
        assert r.returncode == 1, r.stderr  # failures are reported by the exit status
        stats = json.loads(stats_path(out).read_text())
        assert (stats["answered"], stats["failed"]) == (len(answered), len(failed))

        # the second run (the same command, server up) retries the failed questions only
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
        stats2 = json.loads(stats_path(out).read_text())
        assert stats2["skipped"] == len(answered)
        assert (stats2["answered"], stats2["failed"]) == (len(failed), 0)
        final = [str(a["id"]) for a in _lines(out)]
        assert sorted(final) == sorted(all_ids)  # each id exactly once
        assert sorted(str(t["id"]) for t in _lines(sidecar(out, "traces"))) == sorted(all_ids)
    finally:
        server.close()


def test_hanging_llm_call_times_out_and_is_retried(llama_server):
    """The first connection hangs (accepted, never answered); the client times out and its
    retry reaches the real server. The server first answers the same request directly: its first
    reply on a loaded machine can take longer than the 3 s timeout, while the retry's (the prompt
    already evaluated, in the server's cache) comes well within it."""
    messages = [{"role": "user", "content": "Name one colour."}]
    direct = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"{llama_server}/v1", model="smollm2"))
    try:
        assert direct.chat(messages, max_tokens=2).strip()
    finally:
        direct.close()
    proxy = TCPProxy(urlparse(llama_server).port, hang_first=1)
    try:
        llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"{proxy.url}/v1", model="smollm2",
                                            timeout_s=3, max_retries=2))
        t = time.monotonic()
        reply = llm.chat(messages, max_tokens=2)
        elapsed = time.monotonic() - t
    finally:
        proxy.close()
    assert reply.strip()
    assert proxy.connections >= 2  # the hung attempt + the retry
    assert elapsed >= 3.0  # waited for the timeout before retrying


def test_calls_hanging_past_every_retry_are_recorded_failures(tmp_path, llama_server, bm25_index, small_corpus):
    proxy = TCPProxy(urlparse(llama_server).port, hang_first=None)  # every call hangs
    try:
        cfg = load_config(None, _openai_overrides(proxy.url, timeout_s=0.5, max_retries=1))
        qfile = tmp_path / "q.jsonl"
        questions = small_corpus[2][:2]
        qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
        out = tmp_path / "answers.jsonl"
        summary = run_questions(Pipeline.from_config(bm25_index, cfg), qfile, out)
    finally:
        proxy.close()
    assert (summary.answered, summary.failed) == (0, 2)
    failed = _lines(sidecar(out, "failed"))
    assert sorted(str(f["id"]) for f in failed) == sorted(str(q["id"]) for q in questions)
    assert all(f["stage"] == "generate" and "Timeout" in f["error"] for f in failed)
    assert not out.exists() or out.read_text() == ""
    # each generation call: the first attempt + 1 retry, each on a new connection
    assert proxy.connections >= 2 * 2


def _limited(max_bytes: int):
    """preexec_fn: a file size limit (RLIMIT_FSIZE) for the child: a write past it fails with EFBIG
    (Python ignores SIGXFSZ), as on a full disk."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.RLIM_INFINITY))


def test_disk_full_during_a_run_then_the_same_command_finishes(tmp_path, bm25_index, small_corpus):
    """The run under the file size limit is a process of its own; the probe that measures the
    traces and the rerun are the same command in-process."""
    questions = small_corpus[2][:3]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    cfg = tmp_path / "x.toml"  # no LLM: the extractive generator
    cfg.write_text(config_toml({**RUN_SETTINGS, "run": {"batch_size": 1}, "generator": {"name": "extractive"}}))
    args = ["run", str(qfile), "--index", str(bm25_index), "--config", str(cfg)]
    cmd = [sys.executable, "-m", "preqrag.cli", *args]  # the size limit needs a process of its own
    probe = tmp_path / "probe.jsonl"
    assert run_cli(*args, "-o", probe).returncode == 0
    sizes = [len(line.encode()) for line in open(sidecar(probe, "traces"), encoding="utf-8")]
    limit = sum(sizes[:2]) + sizes[2] // 2  # the third question's trace does not fit
    out = tmp_path / "answers.jsonl"
    r = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, timeout=600, preexec_fn=_limited(limit))
    assert r.returncode == 2, r.stderr
    assert "answers.traces.jsonl: File too large (disk full, quota or file size limit)" in r.stderr
    assert "run the same command again when there is space" in r.stderr
    answers = [json.loads(line) for line in open(out, encoding="utf-8")]  # every line whole: no torn line
    assert [a["id"] for a in answers] == [q["id"] for q in questions[:2]]
    assert len(open(sidecar(out, "traces"), encoding="utf-8").read().splitlines()) == 2
    r = run_cli(*args, "-o", out)  # the same command, now with space
    assert r.returncode == 0 and "2 already answered" in r.stderr, r.stderr
    assert sorted(json.loads(line)["id"] for line in open(out, encoding="utf-8")) == sorted(q["id"] for q in questions)


BUILD_SETTINGS = {**TEST_OVERRIDES, "embedder": {"name": "wordllama/l2_supercat_256"}}
"""The build tests' settings: the WordLlama embedder (static embeddings, the same vector for a text
whatever the batch, so any shard size builds the same index), so that a build process imports no
torch and encodes in no time: the interruptions and the resumes are under test, not the encoder."""

BUILD_SHARD = 4
"""Passages per embedding shard in the killed build (the default is 2048), so that a small corpus
gives several checkpoints (bench/kill_build.py kills builds at random points)."""


@pytest.fixture(scope="module")
def build_ref(small_corpus, tmp_path_factory):
    """``(corpus, config file, reference index)``: the first 6 documents of the small corpus (20
    passages), indexed once in-process with :data:`BUILD_SETTINGS` and the default shard size: the
    index each interrupted build must resume to."""
    d = tmp_path_factory.mktemp("build")
    corpus = d / "corpus.jsonl"
    with open(small_corpus[0], encoding="utf-8") as fh:
        corpus.write_text("".join(fh.readlines()[:6]), encoding="utf-8")
    cfg = d / "t.toml"
    cfg.write_text(config_toml(BUILD_SETTINGS))
    ref = d / "ref"
    r = run_cli(*_index_args(corpus, ref, cfg))
    assert r.returncode == 0, r.stderr
    assert json.loads((ref / "manifest.json").read_text())["n_passages"] > 3 * BUILD_SHARD
    return corpus, cfg, ref


def _index_args(corpus, index, cfg) -> list[str]:
    return ["index", "--corpus", str(corpus), "--index", str(index), "--config", str(cfg)]


def _hashes(index) -> dict:
    return {k: v["sha256"] for k, v in json.loads((index / "manifest.json").read_text())["files"].items()}


def test_disk_full_during_a_build_then_the_same_command_resumes_to_the_same_index(tmp_path, build_ref):
    """The build under the file size limit is a process of its own; the resumed one (the same
    command) runs in-process."""
    corpus, cfg, ref = build_ref
    files = json.loads((ref / "manifest.json").read_text())["files"]
    limit = files["passages.parquet"]["size"] + 1024  # chunking fits; a larger file (the store) does not
    assert max(f["size"] for f in files.values()) > limit
    out = tmp_path / "idx"
    args = _index_args(corpus, out, cfg)
    cmd = [sys.executable, "-m", "preqrag.cli", *args]  # the size limit needs a process of its own
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_limited(limit))
    assert r.returncode == 2 and "File too large (disk full, quota or file size limit)" in r.stderr, r.stderr
    assert not out.exists() and (tmp_path / "idx.partial").is_dir()  # nothing published; finished steps kept
    r = run_cli(*args)  # the same command, now with space
    assert r.returncode == 0, r.stderr
    assert _hashes(out) == _hashes(ref)


KILL_LAUNCH = """
import sys, time
import preqrag.index.embedded as ix
ix.SHARD = int(sys.argv.pop(1))
save = ix._save_shard
def _save(path, embeddings):
    save(path, embeddings)
    if path.name == "emb_00001.npy":
        time.sleep(600)  # the next shard's encoding, in which the build is killed
ix._save_shard = _save
from preqrag.cli.app import main
sys.argv[0] = "preqrag"
main()
"""
"""The CLI with embedding shards of the first argument's size (:data:`BUILD_SHARD`), pausing in the
encoding once the second shard is saved: WordLlama encodes in no time, so the kill needs a moment
inside the encoding to land in (bench/kill_build.py sleeps a random fraction of a phase instead)."""


def test_build_killed_with_sigkill_during_encoding_resumes_to_the_same_index(tmp_path, build_ref, monkeypatch):
    """The build killed (SIGKILL) is a process of its own; the resumed one runs the same command
    in-process with the same shard size, and must give the reference index (built in one shard)."""
    import os
    import signal

    import preqrag.index.embedded as ix

    corpus, cfg, ref = build_ref
    target, partial = tmp_path / "idx", tmp_path / "idx.partial"
    args = _index_args(corpus, target, cfg)
    proc = subprocess.Popen([sys.executable, "-c", KILL_LAUNCH, str(BUILD_SHARD), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 900
    while not (partial / "emb_00001.npy").exists():  # two shards encoded: kill mid-encoding
        assert proc.poll() is None, "the build ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not target.exists() and len(list(partial.glob("emb_*.npy"))) >= 2  # nothing published, shards kept

    monkeypatch.setattr(ix, "SHARD", BUILD_SHARD)  # the killed build's shards are resumed, not re-cut
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert _hashes(target) == _hashes(ref) and not partial.exists()
    assert run_cli("index", "--verify", target).returncode == 0
