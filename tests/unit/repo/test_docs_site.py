"""The documentation site (``mkdocs.yml``, MkDocs with the Material theme) builds with
``--strict``: every page of docs/ is in the navigation or deliberately left out of it
(``not_in_nav``), and no page links to a Markdown file or anchor that does not exist."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from _bench import unavailable
from conftest import REPO as ROOT


def test_docs_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        unavailable('the docs site needs MkDocs and its Material theme: pip install -e ".[dev]"')
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    built = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages <= built, f"pages missing from the site: {sorted(pages - built)}"
    big = {p.name: p.stat().st_size for p in (ROOT / "docs").glob("*.md") if p.stat().st_size > 20_000}
    assert not big, f"pages over 20,000 bytes (split them): {big}"


def test_configuration_reference_page_is_current(monkeypatch):
    """docs/configuration-reference.md and docs/configuration-systems.md are ``preqrag config
    --markdown [--systems]``'s output from the validated configuration models: a changed setting,
    default or description must be regenerated (``preqrag config --markdown >
    docs/configuration-reference.md``, ``preqrag config --markdown --systems >
    docs/configuration-systems.md``); every table is on one of them."""
    from preqrag.core.config import LLM_MODEL_ENV, config_reference, load_config

    monkeypatch.delenv(LLM_MODEL_ENV, raising=False)  # the shipped defaults, not the suite's SmolLM2
    page = (ROOT / "docs" / "configuration-reference.md").read_text(encoding="utf-8")
    answering = (ROOT / "docs" / "configuration-answering.md").read_text(encoding="utf-8")
    systems = (ROOT / "docs" / "configuration-systems.md").read_text(encoding="utf-8")
    assert page == config_reference() + "\n", "stale: run `preqrag config --markdown > docs/configuration-reference.md`"
    assert answering == config_reference(part="answering") + "\n", (
        "stale: run `preqrag config --markdown --part answering > docs/configuration-answering.md`")
    assert systems == config_reference(part="systems") + "\n", (
        "stale: run `preqrag config --markdown --systems > docs/configuration-systems.md`")
    tables = {k for k, v in load_config() if hasattr(type(v), "model_fields")}
    on = [{t for t in tables if f"## [{t}]" in p} for p in (page, answering, systems)]
    assert tables == on[0] | on[1] | on[2] and not (on[0] & on[1] or on[0] & on[2] or on[1] & on[2])  # each once
    assert "## [dota]" in systems and "## [llm]" in answering and "## [bm25]" in page
    from conftest import run_cli

    r = run_cli("config", "--markdown")
    assert r.returncode == 0 and r.stdout == page, r.stderr
    r = run_cli("config", "--markdown", "--systems")
    assert r.returncode == 0 and r.stdout == systems, r.stderr
    r = run_cli("config", "--markdown", "--part", "answering")
    assert r.returncode == 0 and r.stdout == answering, r.stderr
    r = run_cli("config", "--markdown", "--part", "nonsense")
    assert r.returncode == 2 and "--part must be core, answering or systems" in r.stderr
    r = run_cli("config", "--markdown", "-p", "dota")  # a preset's values in the same table layout
    assert r.returncode == 0 and '| `use_sparse` | `true` |' in r.stdout
    r = run_cli("config", "--markdown", "-p", "dota", "--part", "answering")
    assert r.returncode == 0 and '| `name` | `"dota"` |' in r.stdout


def _results_module():
    """bench/results.py as ``python bench/results.py`` runs it: its folder (bench/_common.py) on the path."""
    bench = str(ROOT / "bench")
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, bench)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(bench)
    return mod


def test_results_pages_are_current():
    """docs/results.md and docs/results/*.md are what ``bench/results.py`` makes of docs/bench/*.json
    now: a bench run that adds a row must regenerate them (``python bench/results.py``), and no
    page is over 20,000 bytes."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "results.py"), "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for p in [ROOT / "docs" / "results.md", *(ROOT / "docs" / "results").glob("*.md")]:
        assert p.stat().st_size <= 20_000, f"{p.name}: {p.stat().st_size} bytes"


def test_results_page_keeps_the_latest_row_per_configuration_and_machine():
    """Of rows equal on the key fields and measured on one machine, the latest is the current
    one; another machine's row stays beside it; each row names its command and machine."""
    res = _results_module()
    avx2 = {"cpu": "EPYC", "cores": 2, "ram_gib": 23.5, "simd": "AVX2"}
    data = {"rows": [{"name": "hybrid", "hit@10": 0.81, "command": "python bench/presets.py --run A"},
                     {"name": "dota", "hit@10": 0.5, "big": {"a": [1, 2]}},
                     {"name": "hybrid", "hit@10": 0.83, "command": "python bench/presets.py --run B"},
                     {"name": "hybrid", "hit@10": 0.9, "machine": {**avx2, "simd": "AVX-512"}}],
            "machine": avx2, "command": "python bench/presets.py --file-level", "date": "2026-11-27T10:00Z"}
    text = res.page("demo", data)
    assert "## Current rows (3 of 4)" in text
    assert "| 3 | hybrid | 0.83 |" in text and "| 1 | hybrid" not in text  # the later row of the same machine
    assert "| 4 | hybrid | 0.9 |" in text and "| 2 | dota | 0.5 |" in text
    assert "- row 3: `python bench/presets.py --run B`" in text
    assert "- rows 2, 4: `python bench/presets.py --file-level`" in text  # the file's command where a row has none
    assert "- rows 2, 3: EPYC (AVX2), 2 cores" in text and "- row 4: EPYC (AVX-512), 2 cores" in text
    assert "Measured by `bench/presets.py`" in text
    # a file of one record: its figures, nested names joined by dots; records as a table
    one = res.page("one", {"command": "python bench/x.py", "setup": {"n": 3}, "by": {"a": {"f1": 0.5}, "b": {"f1": 0.25}}})
    assert "| setup.n | 3 |" in one and "| a | 0.5 |" in one and "| b | 0.25 |" in one


def test_results_rows_before_and_after_a_table_rename_are_one_configuration():
    """A row whose config says [reranker] (written before it became [cross_encoder]) and a later row
    of the same settings under the new name: one configuration, the later row current."""
    res = _results_module()
    old = {"name": "hybrid", "config": {"pipeline": "hybrid", "reranker": {"depth": 30}}, "hit@10": 0.8}
    new = {"name": "hybrid", "config": {"pipeline": "hybrid", "cross_encoder": {"depth": 30}}, "hit@10": 0.85}
    other = {"name": "hybrid", "config": {"pipeline": "hybrid", "cross_encoder": {"depth": 20}}, "hit@10": 0.7}
    assert [i for i, _ in res.current_rows([old, new, other], {})] == [2, 3]


def test_results_page_cuts_nothing_that_tells_rows_apart():
    """A long label (a key field) is shown whole; rows of one configuration on other question counts
    are both current; a settings dict shows what differs between the rows; a long note is a paragraph
    and a row's long text is listed below the table: no cell is cut to '…'."""
    res = _results_module()
    label = "full bench corpus (85,899 passages) / dev sample of 500 (seed 0), cross-encoder pair by pair"
    base = {"pipeline": "hybrid", "reranker": {"depth": 30, "model": "minilm"}, "llm": {"model": "qwen"}}
    rows = [{"name": "hybrid", "label": label, "n_questions": 30, "config": base, "hit@10": 0.9},
            {"name": "hybrid", "label": label, "n_questions": 200, "config": base, "hit@10": 0.8},
            {"name": "hybrid", "label": label + ", depth 20", "n_questions": 200, "hit@10": 0.7,
             "config": {**base, "reranker": {"depth": 20, "model": "minilm"}},
             "remark": "measured while another benchmark ran on the same two cores: seconds are upper bounds"}]
    note = "What the rows mean, in a sentence long enough that no table cell could hold it without cutting it short."
    text = res.page("demo", {"rows": rows, "note": note})
    assert "…" not in text and "## Current rows (3 of 3)" in text
    assert f"| {label} |" in text and f"| {label}, depth 20 |" in text
    assert "| reranker: (depth=30) |" in text and "| reranker: (depth=20) |" in text
    assert f"## note\n\n{note}\n" in text
    assert "(below)" in text and "- #3, `remark`: measured while another benchmark ran" in text
