"""Content-addressed result caches (LLM calls, query embeddings, cross-encoder scores).

Re-runs and ablations repeat most of their model calls; each cache stores a model's
output under the SHA-256 of everything that determines it (model name, settings, input
text), so a repeated call is a lookup and a changed setting is a miss, never a stale hit.
Storage is SQLite (``<cache_dir>/<table>.sqlite``): atomic, crash-safe writes, safe to
share between processes. Only successful results are stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def content_key(*parts: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``parts`` (must be JSON-serialisable)."""
    blob = json.dumps(list(parts), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class KVStore:
    """A persistent ``key → value`` table (values: ``str`` or ``bytes``).

    Args:
        cache_dir: directory (created if missing); the file is ``<cache_dir>/<table>.sqlite``.
        table: table and file name, e.g. ``"llm"``.

    Counts ``hits`` and ``misses`` of :meth:`get_many`.
    """

    def __init__(self, cache_dir: str | Path, table: str):
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(cache_dir) / f"{table}.sqlite"
        self.table = table
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        self._db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[str]) -> list[Any]:
        """Stored values in the order of ``keys``; ``None`` where absent."""
        found: dict[str, Any] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # SQLite's host-parameter limit
                chunk = list(dict.fromkeys(keys[start:start + 500]))
                marks = ",".join("?" * len(chunk))
                found.update(self._db.execute(
                    f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk).fetchall())
        out = [found.get(k) for k in keys]
        hits = sum(v is not None for v in out)
        self.hits += hits
        self.misses += len(keys) - hits
        return out

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store ``(key, value)`` pairs in one transaction."""
        if not items:
            return
        with self._lock:
            self._db.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?)", items)
            self._db.commit()
