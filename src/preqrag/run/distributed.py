"""Index builds on a Ray cluster (issue 24): ``preqrag index --corpus C --index IDX --ray [--ray-address A]``.

The sharded build of :mod:`preqrag.index.shards` (documents ``o % N == i`` chunked and encoded by
shard ``i``, then one merge that builds BM25 over every passage, so the result equals a
one-shot build) with Ray (https://docs.ray.io) doing the placement, the retries and the
progress instead of the user's scheduler:

* each shard is one Ray task (:func:`_build_shard_task`) asking for ``num_gpus`` (encoding on
  a GPU when the cluster has one) or ``cpus_per_shard`` CPUs; Ray runs as many at once as the
  cluster's resources allow;
* a task whose worker dies (a lost node, an OOM kill, SIGKILL) is retried by Ray
  (``max_retries``, Ray's own mechanism for system failures); the retry resumes from the
  shard's checkpointed embedding files (``<shard>.partial/emb_*.npy``), so only the
  unfinished part is encoded again, and a shard that had already finished is taken as is;
* the merge runs on the driver once every shard has finished;
* progress is one bar across all shards (``progress("shards", done, N)``), then the merge's.

The shard directories live in ``<IDX>.shards/`` beside the index, which every node must see
(a shared filesystem: NFS, Lustre, a cloud volume; one machine trivially). They are removed
once the merged index is published. Re-running the same command after the driver died
reuses every finished shard and resumes the unfinished ones.

Ray is optional: ``pip install "preqrag[ray]"``. Without ``--ray-address``, a new local Ray
instance is started for the call and stopped after it (``ray.init("local")``, even where a
cluster already runs on the machine); with one (``auto``,
``ray://host:10001`` or ``host:6379``), the running cluster is joined and left running. (The
address is its own option because Typer has no option with an optional value.)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.config import PipelineConfig

if TYPE_CHECKING:
    from .deadline import Deadline

RAY_HINT = 'Ray is needed for --ray: pip install "preqrag[ray]"'


def require_ray():
    """Import Ray, or raise ImportError with the install hint."""
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(RAY_HINT) from e
    return ray


@contextlib.contextmanager
def connected(address: str | None = None, **init_kwargs) -> Iterator[object]:
    """Ray connected for the ``with`` block: an already initialised Ray is reused as is; else
    ``ray.init(address)`` (``None``: a new local instance started now and shut down at the end,
    even when a cluster already runs on this machine; an address: that cluster, which is left
    running)."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    # "local": a new instance even when this machine already runs a Ray cluster (ray.init(None) would join it)
    ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, **init_kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def _build_shard_task(corpus: str, shard_dir: str, cfg: PipelineConfig, shard: int, n_shards: int) -> dict:
    """One shard, run by a Ray worker: the finished shard's manifest if it exists (a retry after
    the shard was published, or a resumed run), else :func:`preqrag.index.shards.build_shard`,
    which resumes from ``<shard>.partial`` when a killed attempt left one."""
    from ..index.shards import SHARD_MANIFEST, build_shard

    done = Path(shard_dir) / SHARD_MANIFEST
    if done.exists():
        return json.loads(done.read_text())
    return build_shard(corpus, shard_dir, cfg, shard, n_shards)


def shard_dirs(index_dir: Path, n_shards: int) -> list[Path]:
    """``<IDX>.shards/shard-00000-of-00008``, ...: where shard ``i`` of ``n_shards`` is built."""
    root = index_dir.with_name(index_dir.name + ".shards")
    return [root / f"shard-{i:05d}-of-{n_shards:05d}" for i in range(n_shards)]


def build_index_ray(corpus: str | Path, index_dir: str | Path, cfg: PipelineConfig, *,
                    address: str | None = None, n_shards: int | None = None, cpus_per_shard: float = 1.0,
                    gpus_per_shard: float | None = None, max_retries: int = 3, overwrite: bool = False,
                    progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Build an index as Ray tasks, one per shard, then merge (module docstring).

    Args:
        corpus: JSONL(.gz) / Parquet corpus, readable at the same path on every node.
        index_dir: the index to create; ``<index_dir>.shards/`` holds the shards meanwhile.
        cfg: configuration (chunking, BM25, embedder tables; shipped to every task).
        address: a running Ray cluster (``auto``, ``host:6379``, ``ray://host:10001``); None
            starts a local instance for this call.
        n_shards: number of shards; default the number of tasks the cluster can run at once
            (GPUs when it has any, else CPUs / ``cpus_per_shard``), at least 1.
        cpus_per_shard: CPUs each task asks for (default 1; Ray sets the task's thread count
            from it, so tasks on one node do not oversubscribe its cores).
        gpus_per_shard: GPUs each task asks for; default 1 when the cluster has GPUs, else 0.
        max_retries: Ray retries of a task whose worker died (default 3).
        overwrite: replace an existing index (only once the new one is complete).
        progress: optional callback ``(phase, done, total)``: ``"shards"`` then the merge's phases.

    Returns:
        The merged index's manifest, plus ``ray`` (shards, CPUs/GPUs per shard, seconds of the
        shard phase and of the merge, per-shard passages / seconds / peak RSS of the worker process).

    Raises:
        FileExistsError: ``index_dir`` exists and not ``overwrite``.
        ImportError: Ray is not installed (with the install hint).
        ValueError: a bad corpus line or unsupported format (named), raised before any task.
        ray.exceptions.RayTaskError: a shard failed for a reason retries cannot mend (its
            error names the shard); the finished shards stay for a re-run.
    """
    from ..index.embedded import corpus_files
    from ..index.shards import merge_shards

    corpus, index_dir = Path(corpus).resolve(), Path(index_dir).resolve()
    if index_dir.exists() and not overwrite:
        raise FileExistsError(f"{index_dir} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    corpus_files(corpus)  # an unsupported format is refused before the cluster starts
    with connected(address) as ray:
        resources = ray.cluster_resources()
        gpus = gpus_per_shard if gpus_per_shard is not None else (1.0 if resources.get("GPU", 0) > 0 else 0.0)
        slots = int(resources.get("GPU", 0) // gpus) if gpus else int(resources.get("CPU", 1) // cpus_per_shard)
        n = n_shards or max(1, slots)
        dirs = shard_dirs(index_dir, n)
        dirs[0].parent.mkdir(parents=True, exist_ok=True)
        task = ray.remote(_build_shard_task).options(num_cpus=cpus_per_shard, num_gpus=gpus,
                                                     max_retries=max_retries, retry_exceptions=False)
        t0 = time.perf_counter()
        refs = [task.remote(str(corpus), str(d), cfg, i, n) for i, d in enumerate(dirs)]
        pending, finished = list(refs), {}
        if progress:
            progress("shards", 0, n)
        while pending:
            (ref,), pending = ray.wait(pending, num_returns=1)
            finished[ref] = ray.get(ref)  # raises the shard's error now, with its traceback
            if progress:
                progress("shards", len(finished), n)
        manifests = [finished[r] for r in refs]
        shard_s = time.perf_counter() - t0
    t = time.perf_counter()
    manifest = merge_shards(dirs, index_dir, cfg, overwrite=overwrite, progress=progress)
    merge_s = time.perf_counter() - t
    shutil.rmtree(dirs[0].parent, ignore_errors=True)
    manifest["ray"] = {
        "shards": n, "cpus_per_shard": cpus_per_shard, "gpus_per_shard": gpus,
        "shard_phase_seconds": round(shard_s, 3), "merge_seconds": round(merge_s, 3),
        "per_shard": [{"shard": m["shard"][0], "passages": m["n_passages"], "seconds": m["seconds"].get("total"),
                       "peak_rss_mb": m.get("peak_rss_mb")} for m in manifests],
    }
    return manifest


# ---------------------------------------------------------------------- runs: preqrag run --ray
def actor_cpus(ray, workers: int) -> float:
    """CPUs for each of ``workers`` actors when none are given: an equal share of the cluster's
    CPUs (rounded down, at least 1), capped by the largest live node's CPUs so that an actor can
    be placed. On one 2-core machine: 1 actor → 2 CPUs, 2 actors → 1 each. Each actor's models
    then use that many threads (:func:`preqrag.models.threads.cpu_threads`)."""
    total = ray.cluster_resources().get("CPU", 1.0)
    largest = max((n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")), default=total)
    return float(max(1, min(int(largest), int(total // workers))))


class _PipelineActor:
    """One pipeline in a Ray actor process: the models load once, in ``__init__``; then
    :meth:`answer` takes batch after batch (Ray runs an actor's calls one at a time)."""

    def __init__(self, index_dir: str | None, cfg: PipelineConfig, deadline: Deadline | None):
        from .pipeline import Pipeline

        self.pipeline = Pipeline.from_config(index_dir, cfg)
        self.pipeline.warm_up()
        self.deadline = deadline
        self.runner = None

    def pid(self) -> int:
        import os

        return os.getpid()

    def threads(self) -> int:
        """Threads this actor's models use (:func:`preqrag.models.threads.cpu_threads`: Ray exports
        ``OMP_NUM_THREADS`` = the actor's CPUs, rounded down, at least 1)."""
        from ..models.threads import cpu_threads

        return cpu_threads()

    def answer(self, batch: list, remaining: int) -> tuple[list, dict]:
        """``(outcomes, info)`` for one batch; with a deadline, at the level this actor's own
        :class:`preqrag.run.deadline.DeadlineRunner` chooses for ``remaining`` questions (its share
        of what is left). ``info``: model seconds and calls of this batch, the deadline plan,
        extractive fallbacks, the actor's pid."""
        import os

        from ..core.timing import model_calls, model_seconds, model_usage_since

        ms0, mc0 = model_seconds(), model_calls()
        plan, fallbacks = None, 0
        if self.deadline is None:
            outcomes = self.pipeline.answer(batch)
        else:
            if self.runner is None:
                self.runner = self.deadline.runner(self.pipeline)
            outcomes, plan, fallbacks = self.runner.answer_counted(batch, remaining)
        seconds, calls = model_usage_since(ms0, mc0)
        info = {"model_seconds": seconds, "model_calls": calls, "plan": plan, "fallbacks": fallbacks, "pid": os.getpid()}
        return outcomes, info


class RayExecutor:
    """``preqrag run --ray --workers N``: N Ray actors, each owning one pipeline; the driver
    (:func:`preqrag.run.runner.run_questions`) hands out batches and alone writes answers, traces
    and failures, so the run keeps its guarantees:

    * each id is answered exactly once: a batch's outcomes are written once, from the one
      call that returned them;
    * an actor that dies mid-batch (``RayActorError``: a lost node, SIGKILL, OOM) loses only its
      in-flight batch, which goes back to the front of the queue for another actor; the run
      fails only when every actor is gone (the answers written so far stay, and the same
      command resumes);
    * the run resumes after a crash of the driver (answered ids are skipped, as in a local run);
    * ``--deadline``: every actor plans with the same absolute deadline, each for its share of
      the remaining questions (``ceil(left / live actors)``; :mod:`preqrag.run.deadline`).

    Use as a context manager: ``__enter__`` connects Ray (:func:`connected`) and starts the
    actors, waiting until every one has loaded its models, so that a configuration that cannot
    work fails before the first question; ``__exit__`` kills them.

    Args:
        index_dir: the index, at the same path on every node.
        cfg: the configuration (shipped to each actor).
        workers: number of actors.
        address: a running cluster, or None for a local Ray started for the run.
        cpus_per_worker: CPUs each actor asks for (default 1); None: :func:`actor_cpus`, an equal
            share of the cluster (what ``preqrag run --ray`` uses unless ``--cpus-per-worker``).
            Ray exports ``OMP_NUM_THREADS`` = ⌊CPUs⌋ to each actor and its models size their thread
            pools by it (:func:`preqrag.models.threads.cpu_threads`), so actors on one node do not
            oversubscribe its cores. ``gpus_per_worker`` likewise.
        deadline: the run's :class:`~preqrag.run.deadline.Deadline`, or None.

    Attributes:
        model_seconds, model_calls: summed over the actors' batches (for ``answers.run.json``).
        fallbacks, batches: with a deadline, the actors' extractive fallbacks and per-batch plans
            (each plan with the ``actor`` pid), as :class:`preqrag.run.deadline.DeadlineRunner` has them.
        lost_batches: batches given back to the queue because their actor died.
    """

    def __init__(self, index_dir: str | Path | None, cfg: PipelineConfig, workers: int, *,
                 address: str | None = None, cpus_per_worker: float | None = 1.0, gpus_per_worker: float = 0.0,
                 deadline: Deadline | None = None):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.index_dir = str(Path(index_dir).resolve()) if index_dir is not None else None
        self.cfg, self.workers, self.address = cfg, workers, address
        self.cpus, self.gpus, self.deadline = cpus_per_worker, gpus_per_worker, deadline
        self.model_seconds: dict[str, float] = {}
        self.model_calls: dict[str, int] = {}
        self.fallbacks = 0
        self.batches: list[dict] = []
        self.lost_batches = 0
        self.actors: list = []
        self.pids: dict = {}
        self._inflight: dict = {}
        self._ctx = None

    def __enter__(self) -> "RayExecutor":
        self._ctx = connected(self.address)
        ray = self._ctx.__enter__()
        self._ray = ray
        if self.cpus is None:
            self.cpus = actor_cpus(ray, self.workers)
        cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(_PipelineActor)
        self.actors = [cls.remote(self.index_dir, self.cfg, self.deadline) for _ in range(self.workers)]
        try:
            pids = ray.get([a.pid.remote() for a in self.actors])  # models loaded in every actor
            self.pids = {a._actor_id.hex(): pid for a, pid in zip(self.actors, pids)}
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for a in self.actors:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already dead
                pass
        self.actors = []
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None

    def busy_pids(self) -> list[int]:
        """Process ids of the actors answering a batch right now (for monitoring, and for the
        tests that kill one mid-batch)."""
        return [self.pids[a._actor_id.hex()] for a, _ in list(self._inflight.values())]

    def model_usage(self) -> tuple[dict[str, float], dict[str, int]]:
        """The actors' model seconds and calls, summed over their batches
        (:class:`preqrag.run.runner.Executor`): they ran in other processes."""
        return self.model_seconds, self.model_calls

    def answered_batches(self, batches: list[list]):
        """Yield ``(questions done so far, outcomes)`` per batch, in completion order."""
        import collections

        from ray.exceptions import RayActorError

        from .deadline import Deadline

        ray = self._ray
        todo = collections.deque(batches)
        idle = list(self.actors)
        live = len(idle)
        inflight = self._inflight = {}
        left = sum(len(b) for b in batches)
        done = 0
        while todo or inflight:
            while idle and todo:
                actor, batch = idle.pop(), todo.popleft()
                share = Deadline.share(left, live)
                inflight[actor.answer.remote(batch, share)] = (actor, batch)
            if not inflight:
                raise RuntimeError("every Ray actor of the run has died; the answers written so far are kept: "
                                   "run the same command again to resume")
            (ref,), _ = ray.wait(list(inflight), num_returns=1)
            actor, batch = inflight.pop(ref)
            try:
                outcomes, info = ray.get(ref)
            except RayActorError:
                live -= 1
                self.lost_batches += 1
                todo.appendleft(batch)  # another actor answers it; nothing was written for it
                continue
            idle.append(actor)
            for k, v in info["model_seconds"].items():
                self.model_seconds[k] = self.model_seconds.get(k, 0.0) + v
            for k, v in info["model_calls"].items():
                self.model_calls[k] = self.model_calls.get(k, 0) + v
            if info["plan"] is not None:
                self.batches.append({**info["plan"], "actor": info["pid"]})
            self.fallbacks += info["fallbacks"]
            left -= len(batch)
            done += len(batch)
            yield done, outcomes
