"""Index builds on a real local Ray cluster (issue 24): a head and two worker nodes (each its own
raylet and worker processes, ``ray.cluster_utils.Cluster``), started and stopped by the tests.

* the sharded build as Ray tasks equals the one-shot build (the shard tests' comparison);
* a worker killed (SIGKILL) while it builds a shard: Ray retries the task, which resumes, and
  the build finishes with the same index;
* ``preqrag index --ray`` (a local Ray started for the call) builds the same passages.
"""

from __future__ import annotations

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

from conftest import encoder_atol, same_top

ray = pytest.importorskip("ray")


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


def _same_index(a: Path, b: Path, cfg, questions) -> None:
    from preqrag.index import Index

    assert pq.read_table(a / "passages.parquet").to_pydict() == pq.read_table(b / "passages.parquet").to_pydict()
    x, y = Index.open(a, cfg), Index.open(b, cfg)
    for ra, rb in zip(x.sparse.search(questions, 10), y.sparse.search(questions, 10)):
        assert ra.ids == rb.ids and np.allclose(ra.scores, rb.scores)
    tol = encoder_atol(x.encoder)  # the shards encode in other batches (and threads) than the one-shot build
    for ra, rb in zip(x.dense.search(questions, 10), y.dense.search(questions, 10)):
        assert same_top(ra, rb, tol)


def test_ray_build_equals_one_shot_build(cluster, small_index, small_corpus, test_config, tmp_path):
    from preqrag.distributed import build_index_ray

    seen = []
    manifest = build_index_ray(small_corpus[0], tmp_path / "idx", test_config, n_shards=3,
                               progress=lambda phase, d, t: seen.append((phase, d, t)))
    assert manifest["shards"] == 3 and manifest["ray"]["shards"] == 3
    assert ("shards", 3, 3) in seen  # one bar across all shards
    assert not (tmp_path / "idx.shards").exists()  # shards removed once the index is published
    one = json.loads((small_index / "manifest.json").read_text())
    assert manifest["n_passages"] == one["n_passages"]
    _same_index(small_index, tmp_path / "idx", test_config, [q["question"] for q in small_corpus[2]])


def _shard_workers() -> list[int]:
    """PIDs of Ray workers running a shard task (Ray titles the process ``ray::<function>``)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"ray::_build_shard_task" in cmd:
                pids.append(int(d.name))
    return pids


def test_worker_killed_during_the_build_is_retried_to_the_same_index(cluster, small_index, small_corpus,
                                                                      test_config, tmp_path):
    from preqrag.distributed import build_index_ray

    target = tmp_path / "idx"
    killed: list[int] = []
    stop = threading.Event()

    def killer():
        deadline = time.monotonic() + 600
        while not stop.is_set() and time.monotonic() < deadline:
            if list((tmp_path / "idx.shards").glob("*.partial/partial.json")):  # a shard is being built
                pids = _shard_workers()
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                    return
            time.sleep(0.005)

    th = threading.Thread(target=killer)
    th.start()
    try:
        manifest = build_index_ray(small_corpus[0], target, test_config, n_shards=2, max_retries=3)
    finally:
        stop.set()
        th.join()
    assert killed, "no shard worker was seen running"
    assert manifest["shards"] == 2
    _same_index(small_index, target, test_config, [q["question"] for q in small_corpus[2]])


def test_cli_index_ray_starts_a_local_ray(small_corpus, small_index, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # not the test cluster's driver env
    r = subprocess.run([sys.executable, "-m", "preqrag.cli", "index", "--corpus", str(small_corpus[0]),
                        "--index", str(tmp_path / "idx"), "--ray", "--shards", "2"],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert m["shards"] == 2
    assert (pq.read_table(tmp_path / "idx" / "passages.parquet").to_pydict()
            == pq.read_table(small_index / "passages.parquet").to_pydict())


# ---------------------------------------------------------------------- preqrag run --ray
RUN_OVERRIDES = {"pipeline": "preqrag", "rewriter": {"name": "none"}, "reranker": {"depth": 8},
                 "generator": {"max_new_tokens": 16}, "run": {"batch_size": 2}}
"""Every stage, LLM answers (SmolLM2, greedy), no LLM rewriting: a fast run with real models."""


@pytest.fixture(scope="module")
def local_answers(small_index, small_corpus, tmp_path_factory):
    from preqrag.config import load_config
    from preqrag.pipeline import Pipeline
    from preqrag.runner import run_questions

    cfg = load_config(None, RUN_OVERRIDES)
    out = tmp_path_factory.mktemp("local_run") / "answers.jsonl"
    # The reference runs with the actors' threads (1 CPU each on the test cluster): llama.cpp's greedy tokens
    # depend on its thread count (its sums are split differently), so 2 threads here could answer otherwise.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        pipeline = Pipeline.from_config(small_index, cfg)
        pipeline.warm_up()
        summary = run_questions(pipeline, small_corpus[1], out)
    assert summary.failed == 0
    return cfg, {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}


def _answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_on_ray_actors_answers_each_id_once_as_a_local_run(cluster, small_index, small_corpus, local_answers,
                                                               tmp_path):
    from preqrag.distributed import RayExecutor
    from preqrag.runner import run_questions, sidecar

    cfg, local = local_answers
    out = tmp_path / "answers.jsonl"
    from preqrag.distributed import actor_cpus

    assert actor_cpus(ray, 1) == 1.0  # an equal share (2 CPUs), capped by the largest node's (1)
    with RayExecutor(small_index, cfg, 2, cpus_per_worker=None) as ex:  # CPUs per actor as the CLI sizes them
        assert ex.cpus == 1.0 and ray.get([a.threads.remote() for a in ex.actors]) == [1, 1]  # no oversubscription
        summary = run_questions(None, small_corpus[1], out, executor=ex)
        assert len(set(ex.pids.values())) == 2
    got = _answers(out)
    assert sorted(r["id"] for r in got) == sorted(local) and summary.answered == len(local)  # each id once
    assert len(_answers(sidecar(out, "traces"))) == len(local)
    for r in got:  # same models, same answers and passages
        assert r["answer"] == local[r["id"]]["answer"] and r["passages"] == local[r["id"]]["passages"], r["id"]
    assert summary.model_calls.get("llm", 0) > 0  # counted in the actors


def test_actor_killed_mid_batch_loses_and_duplicates_nothing(cluster, small_index, small_corpus, local_answers,
                                                             tmp_path):
    from preqrag.distributed import RayExecutor
    from preqrag.runner import run_questions

    cfg, local = local_answers
    out = tmp_path / "answers.jsonl"
    killed: list[int] = []
    with RayExecutor(small_index, cfg, 2) as ex:
        def kill_a_busy_actor(done, total):
            busy = ex.busy_pids()
            if not killed and busy and done < total:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])

        summary = run_questions(None, small_corpus[1], out, executor=ex, on_progress=kill_a_busy_actor)
        assert killed and ex.lost_batches == 1
    got = _answers(out)
    assert sorted(r["id"] for r in got) == sorted(local) and summary.answered == len(local)
    for r in got:
        assert r["answer"] == local[r["id"]]["answer"], r["id"]


def test_run_ray_cli_with_a_deadline_already_past(small_index, small_corpus, tmp_path):
    """`preqrag run --ray --workers 2` (a local Ray for the call) with a deadline: every actor
    plans with it (already past here: every question extractive), the run file has the plans."""
    from conftest import config_toml

    cfg = tmp_path / "run.toml"
    cfg.write_text(config_toml(RUN_OVERRIDES))
    out = tmp_path / "answers.jsonl"
    r = subprocess.run([sys.executable, "-m", "preqrag.cli", "run", str(small_corpus[1]), "--index", str(small_index),
                        "-o", str(out), "--config", str(cfg), "--ray", "--workers", "2",
                        "--deadline", "2020-01-01T00:00:00Z"], capture_output=True, text=True, timeout=900,
                       env={k: v for k, v in os.environ.items() if not k.startswith("RAY_")})  # a Ray of its own
    assert r.returncode == 0, r.stderr[-3000:]
    ids = [a["id"] for a in _answers(out)]
    assert len(ids) == len(set(ids)) == len(small_corpus[2])
    stats = json.loads((tmp_path / "answers.run.json").read_text())
    assert stats["deadline"]["batches"] and all("actor" in b for b in stats["deadline"]["batches"])
    levels = stats["degradation_levels"]
    assert levels["0"] == 0 and sum(levels.values()) == len(ids)  # degraded, never the full pipeline
