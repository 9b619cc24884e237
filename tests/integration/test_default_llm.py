"""The shipped default LLM (issue 40): the default configuration names Qwen2.5-Coder-1.5B with
sentence selection by the cross-encoder, ``$PREQRAG_LLM_MODEL`` replaces that default (the tests' SmolLM2, tiny
machines) and a file's value wins over both; and the default model, installed by ./install.sh,
answers a real question from selected sentences. The only test that loads the 1.5B model."""

from __future__ import annotations

import json


from _bench import unavailable
from conftest import TEST_LLM
from preqrag.core.config import DEFAULT_LLM, LLM_MODEL_ENV, LLMConfig, load_config


def test_default_is_qwen_15b_with_sentence_selection_and_the_environment_replaces_it(tmp_path, monkeypatch):
    monkeypatch.delenv(LLM_MODEL_ENV, raising=False)
    cfg = load_config(None)
    assert DEFAULT_LLM == "qwen2.5-coder-1.5b" and cfg.llm.model == DEFAULT_LLM and LLMConfig().model == DEFAULT_LLM
    assert cfg.generator.context_tokens == 256 and cfg.generator.context_top_k == 3
    assert cfg.generator.sentence_scorer == "auto" and cfg.cross_encoder.name != "none"  # the cross-encoder chooses
    monkeypatch.setenv(LLM_MODEL_ENV, "  ")  # blank: the default
    assert LLMConfig().model == DEFAULT_LLM
    monkeypatch.setenv(LLM_MODEL_ENV, TEST_LLM)
    assert load_config(None).llm.model == TEST_LLM
    f = tmp_path / "p.toml"
    f.write_text('[llm]\nmodel = "qwen2.5-coder-0.5b"\n')
    assert load_config(f).llm.model == "qwen2.5-coder-0.5b"  # a file's value wins


def test_default_llm_is_installed_and_answers_from_selected_sentences(small_index, small_corpus, monkeypatch):
    """One smoke question through the default configuration (``hybrid``, the 1.5B model, sentences
    chosen by the cross-encoder; 128 tokens of them here, 256 by default), as ``preqrag ask`` answers it: a non-degenerate answer, the
    selection recorded in the trace, the three passages kept as the answer's sources."""
    from preqrag.components.answering import degenerate
    from preqrag.models.install import ModelInstallError, verify
    from preqrag.run.pipeline import Pipeline
    from preqrag.core.records import Question

    try:
        verify(DEFAULT_LLM)
    except ModelInstallError as e:
        unavailable(f"the default LLM is not installed ({e}); ./install.sh installs it")
    monkeypatch.delenv(LLM_MODEL_ENV, raising=False)
    # the answer's first 24 tokens tell a real answer from a loop; 128 tokens of sentences (the default 256
    # took 8 s to prefill on 2 AVX2 cores) still cut every smoke passage; 8 candidates of 128-token pairs keep
    # the reranking (not under test here) to a second, as in the shared test configuration
    cfg = load_config(None, {"generator": {"max_new_tokens": 24, "context_tokens": 128},
                             "cross_encoder": {"depth": 8, "max_length": 128}})
    assert cfg.llm.model == DEFAULT_LLM
    q = next(q for q in small_corpus[2] if q["n_gold"] == 1)
    (out,) = Pipeline.from_config(small_index, cfg).answer([Question(id=q["id"], question=q["question"])])
    assert out.failure is None, out.failure
    answer, trace = out.answer, out.trace
    assert answer.answer.strip() and degenerate(answer.answer) is None, answer.answer
    assert len(answer.passages) == 3 and len(trace.context_ids) == 3
    selected = [t for t in trace.truncations if t.startswith("generate: selected passage ")]
    assert selected, trace.truncations  # the smoke passages are longer than their ~85-token share
    assert all(t.endswith(", by the cross-encoder") for t in selected), selected
    # the prompt holds the question and, of each passage, at least its best sentence
    assert q["question"] in answer.final_prompt and all(f"[{i}] " in answer.final_prompt for i in (1, 2, 3))
    print(json.dumps({"question": q["question"], "answer": answer.answer, "reference": q["answer"]}, indent=1))
