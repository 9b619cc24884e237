"""Finish a question file by a deadline: ``preqrag run --deadline 2h|30m|600s|2026-11-22T10:00:00Z``.

On LiveRAG's live day each team had 2 hours for 500 unseen questions (14.4 s each) behind a
rate-limited LLM API. A run with a deadline answers every question of the file before it
(unless the input line itself is bad) by trading answer quality for time, batch by batch:

* **Levels** (``[deadline] levels``, :data:`preqrag.core.config.DEADLINE_LEVELS`), cumulative:
  0 ``full`` (the configured pipeline) → ``no-rewrite`` (the raw question, no LLM before
  generation) → ``shallow-rerank`` (``[deadline] rerank_depth``) → ``short-context``
  (``[deadline] context_top_k`` passages, ``max_new_tokens``) → ``extractive`` (no LLM call:
  the top passage's sentences that share the most content words with the question). Each
  level is a :meth:`preqrag.run.pipeline.Pipeline.derive` of the configured pipeline: the loaded
  models are shared, nothing is loaded twice.
* **Plan** (:class:`DeadlineController`): before each batch, the least degraded level whose
  estimated time for *all* remaining questions fits ``safety`` × the time left. The estimate
  of a level is its measured pace (seconds per question, per stage, an exponentially
  weighted moving average over its batches, ``pace_smoothing``); a level not yet measured is
  estimated from the nearest measured less degraded level's stage times with the level's
  steps applied (no rewrite time, rerank time × depth ratio, generation time × token ratio,
  no generation). Going back to a less degraded level needs its estimate to fit
  ``recover_margin`` × the plan (hysteresis), so levels recover when the run catches up
  without flapping.
* **Calibration**: the first batch that would use the LLM is first answered extractively, which
  measures the extractive pace (the level that must stay possible for every remaining
  question); those answers are the batch's fallback, and the batch is then planned again.
* **Hard cut-off**: a batch must end by ``deadline − reserve_s − extractive pace × questions
  left`` (time to answer all the rest, this batch included, without an LLM). Its LLM work
  runs in a worker thread that the run stops waiting for at the cut-off (the OpenAI
  backend's requests get the cut-off as their own deadline, so they end there too); the
  batch is then answered extractively from what it retrieved (or from a fresh retrieval at
  the extractive level when retrieval itself had not finished). A question whose LLM call
  failed is answered extractively as well. Each such answer records a ``deadline:`` entry in
  ``Trace.fallbacks``.

``Trace.degradation_level`` records the level of every answer; ``answers.run.json`` counts
the questions per level under ``degradation_levels`` and records the deadline under
``deadline``. The absolute deadline is kept in ``answers.deadline.json`` (written
atomically), so a restarted run keeps it (:func:`resolve_deadline`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..core.config import DEADLINE_LEVELS, DeadlineConfig, PipelineConfig
from ..components.answering import ExtractiveGenerator
from ..core.io import atomic_write_text, stats_path
from .pipeline import Outcome, Pipeline
from ..core.records import Question

# ------------------------------------------------------------------------------ the deadline itself

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s)")


def parse_deadline(spec: str, now: datetime) -> datetime:
    """The absolute deadline (UTC) that ``spec`` names.

    Args:
        spec: a duration from ``now`` — ``2h``, ``30m``, ``600s``, ``1h30m``, ``90`` (seconds)
            — or an ISO 8601 timestamp with a time zone, ``2026-11-22T10:00:00Z`` or
            ``2026-11-22T12:00:00+02:00``.
        now: the current time (timezone-aware).

    Returns:
        A timezone-aware UTC datetime (it may lie in the past; the run then answers everything
        extractively).

    Raises:
        ValueError: neither a duration nor a timestamp with a time zone; a zero duration.
    """
    text = spec.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        text += "s"
    if text and re.fullmatch(r"(?:\d+(?:\.\d+)?\s*[hms]\s*)+", text):
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in _DURATION.findall(text))
        if seconds <= 0:
            raise ValueError(f"deadline {spec!r}: the duration must be positive")
        return (now + timedelta(seconds=seconds)).astimezone(timezone.utc)
    try:
        at = datetime.fromisoformat(spec.strip())
    except ValueError:
        raise ValueError(f"deadline {spec!r}: expected a duration (2h, 30m, 600s, 1h30m) or an ISO 8601 "
                         f"timestamp with a time zone (2026-11-22T10:00:00Z)") from None
    if at.tzinfo is None:
        raise ValueError(f"deadline {spec!r}: the timestamp needs a time zone (add Z for UTC or +HH:MM)")
    return at.astimezone(timezone.utc)


def deadline_path(output: str | Path) -> Path:
    """``answers.jsonl`` → ``answers.deadline.json``: the absolute deadline of a run with one."""
    return stats_path(output).with_name(stats_path(output).name[:-len(".run.json")] + ".deadline.json")


@dataclass(frozen=True)
class Deadline:
    """An absolute deadline: ``at`` (UTC), the ``spec`` it came from and when it was set.

    The one object a run with ``--deadline`` passes around: :func:`resolve_deadline` makes it (the
    CLI), :meth:`runner` answers the batches to it (:func:`preqrag.run.runner.run_questions`, each
    Ray actor of :class:`preqrag.run.distributed.RayExecutor`) and :meth:`summary` is its record in
    ``answers.run.json``.
    """

    at: datetime
    spec: str
    set_at: datetime

    def to_dict(self) -> dict:
        return {"deadline": self.at.isoformat(timespec="seconds"), "spec": self.spec,
                "set_at": self.set_at.isoformat(timespec="seconds")}

    @classmethod
    def from_dict(cls, d: dict) -> "Deadline":
        return cls(datetime.fromisoformat(d["deadline"]), str(d["spec"]), datetime.fromisoformat(d["set_at"]))

    @property
    def timestamp(self) -> float:
        """``at`` in seconds since the epoch (the scale of ``time.time``)."""
        return self.at.timestamp()

    def passed(self) -> bool:
        """Whether the deadline is now or past (every remaining question is then answered
        extractively)."""
        return self.at <= datetime.now(timezone.utc)

    def passed_note(self) -> str:
        """What a run started after the deadline says (the CLI prints it): the deadline and that
        every remaining question is answered extractively."""
        return (f"the deadline {self.at.isoformat(timespec='seconds')} has passed: "
                "every remaining question is answered extractively (no LLM)")

    @staticmethod
    def share(left: int, live: int) -> int:
        """The questions one of ``live`` workers plans for when ``left`` remain (``ceil(left / live)``;
        at least one worker is assumed): each Ray actor's :class:`DeadlineRunner` chooses its level
        for its share of what is left, not for the whole run."""
        return -(-left // max(1, live))

    def runner(self, pipeline: Pipeline) -> "DeadlineRunner":
        """A :class:`DeadlineRunner` answering with ``pipeline``'s levels to this deadline."""
        return DeadlineRunner(pipeline, self.timestamp)

    def summary(self, cfg: PipelineConfig, last_write: float | None, fallbacks: int, batches: list[dict]) -> dict:
        """The record of a run to this deadline (``answers.run.json``'s ``deadline``): :meth:`to_dict`,
        ``level_names`` (``cfg.deadline.levels``), ``finished_before_deadline`` (its last answer,
        written at ``last_write``, epoch seconds, was in time; true when it wrote none),
        ``seconds_left`` (now), ``fallbacks`` and ``batches`` (:attr:`DeadlineRunner.batches`)."""
        return {**self.to_dict(), "level_names": list(cfg.deadline.levels),
                "finished_before_deadline": last_write is None or last_write <= self.timestamp,
                "seconds_left": round(self.timestamp - time.time(), 3),
                "fallbacks": fallbacks, "batches": batches}


def summary_line(record: dict, levels: dict[str, int]) -> str:
    """One line on a run's deadline (its :meth:`Deadline.summary` ``record``) for the console: met
    or missed, the seconds left (or past it), questions per level (``levels``: level → count),
    extractive fallbacks."""
    per_level = ", ".join(f"{name} {levels.get(str(i), 0)}" for i, name in enumerate(record["level_names"]))
    left = (f"{record['seconds_left']:.0f} s left" if record["seconds_left"] >= 0
            else f"passed {-record['seconds_left']:.0f} s ago")
    return (f"deadline {record['deadline']}: {'met' if record['finished_before_deadline'] else 'MISSED'} "
            f"({left}); questions per level: {per_level}; {record['fallbacks']} extractive after an LLM "
            "timeout or failure")


NO_DEADLINE = ("none", "off")
"""``--deadline none`` (or ``off``) drops a deadline a previous run set on the same output."""


def resolve_deadline(output: str | Path, spec: str | None, now: datetime | None = None
                     ) -> tuple[Deadline | None, str | None]:
    """The deadline of a run writing ``output``, and a line saying what was decided.

    * no ``spec`` and no ``answers.deadline.json``: no deadline;
    * no ``spec`` (or the same ``spec`` as recorded) and a recorded deadline: the recorded one
      (a restarted run keeps the original deadline);
    * another ``spec``: it overrides the recorded deadline (the message says so) and is
      recorded;
    * ``spec`` ``none``/``off``: no deadline, the record is removed.

    The record is written atomically (:func:`preqrag.core.io.atomic_write_text`).

    Raises:
        ValueError: a ``spec`` that :func:`parse_deadline` rejects, or an unreadable record
            (naming the file).
    """
    now = now or datetime.now(timezone.utc)
    path = deadline_path(output)
    recorded: Deadline | None = None
    if path.exists():
        try:
            recorded = Deadline.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a deadline record ({e}); delete it or pass --deadline") from e
    if spec is not None and spec.strip().lower() in NO_DEADLINE:
        if recorded is not None:
            path.unlink()
            return None, f"deadline {recorded.at.isoformat(timespec='seconds')} of {path} dropped (--deadline {spec})"
        return None, None
    if recorded is not None and (spec is None or spec.strip() == recorded.spec):
        return recorded, (f"keeping the deadline {recorded.at.isoformat(timespec='seconds')} set at "
                          f"{recorded.set_at.isoformat(timespec='seconds')} ({path})")
    if spec is None:
        return None, None
    new = Deadline(parse_deadline(spec, now), spec.strip(), now.astimezone(timezone.utc))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(new.to_dict(), indent=2) + "\n")
    if recorded is not None:
        return new, (f"--deadline {spec} overrides the earlier deadline "
                     f"{recorded.at.isoformat(timespec='seconds')} (--deadline {recorded.spec}); "
                     f"new deadline {new.at.isoformat(timespec='seconds')}")
    return new, f"deadline {new.at.isoformat(timespec='seconds')} (recorded in {path})"


# ------------------------------------------------------------------------------ levels

def level_overrides(cfg: PipelineConfig, level: int) -> dict:
    """The settings of degradation ``level`` (an index in ``cfg.deadline.levels``) over ``cfg``:
    every step of levels 1..``level`` applied (``extractive``: the registered ``extractive``
    generator, :class:`preqrag.components.answering.ExtractiveGenerator`, over the top passage)."""
    d = cfg.deadline
    steps = set(d.levels[1:level + 1])
    out: dict[str, dict] = {}
    if steps & {"no-rewrite", "extractive"}:
        out["rewriter"] = {"name": "none"}
        if cfg.classifier.name in ("llm", "combined"):  # no LLM before generation
            out["classifier"] = {"name": "rules"}
    if "shallow-rerank" in steps:
        out["cross_encoder"] = {"depth": min(cfg.cross_encoder.depth, d.rerank_depth)}
    if "short-context" in steps:
        out["generator"] = {"context_top_k": min(cfg.generator.context_top_k, d.context_top_k),
                            "max_new_tokens": min(cfg.generator.max_new_tokens, d.max_new_tokens)}
    if "extractive" in steps:
        out.setdefault("generator", {}).update(name="extractive", context_top_k=1)
    return out


def level_pipelines(pipeline: Pipeline) -> list[Pipeline]:
    """One pipeline per ``[deadline] levels`` entry, sharing ``pipeline``'s loaded models
    (level 0 is ``pipeline`` itself; the last is extractive)."""
    cfg = pipeline.cfg
    out = [pipeline]
    for level in range(1, len(cfg.deadline.levels)):
        out.append(pipeline.derive(level_overrides(cfg, level)))
    return out


# ------------------------------------------------------------------------------ planning


def _scale(profile: dict[str, float], step: str, cfg: PipelineConfig) -> dict[str, float]:
    """``profile`` (stage → seconds per question) after one more degradation ``step``."""
    p = dict(profile)
    d = cfg.deadline
    if step in ("no-rewrite", "extractive"):
        p.pop("rewrite", None)
    if step == "shallow-rerank" and "rerank" in p:
        p["rerank"] *= min(1.0, d.rerank_depth / cfg.cross_encoder.depth)
    if step == "short-context" and "generate" in p:
        p["generate"] *= min(1.0, d.max_new_tokens / cfg.generator.max_new_tokens)
    if step == "extractive":
        p.pop("generate", None)
    return p


@dataclass
class DeadlineController:
    """Chooses the degradation level of each batch from the measured pace.

    Args:
        deadline: the deadline, seconds since the epoch (``clock``'s scale).
        cfg: the pipeline configuration (its ``deadline`` table, and the base settings the
            level steps scale from).
        clock: seconds since the epoch (``time.time``; tests pass a fake clock).

    Use: :meth:`choose` before a batch, :meth:`cutoff` for the time it must end by, then
    :meth:`record` with what the batch measured.
    """

    deadline: float
    cfg: PipelineConfig
    clock: Callable[[], float] = time.time
    level: int = 0
    profiles: dict[int, dict[str, float]] = field(default_factory=dict)
    """Level → stage → seconds per question (EWMA over the level's batches)."""

    @property
    def last(self) -> int:
        """The extractive level's index."""
        return len(self.cfg.deadline.levels) - 1

    def time_left(self) -> float:
        """Seconds until the deadline less ``reserve_s`` (negative once past)."""
        return self.deadline - self.clock() - self.cfg.deadline.reserve_s

    def estimate(self, level: int) -> float | None:
        """Estimated seconds per question at ``level``, or None when nothing is known.

        Measured: its pace. Otherwise the nearest measured less degraded level's stage times
        with the steps in between applied; otherwise the nearest measured more degraded level's
        pace (a lower bound); the extractive level falls back to ``extractive_prior_s`` and, until
        measured, is never estimated below it.
        """
        levels = self.cfg.deadline.levels
        est: float | None = None
        if level in self.profiles:
            return sum(self.profiles[level].values())
        below = [lv for lv in self.profiles if lv < level]
        above = [lv for lv in self.profiles if lv > level]
        if below:
            src = max(below)
            p = self.profiles[src]
            for step in levels[src + 1:level + 1]:
                p = _scale(p, step, self.cfg)
            est = sum(p.values())
        elif above:
            est = sum(self.profiles[min(above)].values())
        if level == self.last:
            est = max(est or 0.0, self.cfg.deadline.extractive_prior_s)
        return est

    def choose(self, remaining: int) -> int:
        """The level for the next batch, with ``remaining`` questions left (this batch included).

        The extractive level when the time left cannot cover more than answering every remaining
        question extractively; else the least degraded level whose estimate × ``remaining`` fits
        ``safety`` × time left (``recover_margin`` × that for a level less degraded than the
        current one); an unmeasured level with no estimate at all is tried (the cut-off bounds
        it). Sets and returns :attr:`level`.
        """
        d = self.cfg.deadline
        left = self.time_left()
        extractive = self.estimate(self.last) or 0.0
        chosen = self.last
        if left - extractive * remaining > 0:
            budget = d.safety * left
            for lv in range(self.last):
                est = self.estimate(lv)
                if est is None:
                    chosen = lv
                    break
                need = est * remaining / (d.recover_margin if lv < self.level else 1.0)
                if need <= budget:
                    chosen = lv
                    break
        self.level = chosen
        return chosen

    def cutoff(self, remaining: int) -> float:
        """When the next batch must be done (clock seconds): the deadline less ``reserve_s``
        less the extractive estimate × ``remaining`` (this batch included), so that whatever the
        LLM does, every remaining question can still be answered extractively in time."""
        return self.deadline - self.cfg.deadline.reserve_s - (self.estimate(self.last) or 0.0) * remaining

    def record(self, level: int, profile: dict[str, float]) -> None:
        """Fold one batch's measurement (stage → seconds per question) into ``level``'s pace."""
        a = self.cfg.deadline.pace_smoothing
        old = self.profiles.get(level)
        if old is None:
            self.profiles[level] = dict(profile)
            return
        self.profiles[level] = {k: a * profile.get(k, 0.0) + (1 - a) * old.get(k, 0.0)
                                for k in old.keys() | profile.keys()}


# ------------------------------------------------------------------------------ running batches


def _stage_profile(outcomes: list[Outcome], wall: float, n: int) -> dict[str, float]:
    """Stage → seconds per question of a batch (from the traces), plus ``other``: the batch's
    wall seconds per question not in any stage."""
    traces = [o.trace for o in outcomes if o.trace is not None]
    if not traces or n == 0:
        return {"other": wall / max(n, 1)}
    stages = {s for t in traces for s in t.seconds}
    prof = {s: sum(t.seconds.get(s, 0.0) for t in traces) / len(traces) for s in stages}
    prof["other"] = max(0.0, wall / n - sum(prof.values()))
    return prof


class DeadlineRunner:
    """Answers batches under a :class:`DeadlineController` (see the module docstring).

    Args:
        pipeline: the configured pipeline (level 0); the other levels are derived from it.
        deadline: epoch seconds.
        clock: epoch seconds (``time.time``).

    Attributes:
        fallbacks: questions answered extractively after their LLM work timed out or failed.
        batches: what was planned and measured per batch (see ``__init__``).
    """

    def __init__(self, pipeline: Pipeline, deadline: float, clock: Callable[[], float] = time.time):
        self.pipelines = level_pipelines(pipeline)
        self.cfg = pipeline.cfg
        self.controller = DeadlineController(deadline, pipeline.cfg, clock)
        self.clock = clock
        self.fallbacks = 0
        self.batches: list[dict] = []
        """Per batch: ``questions``, ``remaining``, ``level``, ``seconds_left`` and ``cutoff_in`` at its
        start, the level ``estimates`` (s/question), ``seconds`` taken, ``fallback`` (None, or the
        step, ``prepare`` / ``generate``, that the cut-off stopped)."""

    @property
    def extractive(self) -> Pipeline:
        return self.pipelines[-1]

    def model_usage(self) -> None:
        """The models ran in this process: None (the runner reads its counters;
        :class:`preqrag.run.runner.Executor`)."""
        return None

    def answered_batches(self, batches: list[list[Question]]) -> Iterator[tuple[int, list[Outcome]]]:
        """Yield ``(questions done so far, outcomes)`` per batch, in order, each batch at the
        level chosen for it (:meth:`answer`; no overlap of batches: the level of a batch depends
        on the pace of the one before). The executor of :func:`preqrag.run.runner.run_questions`."""
        left = sum(len(b) for b in batches)
        done = 0
        for b in batches:
            outcomes = self.answer(b, left)
            left -= len(b)
            done += len(b)
            yield done, outcomes

    def answer_counted(self, batch: list[Question], remaining: int) -> tuple[list[Outcome], dict, int]:
        """:meth:`answer`, plus what a Ray actor reports of the batch to the driver: its plan (the
        entry of :attr:`batches`) and its number of extractive fallbacks."""
        before = self.fallbacks
        outcomes = self.answer(batch, remaining)
        return outcomes, self.batches[-1], self.fallbacks - before

    def answer(self, batch: list[Question], remaining: int) -> list[Outcome]:
        """Answer ``batch`` (``remaining`` questions left, this batch included) by the cut-off.

        Returns one Outcome per question, in order; ``Trace.degradation_level`` set. Programming
        errors raised in the worker thread are re-raised here.
        """
        ctl = self.controller
        t0 = self.clock()
        level = ctl.choose(remaining)
        cutoff = ctl.cutoff(remaining)
        log = {"questions": len(batch), "remaining": remaining, "level": level,
               "seconds_left": round(ctl.deadline - t0, 3), "cutoff_in": round(cutoff - t0, 3),
               "estimates": {str(lv): None if (e := ctl.estimate(lv)) is None else round(e, 4)
                             for lv in range(ctl.last + 1)}}
        self.batches.append(log)
        try:
            return self._answer(batch, level, cutoff, t0, log)
        finally:
            log["seconds"] = round(self.clock() - t0, 3)

    def _answer(self, batch: list[Question], level: int, cutoff: float, t0: float, log: dict) -> list[Outcome]:
        ctl = self.controller
        ready: list[Outcome] | None = None  # extractive answers computed up front (first batch)
        if level != ctl.last and cutoff > t0 and ctl.last not in ctl.profiles:
            # The extractive level is what must stay possible for every remaining question: measure
            # it on this batch first (its answers are this batch's fallback), then plan with it.
            ready = self.extractive.answer(batch)
            t1 = self.clock()
            ctl.record(ctl.last, _stage_profile(ready, t1 - t0, len(batch)))
            log["calibration_seconds"] = round(t1 - t0, 3)
            t0 = t1
            level = log["level"] = ctl.choose(remaining=log["remaining"])
            cutoff = ctl.cutoff(log["remaining"])
            log["cutoff_in"] = round(cutoff - t0, 3)
        if level == ctl.last or cutoff <= t0:
            level = ctl.level = log["level"] = ctl.last
            if ready is not None:
                return self._mark(ready, level)
            outcomes = self.extractive.answer(batch)
            ctl.record(level, _stage_profile(outcomes, self.clock() - t0, len(batch)))
            return self._mark(outcomes, level)

        pipe = self.pipelines[level]
        box: dict = {}

        def work() -> None:
            # LLM calls of this batch end at the cut-off, also after the runner stopped waiting
            if pipe.llm is not None:
                pipe.llm.set_call_deadline(cutoff)  # LLM.set_call_deadline: this thread's calls
            try:
                prepared = pipe.prepare(batch)
                box["prepared"], box["prepared_at"] = prepared, self.clock()
                if not box.get("abandoned"):  # past the cut-off nobody waits for the answers
                    box["generated"] = pipe.generate(prepared)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = e

        worker = threading.Thread(target=work, name="preqrag-deadline-batch", daemon=True)
        worker.start()
        worker.join(timeout=max(0.0, cutoff - self.clock()))
        box["abandoned"] = worker.is_alive()
        if "error" in box:
            raise box["error"]
        now = self.clock()
        log["fallback"] = None if "generated" in box else ("generate" if "prepared" in box else "prepare")
        if "generated" in box:
            outcomes = self._mark(box["generated"], level)
            ctl.record(level, _stage_profile(outcomes, now - t0, len(batch)))
            return self._fallback_failed(outcomes)
        # the cut-off passed: stop waiting (the worker's result, if any, is dropped)
        if "prepared" in box:
            prepared = [Outcome(o.question, trace=o.trace.model_copy(deep=True), failure=o.failure)
                        if o.trace is not None else o for o in box["prepared"]]
            prof = _stage_profile(prepared, box["prepared_at"] - t0, len(batch))
            prof["generate"] = (now - box["prepared_at"]) / len(batch)  # at least this slow
            prof["other"] = 0.0
            ctl.record(level, prof)
            why = f"deadline: generation at level {level} stopped at the cut-off; extractive answer"
            return self._extract(prepared, why)
        # retrieval itself did not finish: at least this slow, most likely waiting on the LLM
        ctl.record(level, {"rewrite" if pipe.cfg.rewriter.name != "none" else "prepare": (now - t0) / len(batch)})
        if ready is None:
            t1 = self.clock()
            ready = self.extractive.answer(batch)
            ctl.record(ctl.last, _stage_profile(ready, self.clock() - t1, len(batch)))
        for o in ready:
            if o.trace is not None:
                o.trace.fallbacks.append(f"deadline: retrieval at level {level} stopped at the cut-off; "
                                         "extractive answer")
        self.fallbacks += sum(o.answer is not None for o in ready)
        return self._mark(ready, ctl.last)

    def _mark(self, outcomes: list[Outcome], level: int) -> list[Outcome]:
        for o in outcomes:
            if o.trace is not None:
                o.trace.degradation_level = level
        return outcomes

    def _extract(self, prepared: list[Outcome], why: str | list[str]) -> list[Outcome]:
        """Extractive answers for prepared outcomes (failures pass through); ``why`` (one for
        all, or one per outcome) is recorded in each answered trace's fallbacks."""
        k = self.extractive.cfg.generator.context_top_k
        reasons = [why] * len(prepared) if isinstance(why, str) else why
        for o, reason in zip(prepared, reasons):
            if o.trace is not None and o.failure is None:
                o.trace.context_ids = o.trace.context_ids[:k]
                o.trace.fallbacks.append(reason)
        done = self.extractive.generate(prepared)
        self.fallbacks += sum(o.answer is not None for o in done)
        return self._mark(done, self.controller.last)

    def _fallback_failed(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Questions whose generation failed (an LLM error) get an extractive answer."""
        failed = [i for i, o in enumerate(outcomes)
                  if o.failure is not None and o.failure.stage == "generate" and o.trace is not None]
        if not failed:
            return outcomes
        again = [Outcome(outcomes[i].question, trace=outcomes[i].trace) for i in failed]
        done = self._extract(again, [f"deadline: generation failed ({outcomes[i].failure.error}); extractive answer"
                                     for i in failed])
        out = list(outcomes)
        for i, o in zip(failed, done):
            out[i] = o
        return out


def level_counts(levels: list[int], names: list[str]) -> dict[str, int]:
    """``{"0": n, ...}``: questions per degradation level (every configured level listed)."""
    counts = {str(i): 0 for i in range(len(names))}
    for lv in levels:
        counts[str(lv)] = counts.get(str(lv), 0) + 1
    return counts


__all__ = ["DEADLINE_LEVELS", "DeadlineConfig", "Deadline", "DeadlineController", "DeadlineRunner",
           "ExtractiveGenerator", "deadline_path", "level_counts", "level_overrides", "level_pipelines",
           "parse_deadline", "resolve_deadline", "summary_line"]
