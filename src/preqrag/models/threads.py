"""How many threads a model may use in this process.

onnxruntime (embedder, cross-encoder) and llama.cpp size their thread pools from this, so that
a process given a share of a machine uses that share: a Ray actor or task started with
``num_cpus=1`` (Ray sets ``OMP_NUM_THREADS`` to the actor's CPUs), a job pinned with
``taskset`` or a container's cpuset. Sizing them by ``os.cpu_count()`` instead made two
``preqrag run --ray`` actors on a 2-core machine run 4 inference threads on 2 cores
(docs/ray.md). torch reads ``OMP_NUM_THREADS`` itself.
"""

from __future__ import annotations

import os


def cpu_threads() -> int:
    """Threads for one model's inference in this process (an int ≥ 1).

    In order: ``OMP_NUM_THREADS`` when it is set to a positive integer (Ray sets it for each
    actor and task to its ``num_cpus``; a user can set it to share a machine); else the CPUs
    this process may run on (``os.sched_getaffinity``: taskset, cgroup cpusets); else
    ``os.cpu_count()``; else 1. A malformed ``OMP_NUM_THREADS`` is ignored, as OpenMP
    runtimes ignore it.
    """
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1
