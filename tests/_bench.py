"""Where the tests find the real bench data: ``shared/liverag-bench`` beside the repository
(``<repo>/../shared``), never an absolute path. Missing data skips a test on a developer's
machine and fails it under CI (``CI=true``), where a skip would hide lost coverage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent.parent / "shared" / "liverag-bench"
DEV = BENCH / "dev.jsonl"
SMOKE = BENCH / "smoke.jsonl"
SMOKE_CORPUS = BENCH / "smoke_corpus.jsonl.gz"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip the calling test, or fail it under CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: missing test data is an error)")
    pytest.skip(reason)


def bench_file(path: Path) -> Path:
    """``path`` if it exists, else skip (fail under CI)."""
    if not path.exists():
        unavailable(f"{path} not found (shared/liverag-bench beside the repo)")
    return path
