"""Bad input found by a fresh-machine probe (issue 9): each row of its table, on real smoke
data with the bundled models, through the real CLI where the CLI is what a user meets."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from conftest import TEST_OVERRIDES, config_toml, run_cli
from preqrag.core.config import load_config
from preqrag.components.generation import build_prompt, fit_prompt
from preqrag.core.io import iter_corpus, read_questions
from preqrag.models.preflight import check_models

FAST = {**TEST_OVERRIDES, "rewriter": {"name": "none"}, "cross_encoder": {"name": "none"},
        "generator": {"name": "extractive"}}
"""The probe's settings: rewriter, reranker and LLM off, answers extractive (the rows are about
input, not models; a test that sets its own ``generator`` table gets the LLM back)."""


def _cli(*args, **kw):
    return run_cli(*args, **kw)


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _cfg(tmp_path, overrides, name="preqrag.toml"):
    p = tmp_path / name
    p.write_text(config_toml(overrides))
    return p


def test_non_utf8_line_and_bom_read_line_by_line(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"id": "a", "question": "What is SCADA?"}\n'
                  b'{"id": "b", "question": "caf\xe9 au lait?"}\n'
                  b'{"id": "c", "question": "Who wrote Hamlet?"}\n')
    qs, errors = read_questions(p)
    assert [q.id for q in qs] == ["a", "c"]  # the BOM does not hide the first question
    assert len(errors) == 1 and errors[0].line == 2 and errors[0].field == "<line>"
    assert "not valid UTF-8" in errors[0].message and str(p) in str(errors[0])


def test_run_with_bad_byte_and_bom_answers_every_other_question(tmp_path, small_index, small_corpus):
    questions = small_corpus[2][:3]
    body = [json.dumps(q).encode() for q in questions]
    qfile = tmp_path / "q.jsonl"
    qfile.write_bytes(b"\xef\xbb\xbf" + body[0] + b"\n" + b'{"id": "bad", "question": "\xff\xfe?"}\n'
                      + body[1] + b"\n" + body[2] + b"\n")
    out = tmp_path / "answers.jsonl"
    r = _cli("run", qfile, "--index", small_index, "-o", out, "--config", _cfg(tmp_path, FAST))
    assert r.returncode == 0, r.stderr
    assert [a["id"] for a in _lines(out)] == [q["id"] for q in questions]
    failed = _lines(tmp_path / "answers.failed.jsonl")
    assert [(f["file"], f["line"], f["field"]) for f in failed] == [(str(qfile), 2, "<line>")]
    assert "not valid UTF-8" in failed[0]["error"]


@pytest.mark.parametrize("content", [b"", b"\n\n", b"\xef\xbb\xbf"])
def test_question_file_without_questions_is_an_error(tmp_path, content):
    qfile = tmp_path / "empty.jsonl"
    qfile.write_bytes(content)
    r = _cli("run", qfile, "--index", tmp_path / "no-index", "-o", tmp_path / "a.jsonl")
    assert r.returncode == 2
    assert "holds no questions" in r.stderr and str(qfile) in r.stderr
    assert not (tmp_path / "a.jsonl").exists()


def test_question_file_with_only_bad_lines_is_an_error(tmp_path):
    qfile = tmp_path / "bad.jsonl"
    qfile.write_text('{"id": 1}\n{broken\n')
    r = _cli("run", qfile, "--index", tmp_path / "no-index", "-o", tmp_path / "a.jsonl")
    assert r.returncode == 2 and "holds no questions (2 bad lines" in r.stderr


def test_duplicate_document_ids_name_both_lines(tmp_path, small_corpus):
    docs = [json.loads(line) for line in open(small_corpus[0], encoding="utf-8")][:4]
    docs.append({**docs[1], "text": "another text under the same id"})
    corpus = tmp_path / "dup.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(ValueError) as e:
        list(iter_corpus(corpus))
    msg = str(e.value)
    assert f"{corpus}:5: id: duplicate document id {docs[1]['id']!r} (first at line 2)" in msg
    r = _cli("index", "--corpus", corpus, "--index", tmp_path / "idx", "--sparse-only")
    assert r.returncode == 2 and "duplicate document id" in r.stderr and ":5:" in r.stderr
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("section,field,name", [("cross_encoder", "name", "no-such/model-xyz"),
                                               ("embedder", "name", "no-such/embedder-xyz"),
                                               ("llm", "model", "no-such/llm-xyz:model.gguf")])
def test_unavailable_model_is_named_before_the_first_question(section, field, name):
    problems = check_models(load_config(None, {section: {field: name}}))
    assert [(p.field, p.model) for p in problems] == [(f"{section}.{field}", name)]
    assert "hf download" in problems[0].message and "local" in problems[0].message


def test_bundled_models_pass_the_check():
    assert check_models(load_config(None)) == []
    bad = check_models(load_config(None, {"llm": {"model": "./missing.gguf"}}))
    assert [(p.field, p.message) for p in bad] == [("llm.model", "no such file or directory")]


def test_run_with_unavailable_reranker_exits_2_before_answering(tmp_path, small_index, small_corpus):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in small_corpus[2][:2]))
    cfg = _cfg(tmp_path, {**FAST, "cross_encoder": {"name": "no-such/model-xyz"}})
    out = tmp_path / "answers.jsonl"
    r = _cli("run", qfile, "--index", small_index, "-o", out, "--config", cfg)
    assert r.returncode == 2, r.stderr
    assert "cross_encoder.name = 'no-such/model-xyz'" in r.stderr
    assert not out.exists() and not (tmp_path / "answers.failed.jsonl").exists()


# ------------------------------------------------------------------ prompts that fit the window

@pytest.fixture(scope="module")
def smollm2():
    from preqrag.core.config import LLMConfig
    from preqrag.models.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM(LLMConfig(n_ctx=1024))


def test_fit_prompt_cuts_an_overlong_question_to_the_window(smollm2, small_corpus):
    question = " ".join(["why is the reactor coolant pump important"] * 3_000)  # 21,000 words: 20x the window
    passages = ["SCADA systems monitor industrial processes. " * 40] * 3
    fitted = fit_prompt(question, passages, prompt="B", count=smollm2.count_tokens, window=1024,
                        max_new_tokens=64, max_passage_tokens=512)
    n = smollm2.count_tokens(fitted.text)
    assert n <= 1024 - 64 - 32
    assert n >= 0.9 * (1024 - 64 - 32)  # the space is used, not thrown away
    assert any(t.startswith("question: ") for t in fitted.truncations)
    assert fitted.text.startswith(build_prompt("", [], "B").split("\n")[0])


def test_max_passage_tokens_is_applied(smollm2):
    passages = ["word " * 400, "short passage"]
    fitted = fit_prompt("q?", passages, prompt="B", count=smollm2.count_tokens, window=4096,
                        max_new_tokens=64, max_passage_tokens=100)
    assert fitted.truncations == [f"passage 1: {smollm2.count_tokens(passages[0])} -> 100 tokens"]
    assert "short passage" in fitted.text


def test_huge_question_and_wide_context_are_answered_with_truncation_in_trace(tmp_path, small_index,
                                                                              small_corpus):
    """A 20,000-word question (~100x what the reranker, the encoder and the window take), and context_top_k = 8 over a 256-token window: both answered by
    the LLM, the cuts recorded in the trace (reranker on: it must cope with the question too)."""
    q = small_corpus[2][0]
    qfile = tmp_path / "q.jsonl"
    huge = " ".join([q["question"]] * (20_000 // len(q["question"].split()) + 1))
    qfile.write_text(json.dumps({"id": "huge", "question": huge}) + "\n"
                     + json.dumps({"id": "wide", "question": q["question"]}) + "\n")
    cfg = _cfg(tmp_path, {**FAST, "cross_encoder": {"depth": 8, "max_length": 128}, "llm": {"n_ctx": 256},
                          "generator": {"context_top_k": 8, "max_new_tokens": 4, "sentence_scorer": "words"}})
    out = tmp_path / "answers.jsonl"
    r = _cli("run", qfile, "--index", small_index, "-o", out, "--config", cfg)
    assert r.returncode == 0, r.stderr + (tmp_path / "answers.failed.jsonl").read_text()
    answers = {a["id"]: a for a in _lines(out)}
    assert set(answers) == {"huge", "wide"}
    traces = {t["id"]: t for t in _lines(tmp_path / "answers.traces.jsonl")}
    # the huge question leaves no room for any passage: all dropped, then the question cut
    assert any(t.startswith("generate: passages 1-8 dropped: ") for t in traces["huge"]["truncations"])
    assert any(t.startswith("generate: question: ") for t in traces["huge"]["truncations"])
    assert traces["huge"]["context_ids"] == [] and answers["huge"]["passages"] == []
    # 8 passages do not fit 256 tokens: the question stays whole, passages go from the end, and the
    # answer lists only those in the prompt
    wide = traces["wide"]
    assert 1 <= len(wide["context_ids"]) < 8 and len(answers["wide"]["passages"]) == len(wide["context_ids"])
    assert any(re.match(r"generate: passages? \d+(-8)? dropped: ", t) for t in wide["truncations"])
    assert not any(t.startswith("generate: question: ") for t in wide["truncations"])
    assert wide["context_ids"] == wide["rankings"]["final"][0]["ids"][:len(wide["context_ids"])]
    assert q["question"] in answers["wide"]["final_prompt"]
    assert len(answers["huge"]["final_prompt"].split()) < 256
