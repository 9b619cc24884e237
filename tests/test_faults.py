"""Fault tolerance, tested for real: a local LLM server killed and restarted mid-run, LLM calls
that hang (a TCP proxy in front of the real server that never answers), retries exhausted.

Every scenario must end with each question either answered or recorded as failed with its
error, and a re-run must retry exactly the failed ones.
"""

import json
import subprocess
import sys
import time
from urllib.parse import urlparse

import pytest

from conftest import TEST_OVERRIDES, LlamaServer, TCPProxy, config_toml, run_cli
from preqrag.config import LLMConfig, load_config
from preqrag.llm.openai_backend import OpenAICompatibleLLM
from preqrag.pipeline import Pipeline
from preqrag.runner import run_questions, sidecar, stats_path

DOWN_S = 8.0
"""How long the killed server stays down: long enough for several batches' generation
calls to exhaust their retry (max_retries=1, backoff < 1 s)."""


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _openai_overrides(base_url: str, **llm) -> dict:
    return {**TEST_OVERRIDES, "llm": {"backend": "openai", "base_url": f"{base_url}/v1", "model": "smollm2",
                                      "structured_output": "json_object", "concurrency": 2, **llm}}


@pytest.mark.slow
def test_llm_server_killed_mid_run_and_restarted(tmp_path, small_index, small_corpus):
    server = LlamaServer().start()
    try:
        questions = small_corpus[2] + [{**q, "id": f"{q['id']}-b"} for q in small_corpus[2]]
        all_ids = {str(q["id"]) for q in questions}
        qfile = tmp_path / "q.jsonl"
        qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
        cfg = tmp_path / "preqrag.toml"
        # a generous timeout: the down time must show as connection errors, not as slow replies
        # on a loaded machine (the re-run must succeed)
        overrides = _openai_overrides(server.url, max_retries=1, timeout_s=120)
        cfg.write_text(config_toml({**overrides, "run": {"batch_size": 2}}))
        out = tmp_path / "answers.jsonl"
        cmd = [sys.executable, "-m", "preqrag.cli", "run", str(qfile), "--index", str(small_index),
               "-o", str(out), "--config", str(cfg)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while (not out.exists() or not out.read_text()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before the server could be killed"
        server.kill()  # crash mid-run
        time.sleep(DOWN_S)
        server.start()  # same port
        _, stderr = proc.communicate(timeout=600)

        answered = [str(a["id"]) for a in _lines(out)]
        failed = [f for f in _lines(sidecar(out, "failed")) if f["stage"] != "input"]
        failed_ids = [str(f["id"]) for f in failed]
        assert len(answered) == len(set(answered)) and len(failed_ids) == len(set(failed_ids))
        assert set(answered) | set(failed_ids) == all_ids and not set(answered) & set(failed_ids)
        assert failed, f"no question failed while the server was down for {DOWN_S}s:\n{stderr}"
        assert all(f["error"] and f["stage"] == "generate" and "openai backend" in f["error"] for f in failed)
        assert proc.returncode == 1  # failures are reported by the exit status
        stats = json.loads(stats_path(out).read_text())
        assert (stats["answered"], stats["failed"]) == (len(answered), len(failed))

        # the second run (the same command, in-process) retries the failed questions only
        r = run_cli(*cmd[3:])
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
    retry reaches the real server."""
    proxy = TCPProxy(urlparse(llama_server).port, hang_first=1)
    try:
        llm = OpenAICompatibleLLM(LLMConfig(backend="openai", base_url=f"{proxy.url}/v1", model="smollm2",
                                            timeout_s=3, max_retries=2))
        t = time.monotonic()
        reply = llm.chat([{"role": "user", "content": "Name one colour."}], max_tokens=8)
        elapsed = time.monotonic() - t
    finally:
        proxy.close()
    assert reply.strip()
    assert proxy.connections >= 2  # the hung attempt + the retry
    assert elapsed >= 3.0  # waited for the timeout before retrying


def test_calls_hanging_past_every_retry_are_recorded_failures(tmp_path, llama_server, small_index, small_corpus):
    proxy = TCPProxy(urlparse(llama_server).port, hang_first=None)  # every call hangs
    try:
        cfg = load_config(None, _openai_overrides(proxy.url, timeout_s=1, max_retries=1))
        qfile = tmp_path / "q.jsonl"
        questions = small_corpus[2][:2]
        qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
        out = tmp_path / "answers.jsonl"
        summary = run_questions(Pipeline.from_config(small_index, cfg), qfile, out)
    finally:
        proxy.close()
    assert (summary.answered, summary.failed) == (0, 2)
    failed = _lines(sidecar(out, "failed"))
    assert sorted(str(f["id"]) for f in failed) == sorted(str(q["id"]) for q in questions)
    assert all(f["stage"] == "generate" and "Timeout" in f["error"] for f in failed)
    assert not out.exists() or out.read_text() == ""
    # each generation call: the first attempt + 1 retry, each on a new connection (rewrite calls come on top)
    assert proxy.connections >= 2 * 2


def _limited(max_bytes: int):
    """preexec_fn: a file size limit (RLIMIT_FSIZE) for the child: a write past it fails with EFBIG
    (Python ignores SIGXFSZ), as on a full disk."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, resource.RLIM_INFINITY))


def test_disk_full_during_a_run_then_the_same_command_finishes(tmp_path, small_index, small_corpus):
    questions = small_corpus[2]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    cfg = tmp_path / "x.toml"  # no LLM: the extractive generator
    cfg.write_text(config_toml({"pipeline": "hybrid", "reranker": {"depth": 8}, "run": {"batch_size": 1},
                                "generator": {"name": "extractive"}}))
    args = ["run", str(qfile), "--index", str(small_index), "--config", str(cfg)]
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


def test_disk_full_during_a_build_then_the_same_command_resumes_to_the_same_index(tmp_path, small_index,
                                                                                   small_corpus):
    cfg = tmp_path / "t.toml"
    cfg.write_text(config_toml(TEST_OVERRIDES))
    files = json.loads((small_index / "manifest.json").read_text())["files"]
    limit = files["passages.parquet"]["size"] + 1024  # chunking fits; a larger file (the store) does not
    assert max(f["size"] for f in files.values()) > limit
    out = tmp_path / "idx"
    args = ["index", "--corpus", str(small_corpus[0]), "--index", str(out), "--config", str(cfg)]
    cmd = [sys.executable, "-m", "preqrag.cli", *args]  # the size limit needs a process of its own
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_limited(limit))
    assert r.returncode == 2 and "File too large (disk full, quota or file size limit)" in r.stderr, r.stderr
    assert not out.exists() and (tmp_path / "idx.partial").is_dir()  # nothing published; finished steps kept
    r = run_cli(*args)  # the same command, now with space
    assert r.returncode == 0, r.stderr
    resumed = json.loads((out / "manifest.json").read_text())["files"]
    assert {k: v["sha256"] for k, v in resumed.items()} == {k: v["sha256"] for k, v in files.items()}


KILL_LAUNCH = ("import sys, preqrag.index as ix; ix.SHARD = int(sys.argv.pop(1)); "
               "from preqrag.cli import main; sys.argv[0] = 'preqrag'; main()")
"""The CLI with small embedding shards (16 passages), so the small corpus gives several
checkpoints to kill between (bench/kill_build.py does the same at random points)."""


def test_build_killed_with_sigkill_during_encoding_resumes_to_the_same_index(tmp_path, small_corpus, monkeypatch):
    """The build killed (SIGKILL) is a process of its own; the reference build and the resumed
    one run the same command in-process with the same 16-passage shards."""
    import os
    import signal

    import preqrag.index as ix

    cfg = tmp_path / "t.toml"
    cfg.write_text(config_toml(TEST_OVERRIDES))

    def args(target):
        return ["index", "--corpus", str(small_corpus[0]), "--index", str(target), "--config", str(cfg)]

    def cmd(target):
        return [sys.executable, "-c", KILL_LAUNCH, "16", *args(target)]

    monkeypatch.setattr(ix, "SHARD", 16)
    ref = tmp_path / "ref"
    r = run_cli(*args(ref))
    assert r.returncode == 0, r.stderr
    expected = {k: v["sha256"] for k, v in json.loads((ref / "manifest.json").read_text())["files"].items()}

    target, partial = tmp_path / "idx", tmp_path / "idx.partial"
    proc = subprocess.Popen(cmd(target), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 900
    while not (partial / "emb_00001.npy").exists():  # two shards encoded: kill mid-encoding
        assert proc.poll() is None, "the build ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not target.exists() and len(list(partial.glob("emb_*.npy"))) >= 2  # nothing published, shards kept

    r = run_cli(*args(target))
    assert r.returncode == 0, r.stderr
    got = {k: v["sha256"] for k, v in json.loads((target / "manifest.json").read_text())["files"].items()}
    assert got == expected and not partial.exists()
    assert run_cli("index", "--verify", target).returncode == 0
