"""bench/presets_summary.py: docs/presets.md's ladder tables are written from the bench JSON (the
largest head per preset, LLM and index), between its markers, leaving the rest of the file."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO

BENCH = REPO / "bench"


def _module():
    spec = importlib.util.spec_from_file_location("presets_summary", BENCH / "presets_summary.py")
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(BENCH))  # the script imports its sibling _common, as when run
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


def test_summary_keeps_the_largest_head_and_replaces_only_its_block(tmp_path):
    mod = _module()
    row = {"name": "hybrid", "llm": None, "single_hit@1": 0.5, "single_hit@10": 0.9, "single_mrr@10": 0.6,
           "multi_recall@10": 0.8, "multi_all@10": 0.7}
    rows = [{**row, "label": "full / dev.jsonl (50 q)", "n_questions": 50, "multi_recall@10": 0.9},
            {**row, "label": "full / dev.jsonl (200 q)", "n_questions": 200},
            {**row, "label": "wl / dev.jsonl (30 q)", "n_questions": 30, "answer_token_f1": 0.25, "context_hit": 0.7},
            {"name": "llm-classifier", "label": "full / dev.jsonl (200 q)", "n_questions": 200, "llm": "x"}]
    (tmp_path / "b.json").write_text(json.dumps({"rows": rows}))
    doc = tmp_path / "presets.md"
    doc.write_text(f"# Presets\n\nbefore\n\n{mod.BEGIN}\nold table\n{mod.END}\n\nafter\n")
    assert mod.main(["--json", str(tmp_path / "b.json"), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Presets\n\nbefore\n\n") and text.endswith(f"{mod.END}\n\nafter\n")
    assert "old table" not in text
    lines = [line for line in text.splitlines() if line.startswith("| `hybrid`")]
    assert len(lines) == 3  # retrieval: full (the 200, not the 50) and wl; answers: wl only
    assert "| full | 200 |" in lines[0] and "| 0.800 |" in lines[0] and "0.900 |" not in lines[0].split("|")[8]
    assert "| wl | 30 |" in lines[2] and "| 0.250 |" in lines[2]
    doc.write_text("no markers\n")
    assert mod.main(["--json", str(tmp_path / "b.json"), "--doc", str(doc)]) == 2


def test_docs_presets_tables_match_the_bench_json():
    """docs/presets.md's ladder tables are what bench/presets_summary.py writes from the committed
    docs/bench/llm_presets.json: a new row without `python bench/presets_summary.py` fails here."""
    mod = _module()
    root = BENCH.parent
    rows = json.loads((root / "docs" / "bench" / "llm_presets.json").read_text(encoding="utf-8"))["rows"]
    text = (root / "docs" / "presets.md").read_text(encoding="utf-8")
    block = text.split(mod.BEGIN, 1)[1].split(mod.END, 1)[0]
    assert block.strip() == "\n".join(mod.summary(rows)).strip(), "run: python bench/presets_summary.py"


def test_token_prf_is_squad_precision_recall_and_f1():
    """bench/presets.token_prf: SQuAD normalisation (case, punctuation, articles) and bag-of-tokens
    overlap; a short answer keeps its precision and loses recall (what preset_answers' columns show)."""
    import sys

    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_presets_prf", BENCH / "presets.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    p, r, f = mod.token_prf("The bridge opened in 1890.", "the Forth Bridge opened in 1890 in Scotland")
    assert (p, r) == (1.0, 4 / 7) and abs(f - 2 * (4 / 7) / (1 + 4 / 7)) < 1e-12
    assert mod.token_prf("", "anything") == (0.0, 0.0, 0.0) and mod.token_prf("x y", "z") == (0.0, 0.0, 0.0)
    assert mod.token_f1("The bridge opened in 1890.", "the Forth Bridge opened in 1890 in Scotland") == f
