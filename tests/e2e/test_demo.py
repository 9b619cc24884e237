"""``preqrag demo`` (README's main job) end to end with the bundled models: every question is
answered and no answer loops (issue 22: SmolLM2 repeated one sentence five times and wrote
"1. 1. 2. 3. 4. 5." before looping answers were detected and repaired).

It runs the installed ``preqrag`` console script (``[project.scripts]``) in its own process, as a
user types it: the suite's one test of the entry point itself (most other CLI tests run the same
Typer app in-process, ``conftest.run_cli``). The answer settings are the defaults (cross-encoder
sentence selection, the default answer length, where loops happen); :data:`DEMO_TEST_CONFIG` only
makes indexing and reranking cheap: the WordLlama embedder (the default sentence-transformers
encoder took 21 of the test's 62 s to encode the 314 passages; it is tested on the small corpus by
every index test) and 128-token cross-encoder pairs (the default 512-token pairs: 11 s)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import config_toml
from preqrag.components.answering import degenerate

DEMO_TEST_CONFIG = {"embedder": {"name": "wordllama"}, "cross_encoder": {"max_length": 128}}
"""The demo's configuration file in this test: every answer setting left at its default."""


@pytest.mark.slow
def test_demo_answers_do_not_loop(tmp_path):
    pytest.importorskip("wordllama", reason='the test configuration\'s embedder: pip install "wordllama==0.4.0.post1"')
    cfg = tmp_path / "demo.toml"
    cfg.write_text(config_toml(DEMO_TEST_CONFIG), encoding="utf-8")
    script = shutil.which("preqrag", path=os.path.dirname(sys.executable))  # the environment's console script
    assert script, f"no preqrag console script beside {sys.executable}: is the package installed (pip install -e .)?"
    r = subprocess.run([script, "demo", "--workdir", str(tmp_path), "--config", str(cfg)], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    traces = {t["id"]: t for t in map(json.loads, (tmp_path / "answers.traces.jsonl").read_text().splitlines())}
    assert len(answers) == 5 and set(traces) == {a["id"] for a in answers}
    # the answers as shown, citation markers taken out; each question's documents listed once, then its time
    def unmarked(text):  # markers out (the model may write "[1]" itself, as the context numbers passages)
        return " ".join(re.sub(r"\s?\[\d+(?:, \d+)*\]", "", text).split())

    shown = [unmarked(line[3:]) for line in r.stdout.splitlines() if line.startswith("A: ")]
    assert len(shown) == 5
    for block in r.stdout.split("Q: ")[1:]:
        docs = re.findall(r"\] (<urn:uuid:[^>]+>)", block)
        assert docs and len(docs) == len(set(docs)), block
        # the answer's own wall time (its batch's), with the questions it was answered with and
        # the per-question share labelled as such
        m = re.search(r"^   (\d+\.\d) s, answered together with 4 other questions \((\d+\.\d) s per question\)$",
                      block, re.M)
        assert m and abs(float(m[1]) / 5 - float(m[2])) <= 0.1, block
    for a in answers:
        assert a["answer"].strip() and degenerate(a["answer"]) is None, a["answer"]
        assert unmarked(a["answer"]) in shown  # what the user sees is the answer file's text
        repaired = [f for f in traces[a["id"]]["fallbacks"] if f.startswith("generate: degenerate answer")]
        assert len(repaired) <= 1  # a repair, when one was needed, is recorded in the trace
