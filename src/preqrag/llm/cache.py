"""Content-addressed cache of LLM calls, so re-runs and ablations skip finished work."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from ..stages import LLM, LLMError


def call_key(model: str, messages: list[dict], max_tokens: int, temperature: float) -> str:
    """SHA-256 of the canonical JSON of (model, messages, max_tokens, temperature)."""
    blob = json.dumps([model, messages, max_tokens, temperature], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedLLM:
    """Wraps an LLM; successful replies are stored in SQLite (``<cache_dir>/llm.sqlite``).

    Only deterministic calls (``temperature == 0``) are cached; failures never are, so a
    re-run retries them. SQLite gives atomic, crash-safe writes and is safe to share
    between processes.
    """

    def __init__(self, llm: LLM, cache_dir: str | Path):
        self.llm = llm
        self.name = llm.name
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(Path(cache_dir) / "llm.sqlite", check_same_thread=False, timeout=30)
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM calls WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _put(self, items: list[tuple[str, str]]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?)", items)
            self._db.commit()

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0) -> list[str | LLMError]:
        """As ``LLM.chat_many``; only cache misses reach the wrapped LLM."""
        if temperature != 0.0:
            return self.llm.chat_many(requests, max_tokens=max_tokens, temperature=temperature)
        keys = [call_key(self.name, m, max_tokens, temperature) for m in requests]
        results: list[str | LLMError | None] = [self._get(k) for k in keys]
        todo = [i for i, r in enumerate(results) if r is None]
        self.hits += len(requests) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = self.llm.chat_many([requests[i] for i in todo], max_tokens=max_tokens,
                                       temperature=temperature)
            self._put([(keys[i], r) for i, r in zip(todo, fresh) if isinstance(r, str)])
            for i, r in zip(todo, fresh):
                results[i] = r
        return results  # type: ignore[return-value]

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0) -> str:
        (r,) = self.chat_many([messages], max_tokens=max_tokens, temperature=temperature)
        if isinstance(r, LLMError):
            raise r
        return r
