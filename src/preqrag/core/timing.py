"""Process-wide accounting of time spent in model inference.

Issue "throughput" asks that time outside model inference (embedder, cross-encoder and
LLM forward passes) stay below 5 % of a run's wall time. Every backend wraps its forward
pass in :func:`model_time`; :func:`model_seconds` reads the totals, so a benchmark can
report ``1 - model_busy_seconds() / wall``.

What is counted: the ONNX ``session.run`` calls (embedder and cross-encoder), the
``SentenceTransformer.encode`` / ``CrossEncoder.predict`` calls (tokenisation included, as
those libraries do it inside), llama.cpp ``create_chat_completion`` (prompt templating and
tokenisation included), and, for the OpenAI-compatible backend, the wall time during which
at least one request is in flight. Tokenisation done by preqrag itself, BM25, FAISS search,
fusion, I/O and model loading are *not* counted (they are overhead).

Time is the **union of intervals**, not a sum over calls: with ``run.overlap`` (or in a
server) two threads can be inside LLM calls at once (rewriting the next batch while the
current one generates); that wall time counts once for ``"llm"``. Summing the threads'
times would exceed the wall time and understate the overhead. Likewise
:func:`model_busy_seconds` counts the wall time during which a call of *any* kind is in
flight, the figure to compare with wall time.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_ANY = "\0any"  # internal key: calls of every kind
_seconds: dict[str, float] = defaultdict(float)  # closed busy intervals, per kind
_calls: dict[str, int] = defaultdict(int)
_active: dict[str, int] = defaultdict(int)  # calls in flight, per kind
_since: dict[str, float] = {}  # start of the current busy interval, per kind with calls in flight


def _enter(kind: str, now: float) -> None:
    if _active[kind] == 0:
        _since[kind] = now
    _active[kind] += 1


def _exit(kind: str, now: float) -> None:
    _active[kind] -= 1
    if _active[kind] == 0:
        _seconds[kind] += now - _since.pop(kind)


@contextmanager
def model_time(kind: str) -> Iterator[None]:
    """Count the wall time of the ``with`` block towards ``kind`` (``"embedder"``,
    ``"cross-encoder"`` or ``"llm"``), as the union of all blocks of that kind across
    threads: overlapping blocks are counted once. Thread-safe; exceptions propagate
    unchanged; re-entrant (a nested block of the same kind adds nothing)."""
    with _lock:
        now = time.perf_counter()
        _enter(kind, now)
        _enter(_ANY, now)
    try:
        yield
    finally:
        with _lock:
            now = time.perf_counter()
            _exit(kind, now)
            _exit(_ANY, now)
            _calls[kind] += 1


def _totals(now: float) -> dict[str, float]:
    out = {k: v for k, v in _seconds.items()}
    for k, t0 in _since.items():  # intervals still open count up to now
        out[k] = out.get(k, 0.0) + now - t0
    return out


def model_seconds() -> dict[str, float]:
    """Wall seconds during which at least one call of each kind was in flight, since start
    (or :func:`reset_model_time`); calls still in flight count up to now."""
    with _lock:
        out = _totals(time.perf_counter())
    out.pop(_ANY, None)
    return out


def model_busy_seconds() -> float:
    """Wall seconds during which at least one model call of any kind was in flight (at most
    the wall time elapsed; ``<= sum(model_seconds().values())``)."""
    with _lock:
        return _totals(time.perf_counter()).get(_ANY, 0.0)


def model_calls() -> dict[str, int]:
    """Number of finished timed model calls of each kind."""
    with _lock:
        return dict(_calls)


def model_usage_since(seconds0: dict[str, float], calls0: dict[str, int]) -> tuple[dict[str, float], dict[str, int]]:
    """``(seconds, calls)`` per kind since the snapshot ``seconds0 = model_seconds()``,
    ``calls0 = model_calls()`` (a run's or a batch's share of the process totals)."""
    return ({k: v - seconds0.get(k, 0.0) for k, v in model_seconds().items()},
            {k: v - calls0.get(k, 0) for k, v in model_calls().items()})


def reset_model_time() -> None:
    """Zero every total (calls in flight count from now on)."""
    with _lock:
        now = time.perf_counter()
        _seconds.clear()
        _calls.clear()
        for k in _since:
            _since[k] = now
