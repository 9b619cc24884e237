"""Models size their thread pools by the CPUs the process was given (OMP_NUM_THREADS, as Ray sets
it for an actor; else the CPU affinity), not by the machine's cores (issue 24: two Ray actors on
2 cores ran 4 inference threads). The cross-encoder scores pairs one per Python thread over a
single-threaded onnxruntime session: its ``workers`` count is checked. Each case loads the real bundled cross-encoder (onnxruntime)
and SmolLM2 (llama.cpp) in a fresh process and reads the thread counts the libraries report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, os, sys
cpus = json.loads(sys.argv[1])
if cpus is not None:
    os.sched_setaffinity(0, cpus)
from preqrag.core.config import CrossEncoderConfig, LLMConfig
from preqrag.models.llm.llamacpp import LlamaCppLLM
from preqrag.models.rerankers import load_reranker
from preqrag.models.threads import cpu_threads

ce = load_reranker(CrossEncoderConfig())
session, _ = ce._load()
llm = LlamaCppLLM(LLMConfig())._load()
assert session.get_session_options().intra_op_num_threads == 1  # pairs run alone, one per thread
print(json.dumps({"cpu_threads": cpu_threads(),
                  "onnxruntime": ce.workers,
                  "llama_cpp": llm.n_threads}))
"""


def _probe(omp: str | None, cpus: list[int] | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cpus)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_models_use_the_threads_the_process_was_given():
    pytest.importorskip("llama_cpp")
    machine = len(os.sched_getaffinity(0))
    # as a Ray actor with num_cpus=1 (Ray exports OMP_NUM_THREADS=1 to it)
    assert _probe("1", None) == {"cpu_threads": 1, "onnxruntime": 1, "llama_cpp": 1}
    # pinned to one CPU (taskset, a cpuset), nothing exported
    assert _probe(None, [sorted(os.sched_getaffinity(0))[0]]) == {"cpu_threads": 1, "onnxruntime": 1, "llama_cpp": 1}
    # a malformed value is ignored, as OpenMP ignores it: every CPU the process may use
    assert _probe("lots", None) == {"cpu_threads": machine, "onnxruntime": machine, "llama_cpp": machine}
