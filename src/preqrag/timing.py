"""Process-wide accounting of time spent in model inference.

Issue "throughput" asks that time outside model inference (embedder, cross-encoder and
LLM forward passes) stay below 5 % of a run's wall time. Every backend wraps its forward
pass in :func:`model_time`; :func:`model_seconds` reads the totals, so a benchmark can
report ``1 - sum(model_seconds().values()) / wall``.

What is counted: the ONNX ``session.run`` calls (embedder and cross-encoder), the
``SentenceTransformer.encode`` / ``CrossEncoder.predict`` calls (tokenisation included, as
those libraries do it inside), llama.cpp ``create_chat_completion`` (prompt templating and
tokenisation included), and, for the OpenAI-compatible backend, the wall time during which
at least one request is in flight. Tokenisation done by preqrag itself, BM25, FAISS search,
fusion, I/O and model loading are *not* counted (they are overhead).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_seconds: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)


@contextmanager
def model_time(kind: str) -> Iterator[None]:
    """Add the wall time of the ``with`` block to the ``kind`` total (``"embedder"``,
    ``"cross-encoder"`` or ``"llm"``). Thread-safe; exceptions propagate unchanged."""
    t = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t
        with _lock:
            _seconds[kind] += dt
            _calls[kind] += 1


def model_seconds() -> dict[str, float]:
    """Seconds spent in each kind of model call since start (or :func:`reset_model_time`)."""
    with _lock:
        return dict(_seconds)


def model_calls() -> dict[str, int]:
    """Number of timed model calls of each kind."""
    with _lock:
        return dict(_calls)


def reset_model_time() -> None:
    """Zero every total."""
    with _lock:
        _seconds.clear()
        _calls.clear()
