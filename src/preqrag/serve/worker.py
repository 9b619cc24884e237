"""The one thread that owns the pipelines of a ``preqrag serve`` process.

A :class:`~preqrag.run.pipeline.Pipeline` is not thread-safe (llama.cpp contexts, tokenizers,
SQLite caches), and on a 2-core machine two threads running model inference would only
compete for the cores. So one worker thread builds every pipeline (loading every model),
then drains a bounded queue of jobs in **micro-batches**: the jobs waiting for the same
pipeline and operation are taken together (up to the pipeline's ``run.batch_size``) and
answered through the same batched stage calls as ``preqrag run`` (one BM25 call, one
query-encoding call, one cross-encoder call, one round of LLM calls per micro-batch).
Concurrent HTTP requests thus share stage calls instead of queueing one by one.

The HTTP side (any thread, or an event loop) calls :meth:`PipelineWorker.submit`, which
enqueues one job per question and returns one :class:`concurrent.futures.Future` per
job, or raises :class:`QueueFull` (the caller answers 429) or :class:`NotReady` (503).
A job whose future was cancelled before the worker takes it (its request timed out, or
its client disconnected) is dropped unprocessed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from ..run.pipeline import Outcome, Pipeline
from ..core.records import Question

log = logging.getLogger("preqrag.serve")

Op = Literal["answer", "retrieve"]
"""``answer``: every stage (``Pipeline.answer``); ``retrieve``: all but generation
(``Pipeline.prepare``)."""


class NotReady(Exception):
    """The worker is still loading models, failed to load them, or is stopped."""


class QueueFull(Exception):
    """The queue has no room for the submitted jobs.

    Attributes:
        retry_after: whole seconds after which a retry may find room (>= 1), estimated
            from the queue length and the mean micro-batch time so far.
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Served:
    """What a job's future resolves to.

    Attributes:
        outcome: the pipeline's Outcome (answer + trace, or failure).
        doc_ids: passage id → document id, for every passage named in the trace (so a
            client can mark gold documents without access to the index).
        context: for ``retrieve``: the passages that would be given to the generator,
            as LiveRAG passages ``{"passage", "doc_IDs"}``; empty for ``answer``.
        batch_size: questions in the micro-batch this job was processed in (>1 means it
            shared stage calls with other requests).
        queued_s: seconds between enqueueing and the worker taking the micro-batch.
        run_s: seconds the micro-batch took.
    """

    outcome: Outcome
    doc_ids: dict[str, str] = field(default_factory=dict)
    context: list[dict[str, Any]] = field(default_factory=list)
    batch_size: int = 1
    queued_s: float = 0.0
    run_s: float = 0.0


@dataclass
class _Job:
    pipeline: str
    op: Op
    question: Question
    future: Future
    enqueued: float


class PipelineWorker:
    """Owns one Pipeline per name and answers queued questions in micro-batches.

    Args:
        factories: pipeline name → a callable building that pipeline with every model
            loaded (e.g. ``preqrag.cli.common.open_pipeline``, which also warms up). Called on the
            worker thread, in order, by :meth:`start`; the pipelines share nothing.
        max_queue: most jobs (questions) waiting, not counting the micro-batch being
            processed. Default 64: about a minute of work for the bundled models on 2
            cores; beyond that a client is better told to come back (429) than kept waiting.
        batch_size: most questions per micro-batch; ``None`` = each pipeline's
            ``run.batch_size`` (the setting ``preqrag run`` uses).
        linger_s: when the worker is idle and a job arrives, wait this long for others to
            join its micro-batch. Default 5 ms: negligible next to a stage call, enough for
            requests sent together to be batched together.
        on_failure: called (on the worker thread) when loading fails, e.g. to stop the server.
    """

    def __init__(self, factories: Mapping[str, Callable[[], Pipeline]], *, max_queue: int = 64,
                 batch_size: int | None = None, linger_s: float = 0.005,
                 on_failure: Callable[[str], None] | None = None):
        if not factories:
            raise ValueError("at least one pipeline is needed")
        if max_queue < 1:
            raise ValueError("max_queue must be >= 1")
        self.factories = dict(factories)
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.on_failure = on_failure
        self.pipelines: dict[str, Pipeline] = {}
        self.state: Literal["created", "loading", "ready", "failed", "stopped"] = "created"
        self.error: str | None = None
        self.load_seconds: float | None = None
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._counts = {"submitted": 0, "rejected": 0, "answered": 0, "failed": 0, "cancelled": 0,
                        "batches": 0}
        self._batch_seconds = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the worker thread: it loads every pipeline, then serves. Returns at once."""
        with self._cond:
            if self._thread is not None:
                return
            self.state = "loading"
            self._thread = threading.Thread(target=self._main, name="preqrag-serve-worker", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop taking jobs; every job still queued fails with :class:`NotReady`. The micro-batch
        in progress (if any) is finished first, for up to ``timeout`` seconds."""
        with self._cond:
            if self.state != "failed":
                self.state = "stopped"
            pending = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for job in pending:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(NotReady("the server is shutting down"))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def ready(self) -> bool:
        """True once every pipeline is built and warmed up, until :meth:`stop`."""
        return self.state == "ready"

    def stats(self) -> dict[str, Any]:
        """Counters since start: jobs submitted, rejected (queue full), answered, failed,
        cancelled (dropped before processing), micro-batches and their mean size and seconds;
        plus the current queue length."""
        with self._cond:
            c = dict(self._counts)
            queued = len(self._queue)
        done = c["answered"] + c["failed"]
        return {**c, "queued": queued, "max_queue": self.max_queue,
                "mean_batch_size": round(done / c["batches"], 3) if c["batches"] else None,
                "mean_batch_seconds": round(self._batch_seconds / c["batches"], 4) if c["batches"] else None}

    # ------------------------------------------------------------------ submission
    def submit(self, pipeline: str, op: Op, questions: list[Question]) -> list[Future]:
        """Enqueue one job per question (all or none).

        Returns:
            One Future per question, resolving to a :class:`Served`, or raising
            :class:`NotReady` when the server stops first, or the exception a pipeline
            raised (it normally turns failures into ``Outcome.failure`` instead).

        Raises:
            KeyError: unknown pipeline name.
            NotReady: models still loading, loading failed, or stopped.
            QueueFull: fewer than ``len(questions)`` free places in the queue.
        """
        if pipeline not in self.factories:
            raise KeyError(pipeline)
        now = time.monotonic()
        jobs = [_Job(pipeline, op, q, Future(), now) for q in questions]
        with self._cond:
            if self.state != "ready":
                raise NotReady(self._not_ready_message())
            if len(self._queue) + len(jobs) > self.max_queue:
                self._counts["rejected"] += len(jobs)
                raise QueueFull(f"the queue is full ({len(self._queue)} of {self.max_queue} places taken)",
                                self._retry_after(len(self._queue)))
            self._queue.extend(jobs)
            self._counts["submitted"] += len(jobs)
            self._cond.notify_all()
        return [j.future for j in jobs]

    def discard(self, futures: list[Future]) -> int:
        """Cancel the jobs of ``futures`` that are still queued and free their places at once
        (their request timed out or its client went away). Jobs already being processed
        finish; their results are dropped. Returns the number of jobs removed."""
        wanted = {id(f) for f in futures}
        with self._cond:
            gone = [j for j in self._queue if id(j.future) in wanted]
            if gone:
                keep = [j for j in self._queue if id(j.future) not in wanted]
                self._queue.clear()
                self._queue.extend(keep)
                self._counts["cancelled"] += len(gone)
        for j in gone:
            j.future.cancel()
        return len(gone)

    def _not_ready_message(self) -> str:
        if self.state == "failed":
            return f"loading the pipelines failed: {self.error}"
        if self.state == "stopped":
            return "the server is shutting down"
        return "models are still loading"

    def _retry_after(self, queued: int) -> int:
        bs = self.batch_size or min(p.cfg.run.batch_size for p in self.pipelines.values())
        mean = self._batch_seconds / self._counts["batches"] if self._counts["batches"] else 1.0
        return max(1, math.ceil((queued / max(1, bs) + 1) * mean))

    # ------------------------------------------------------------------ worker thread
    def _main(self) -> None:
        t0 = time.perf_counter()
        try:
            for name, factory in self.factories.items():
                log.info("loading pipeline %r", name)
                self.pipelines[name] = factory()
        except BaseException as e:  # noqa: BLE001 - typer.Exit, SystemExit, anything: report it
            msg = str(e) or type(e).__name__
            if type(e).__name__ == "Exit":  # typer.Exit from preqrag.cli.common.open_pipeline: the message is logged
                msg = f"pipeline {name!r} could not be built (exit code {getattr(e, 'exit_code', '?')}); see the log"
            self.error = msg
            log.error("loading failed: %s\n%s", msg, traceback.format_exc())
            with self._cond:
                self.state = "failed"
            if self.on_failure is not None:
                self.on_failure(msg)
            return
        self.load_seconds = time.perf_counter() - t0
        with self._cond:
            if self.state == "loading":
                self.state = "ready"
        log.info("ready: %d pipeline(s) loaded in %.1fs", len(self.pipelines), self.load_seconds)
        while True:
            batch = self._take()
            if batch is None:
                return
            self._process(batch)

    def _take(self) -> list[_Job] | None:
        """Wait for jobs; return the micro-batch of the oldest job: the queued jobs with its
        pipeline and operation, oldest first, at most the batch size. ``None`` once stopped."""
        with self._cond:
            while not self._queue and self.state == "ready":
                self._cond.wait()
            if self.state != "ready":
                return None
            if self.linger_s > 0 and len(self._queue) < self._limit(self._queue[0].pipeline):
                self._cond.wait(self.linger_s)  # let requests sent together join
                if self.state != "ready" or not self._queue:
                    return None if self.state != "ready" else []
            head = self._queue[0]
            limit = self._limit(head.pipeline)
            batch = [j for j in self._queue if j.pipeline == head.pipeline and j.op == head.op][:limit]
            taken = {id(j) for j in batch}
            rest = [j for j in self._queue if id(j) not in taken]
            self._queue.clear()
            self._queue.extend(rest)
            return batch

    def _limit(self, pipeline: str) -> int:
        return self.batch_size or self.pipelines[pipeline].cfg.run.batch_size

    def _process(self, batch: list[_Job]) -> None:
        live = [j for j in batch if j.future.set_running_or_notify_cancel()]
        with self._cond:
            self._counts["cancelled"] += len(batch) - len(live)
        if not live:
            return
        pipe = self.pipelines[live[0].pipeline]
        op = live[0].op
        started = time.monotonic()
        t0 = time.perf_counter()
        try:
            questions = [j.question for j in live]
            outcomes = pipe.answer(questions) if op == "answer" else pipe.prepare(questions)
            served = [self._served(pipe, op, o) for o in outcomes]
        except Exception as e:  # Pipeline isolates failures; this is a last resort
            log.exception("micro-batch failed")
            for j in live:
                j.future.set_exception(e)
            with self._cond:
                self._counts["failed"] += len(live)
                self._counts["batches"] += 1
                self._batch_seconds += time.perf_counter() - t0
            return
        run_s = time.perf_counter() - t0
        n_failed = 0
        for j, s in zip(live, served):
            s.batch_size, s.queued_s, s.run_s = len(live), round(started - j.enqueued, 4), round(run_s, 4)
            n_failed += s.outcome.failure is not None
            j.future.set_result(s)
        with self._cond:
            self._counts["answered"] += len(live) - n_failed
            self._counts["failed"] += n_failed
            self._counts["batches"] += 1
            self._batch_seconds += run_s

    @staticmethod
    def _served(pipe: Pipeline, op: Op, outcome: Outcome) -> Served:
        """Everything the HTTP side needs from the index, read here on the owning thread."""
        passages = pipe.index.passages
        doc_ids: dict[str, str] = {}
        context: list[dict[str, Any]] = []
        trace = outcome.trace
        if trace is not None:
            pids = set(trace.context_ids)
            for rankings in trace.rankings.values():
                for r in rankings:
                    pids.update(r.ids)
            doc_ids = {pid: passages[pid].doc_id for pid in sorted(pids) if pid in passages}
            if op == "retrieve":
                context = [{"passage": passages[pid].text, "doc_IDs": [passages[pid].doc_id]}
                           for pid in trace.context_ids if pid in passages]
        return Served(outcome, doc_ids=doc_ids, context=context)
