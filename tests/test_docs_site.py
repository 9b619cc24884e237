"""The documentation site (``mkdocs.yml``, MkDocs with the Material theme) builds with
``--strict``: every page of docs/ is in the navigation or deliberately left out of it
(``not_in_nav``), and no page links to a Markdown file or anchor that does not exist."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from _bench import unavailable

ROOT = Path(__file__).resolve().parent.parent


def test_docs_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        unavailable('the docs site needs MkDocs and its Material theme: pip install -e ".[dev]"')
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    built = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages <= built, f"pages missing from the site: {sorted(pages - built)}"


def test_configuration_reference_page_is_current(monkeypatch):
    """docs/configuration-reference.md is ``preqrag config --markdown``'s output from the validated
    configuration models: a changed setting, default or description must be regenerated
    (``preqrag config --markdown > docs/configuration-reference.md``)."""
    from preqrag.config import LLM_MODEL_ENV, config_reference

    monkeypatch.delenv(LLM_MODEL_ENV, raising=False)  # the shipped defaults, not the suite's SmolLM2
    page = (ROOT / "docs" / "configuration-reference.md").read_text(encoding="utf-8")
    assert page == config_reference() + "\n", "stale: run `preqrag config --markdown > docs/configuration-reference.md`"
    from conftest import run_cli

    r = run_cli("config", "--markdown")
    assert r.returncode == 0 and r.stdout == page, r.stderr
    r = run_cli("config", "--markdown", "-p", "dota")  # a preset's values in the same table layout
    assert r.returncode == 0 and '| `use_sparse` | `true` |' in r.stdout and '| `name` | `"dota"` |' in r.stdout
