"""Index builds and runs on Ray (issue 24).

* ``preqrag index --ray`` without an address starts a local Ray for the call and stops it
  after (run in this process before the test cluster is joined);
* on a real local Ray cluster (a head and two worker nodes, each its own raylet and worker
  processes, ``ray.cluster_utils.Cluster``, started once for the module): the sharded build as
  Ray tasks equals the one-shot build (the shard tests' comparison), even though a worker is
  killed (SIGKILL) while it builds a shard: Ray retries the task, which resumes;
* ``preqrag run --ray`` on two Ray actors answers each id once, as a local run does, and an
  actor killed mid-batch loses and duplicates nothing; ``preqrag run --ray --deadline`` has
  every actor plan with the deadline.

Every build indexes six documents of the small corpus (few passages to encode). The cluster
build uses the default embedder (sentence-transformers: a shard takes long enough to be killed
mid-way); the CLI build and the runs use :data:`RUN_OVERRIDES`, whose models (scikit-learn,
WordLlama, ONNX, llama.cpp) load in a Ray worker in seconds, without importing torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from _bench import unavailable
from conftest import config_toml, encoder_atol, run_cli, same_top

ray = pytest.importorskip("ray")

RUN_OVERRIDES = {"pipeline": "preqrag", "embedder": {"name": "wordllama"}, "rewriter": {"name": "none"},
                 "cross_encoder": {"depth": 8, "max_length": 128},
                 "generator": {"sentence_scorer": "words", "max_new_tokens": 16, "max_passage_tokens": 32}, "run": {"batch_size": 2}}
"""Every stage, LLM answers (SmolLM2, greedy), no LLM rewriting: a fast run with real models
that need no torch (the learned classifier, the WordLlama embedder, the ONNX cross-encoder on
128-token pairs, 32 tokens of each passage in the prompt), so a Ray actor starts in seconds."""


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.add_node(num_cpus=1)
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def ray_corpus(small_corpus, tmp_path_factory):
    """The first six documents of the small corpus (three per shard of two, two per shard of three)."""
    corpus = tmp_path_factory.mktemp("ray_corpus") / "corpus.jsonl"
    corpus.write_text("".join(small_corpus[0].read_text(encoding="utf-8").splitlines(keepends=True)[:6]),
                      encoding="utf-8")
    return corpus


@pytest.fixture(scope="module")
def run_index(ray_corpus, tmp_path_factory):
    """(config, index): :data:`RUN_OVERRIDES` loaded, and :func:`ray_corpus` indexed with it by
    the one-shot build (the runs' index, and the CLI build's reference)."""
    from preqrag.core.config import load_config
    from preqrag.index.embedded import build_index

    if importlib.util.find_spec("wordllama") is None:
        unavailable('the run configuration\'s embedder needs wordllama: pip install "wordllama==0.4.0.post1"')
    cfg = load_config(None, RUN_OVERRIDES)
    index = tmp_path_factory.mktemp("run_index") / "index"
    build_index(ray_corpus, index, cfg)
    return cfg, index


@pytest.fixture(scope="module")
def few_questions(small_corpus, tmp_path_factory):
    """(questions file, questions): two single-document and one multi-document question of the
    small corpus; with ``run.batch_size = 2`` a batch of two and a batch of one."""
    questions = small_corpus[2]
    chosen = [q for q in questions if q["n_gold"] == 1][:2] + [q for q in questions if q["n_gold"] == 2][:1]
    path = tmp_path_factory.mktemp("few_questions") / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in chosen), encoding="utf-8")
    return path, chosen


def _cli_with_its_own_ray(monkeypatch, *args):
    """``preqrag ARGS`` where the command starts a Ray of its own, with no ``RAY_*`` variable of
    the test cluster's driver set: in this process (:func:`conftest.run_cli`) while it has not
    joined the test cluster (the file's order: these tests come first), else in a subprocess (a
    driver cannot leave a cluster, run a local Ray and join the cluster again reliably)."""
    for k in [k for k in os.environ if k.startswith("RAY_")]:
        monkeypatch.delenv(k)
    if not ray.is_initialized():
        r = run_cli(*args)
        assert not ray.is_initialized(), "the command left its Ray running"
        return r
    return subprocess.run([sys.executable, "-m", "preqrag.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=900)


def _same_index(a: Path, b: Path, cfg, questions) -> None:
    from preqrag.index.embedded import Index

    assert pq.read_table(a / "passages.parquet").to_pydict() == pq.read_table(b / "passages.parquet").to_pydict()
    x, y = Index.open(a, cfg), Index.open(b, cfg)
    for ra, rb in zip(x.sparse.search(questions, 10), y.sparse.search(questions, 10)):
        assert ra.ids == rb.ids and np.allclose(ra.scores, rb.scores)
    tol = encoder_atol(x.encoder)  # the shards encode in other batches (and threads) than the one-shot build
    for ra, rb in zip(x.dense.search(questions, 10), y.dense.search(questions, 10)):
        assert same_top(ra, rb, tol)


def _answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------------- the CLI: a local Ray for the call
def test_cli_index_ray_starts_a_local_ray(ray_corpus, run_index, tmp_path, monkeypatch):
    """`preqrag index --ray --shards 2` (no address: a local Ray started for the call and stopped
    after it) builds the same passages as the one-shot build."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(config_toml(RUN_OVERRIDES))
    r = _cli_with_its_own_ray(monkeypatch, "index", "--corpus", ray_corpus, "--index", tmp_path / "idx", "--config",
                              cfg, "--ray", "--shards", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert m["shards"] == 2
    assert (pq.read_table(tmp_path / "idx" / "passages.parquet").to_pydict()
            == pq.read_table(run_index[1] / "passages.parquet").to_pydict())


# ---------------------------------------------------------------------- builds on the test cluster
def _shard_workers(cluster) -> list[int]:
    """PIDs of the test cluster's Ray workers running a shard task: Ray titles the process
    ``ray::<function>``, and its parent is one of the cluster's raylets (not another Ray's on
    this machine)."""
    raylets = {node.all_processes["raylet"][0].process.pid for node in [cluster.head_node, *cluster.worker_nodes]}
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"ray::_build_shard_task" in cmd and ppid in raylets:
                pids.append(int(d.name))
    return pids


def test_ray_build_equals_one_shot_build_though_a_worker_is_killed(cluster, ray_corpus, small_corpus, test_config,
                                                                    tmp_path):
    """Three shards as Ray tasks on the two worker nodes, with the default embedder; a worker is
    SIGKILLed while it builds a shard, Ray retries the task (which resumes), and the merged index
    equals the one-shot build."""
    from preqrag.run.distributed import build_index_ray
    from preqrag.index.embedded import build_index

    corpus, one_shot = ray_corpus, tmp_path / "one_shot"
    build_index(corpus, one_shot, test_config)
    target = tmp_path / "idx"
    killed: list[int] = []
    stop = threading.Event()

    def killer():
        deadline = time.monotonic() + 600
        while not stop.is_set() and time.monotonic() < deadline:
            if list((tmp_path / "idx.shards").glob("*.partial/partial.json")):  # a shard is being built
                pids = _shard_workers(cluster)
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                    return
            time.sleep(0.005)

    seen = []
    th = threading.Thread(target=killer)
    th.start()
    try:
        manifest = build_index_ray(corpus, target, test_config, n_shards=3, max_retries=3,
                                   progress=lambda phase, d, t: seen.append((phase, d, t)))
    finally:
        stop.set()
        th.join()
    assert killed, "no shard worker was seen running"
    assert manifest["shards"] == 3 and manifest["ray"]["shards"] == 3
    assert ("shards", 3, 3) in seen  # one bar across all shards
    assert not (tmp_path / "idx.shards").exists()  # shards removed once the index is published
    one = json.loads((one_shot / "manifest.json").read_text())
    assert manifest["n_passages"] == one["n_passages"]
    _same_index(one_shot, target, test_config, [q["question"] for q in small_corpus[2]])


# ---------------------------------------------------------------------- preqrag run --ray, on the test cluster
@pytest.fixture(scope="module")
def local_answers(run_index, few_questions, tmp_path_factory):
    """Answers by id of a local run of :func:`few_questions` (the reference of the Ray runs)."""
    from preqrag.run.pipeline import Pipeline
    from preqrag.run.runner import run_questions

    cfg, index = run_index
    out = tmp_path_factory.mktemp("local_run") / "answers.jsonl"
    # The reference runs with the actors' threads (1 CPU each on the test cluster): llama.cpp's greedy tokens
    # depend on its thread count (its sums are split differently), so 2 threads here could answer otherwise.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        pipeline = Pipeline.from_config(index, cfg)
        pipeline.warm_up()
        summary = run_questions(pipeline, few_questions[0], out)
    assert summary.failed == 0
    return {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}


def test_run_on_ray_actors_as_a_local_run_even_when_an_actor_is_killed(cluster, run_index, few_questions,
                                                                       local_answers, tmp_path):
    """Two actors (one per worker node) answer each id once, with the answers and passages of a
    local run; then, on the same actors, a second run in which an actor is SIGKILLed mid-batch
    (the two-question batch, still running when the one-question batch is done): its batch goes
    to the other actor, nothing is lost or duplicated, the answers are the same."""
    from preqrag.run.distributed import RayExecutor, actor_cpus
    from preqrag.run.runner import run_questions, sidecar

    (cfg, index), local = run_index, local_answers
    assert actor_cpus(ray, 1) == 1.0  # an equal share (2 CPUs), capped by the largest node's (1)
    out, again = tmp_path / "answers.jsonl", tmp_path / "again.jsonl"
    killed: list[int] = []
    with RayExecutor(index, cfg, 2, cpus_per_worker=None) as ex:  # CPUs per actor as the CLI sizes them
        assert ex.cpus == 1.0 and ray.get([a.threads.remote() for a in ex.actors]) == [1, 1]  # no oversubscription
        summary = run_questions(None, few_questions[0], out, executor=ex)
        assert len(set(ex.pids.values())) == 2
        assert summary.model_calls.get("llm", 0) > 0  # counted in the actors
        assert ex.lost_batches == 0

        def kill_a_busy_actor(done, total):
            busy = ex.busy_pids()
            if not killed and busy and done < total:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])

        summary_again = run_questions(None, few_questions[0], again, executor=ex, on_progress=kill_a_busy_actor)
        assert killed and ex.lost_batches == 1
    got = _answers(out)
    assert sorted(r["id"] for r in got) == sorted(local) and summary.answered == len(local)  # each id once
    assert len(_answers(sidecar(out, "traces"))) == len(local)
    for r in got:  # same models, same answers and passages
        assert r["answer"] == local[r["id"]]["answer"] and r["passages"] == local[r["id"]]["passages"], r["id"]
    got = _answers(again)
    assert sorted(r["id"] for r in got) == sorted(local) and summary_again.answered == len(local)
    # the lost batch, answered again by the other actor: the same passages; the answer text may differ in a
    # token, since that actor's llama.cpp context held another prompt before, whose common prefix it reuses
    # (llama-cpp-python's prefix cache), so its prompt is evaluated in other chunks, with other rounding
    for r in got:
        assert r["passages"] == local[r["id"]]["passages"] and r["answer"].strip(), r["id"]


def test_run_ray_cli_with_a_deadline_already_past(cluster, run_index, few_questions, tmp_path):
    """`preqrag run --ray --workers 2` with a deadline: every actor plans with it (already past
    here: every question extractive), the run file has the plans. Run in this process, connected
    to the test cluster: the command joins the Ray it finds initialised (a local Ray started for
    a call is test_cli_index_ray_starts_a_local_ray's)."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(config_toml(RUN_OVERRIDES))
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", few_questions[0], "--index", run_index[1], "-o", out, "--config", cfg, "--ray",
                "--workers", "2", "--deadline", "2020-01-01T00:00:00Z")
    assert r.returncode == 0, r.stderr[-3000:]
    assert ray.is_initialized()  # the test cluster's connection, left as it was
    ids = [a["id"] for a in _answers(out)]
    assert len(ids) == len(set(ids)) == len(few_questions[1])
    stats = json.loads((tmp_path / "answers.run.json").read_text())
    assert stats["deadline"]["batches"] and all("actor" in b for b in stats["deadline"]["batches"])
    levels = stats["degradation_levels"]
    assert levels["0"] == 0 and sum(levels.values()) == len(ids)  # degraded, never the full pipeline
