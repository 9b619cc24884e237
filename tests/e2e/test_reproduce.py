"""bench/reproduce.py --quick: a README figure step (the presets' retrieval rows) runs on a small
corpus, every row's inputs pinned by content hashes, and the README presets table rewritten from
the rows. The LLM steps (answers, throughput) wrap bench/answers.py and bench/throughput.py the same
way and are left out: no LLM step is under test here."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO as ROOT, TEST_OVERRIDES, config_toml


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_quick_reproduction_pins_its_inputs_and_rewrites_the_readme_table(tmp_path, small_index, small_corpus):
    from preqrag.core.config import load_config

    corpus, qpath, questions = small_corpus
    cfg = tmp_path / "test.toml"
    cfg.write_text(config_toml(TEST_OVERRIDES))
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- reproduce:presets -->\n| preset | what | x |\n|---|---|---|\n"
                      "| `hybrid` (default) | BM25 + dense, union, cross-encoder | 0.1 |\n"
                      "<!-- /reproduce:presets -->\nafter\n")
    work = tmp_path / "work"
    r = subprocess.run([sys.executable, "bench/reproduce.py", "--quick", "--work", str(work),
                        "--index", str(small_index), "--corpus", str(corpus), "--questions", str(qpath),
                        "--session-questions", str(qpath), "--sample", str(len(questions)),
                        "--head", str(len(questions)), "--steps", "retrieval", "--config", str(cfg),
                        "--readme", str(readme)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=os.environ.copy())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = {row["name"]: row for row in json.loads((work / "reproduce.json").read_text())["rows"]}
    assert set(rows) == {"retrieval: hybrid"}  # no LLM step is under test here: answers/throughput not run
    config_sha = hashlib.sha256(json.dumps(load_config(cfg).model_dump(mode="json"), sort_keys=True)
                                .encode()).hexdigest()
    for row in rows.values():  # inputs are the files' content hashes, not placeholders
        assert row["corpus_sha256"] == _sha(corpus)
        assert row["questions_sha256"] == row["session_questions_sha256"] == _sha(qpath)
        assert row["index_manifest_sha256"] == _sha(Path(small_index) / "manifest.json")
        assert row["config_sha256"] == config_sha
        assert row["label"] == "quick (smoke set)" and row["machine"]["cores"] and row["date"]
    ret = rows["retrieval: hybrid"]
    assert ret["n_questions"] == len(questions) and "bench/presets.py" in ret["command"] and str(cfg) in ret["command"]
    for col in ("single_hit@10", "multi_recall@10", "single_mrr@10"):
        assert 0.0 <= ret[col] <= 1.0
    assert ret["single_hit@10"] > 0  # the gold documents are in this corpus
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("after\n")
    assert (f"| `hybrid` (default) | BM25 + dense, union, cross-encoder | {ret['single_hit@10']:.3f} | "
            f"{ret['multi_recall@10']:.3f} |") in text
