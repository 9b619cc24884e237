"""Content-addressed caches (query embeddings, cross-encoder scores, LLM calls) and the
overlapped runner, on the real bundled models and a real local LLM server."""

import json

import numpy as np

from preqrag.core.cache import KVStore, content_key
from preqrag.models.encoders import load_encoder
from preqrag.models.encoders.cache import CachedEncoder
from preqrag.core.io import read_questions
from preqrag.run.pipeline import Pipeline
from preqrag.models.rerankers import load_reranker
from preqrag.models.rerankers.cache import CachedReranker, RecentScores
from preqrag.run.runner import run_questions, sidecar
from preqrag.core.timing import model_calls


def test_kv_store_roundtrip_and_counts(tmp_path):
    store = KVStore(tmp_path, "t")
    keys = [content_key("m", i) for i in range(3)]
    assert store.get_many(keys) == [None, None, None]
    store.put_many([(keys[0], "a"), (keys[2], b"\x00\x01")])
    again = KVStore(tmp_path, "t")  # persisted, readable by a new connection
    assert again.get_many(keys) == ["a", None, b"\x00\x01"]
    assert (again.hits, again.misses) == (2, 1)
    assert content_key("m", 1) != content_key("m", "1") and content_key("a", {"x": 1, "y": 2}) == content_key(
        "a", {"y": 2, "x": 1})


def test_cached_encoder_and_reranker_return_what_the_models_return(tmp_path, test_config):
    texts = ["What is SCADA?", "How do bees make honey?", "What is SCADA?"]
    enc = load_encoder(test_config.embedder)
    direct = enc.encode(texts, is_query=True)
    cached = CachedEncoder(enc, tmp_path)
    first = cached.encode(texts, is_query=True)
    before = model_calls().get("embedder", 0)
    second = cached.encode(texts[::-1], is_query=True)
    assert model_calls().get("embedder", 0) == before  # all hits, no forward pass
    np.testing.assert_allclose(first, direct, atol=1e-6)
    np.testing.assert_array_equal(second, first[::-1])

    pairs = [("What is SCADA?", "SCADA systems control industrial processes."),
             ("What is SCADA?", "Bees make honey from nectar.")]
    rr = load_reranker(test_config.cross_encoder)
    direct_s = rr.score(pairs)
    crr = CachedReranker(rr, tmp_path)
    np.testing.assert_allclose(crr.score(pairs), direct_s, rtol=1e-6)
    before = model_calls().get("cross-encoder", 0)
    np.testing.assert_allclose(crr.score(pairs[::-1]), direct_s[::-1], rtol=1e-6)
    assert model_calls().get("cross-encoder", 0) == before
    assert crr.store.hits == 2


def test_recent_scores_answer_a_repeated_pair_without_the_model(test_config):
    """The in-memory score memo of the shared cross-encoder: the same scores as the model, a pair
    scored again costs no model call, a miss among hits is scored alone, the oldest pair goes first."""
    q = "What is SCADA?"
    texts = ["SCADA systems control industrial processes.", "Bees make honey from nectar.",
             "A PLC runs the plant floor.", "Honey bees live in hives."]
    rr = load_reranker(test_config.cross_encoder)
    direct = rr.score([(q, t) for t in texts])
    memo = RecentScores(rr, size=3)
    np.testing.assert_allclose(memo.score([(q, t) for t in texts[:2]] + [(q, texts[0])]),
                               direct[[0, 1, 0]], rtol=1e-6)
    before = model_calls().get("cross-encoder", 0)
    np.testing.assert_allclose(memo.score([(q, texts[1]), (q, texts[0])]), direct[[1, 0]], rtol=1e-6)
    assert model_calls().get("cross-encoder", 0) == before
    np.testing.assert_allclose(memo.score([(q, t) for t in texts[1:]]), direct[1:], rtol=1e-6)
    assert model_calls().get("cross-encoder", 0) > before  # texts 2 and 3 were new
    assert list(memo._recent) == [(q, t) for t in texts[1:]]  # size 3: texts[0], the least recent, dropped


def test_rerun_with_cache_dir_skips_every_model_call(tmp_path, small_index, small_corpus, test_config):
    cfg = test_config.model_copy(deep=True)
    cfg.run.cache_dir = str(tmp_path / "cache")
    questions = read_questions(small_corpus[1])[0][:4]
    first = Pipeline.from_config(small_index, cfg).retrieve(questions)
    fresh = Pipeline.from_config(small_index, cfg)  # new models, same cache
    before = model_calls()
    second = fresh.retrieve(questions)
    assert model_calls() == before  # no embedder, cross-encoder or LLM call at all
    for a, b in zip(first, second):
        assert a.plan == b.plan and a.context_ids == b.context_ids
        assert a.rankings["reranked"][0].scores == b.rankings["reranked"][0].scores


def test_overlapped_run_against_a_real_server(tmp_path, llama_server, small_index, small_corpus, test_config):
    """3 questions in batches of 2 and 1: the second batch is retrieved while the first is
    generating. Short prompts and answers (one passage cut to 32 tokens, 4 answer tokens: the
    answer text is not under test)."""
    cfg = test_config.model_copy(deep=True)
    cfg.llm.backend, cfg.llm.base_url, cfg.llm.model = "openai", f"{llama_server}/v1", "smollm2"
    cfg.llm.structured_output = "json_object"  # the form llama-cpp-python's server reads
    cfg.run.batch_size, cfg.run.overlap = 2, True
    cfg.generator.context_top_k, cfg.generator.max_passage_tokens, cfg.generator.max_new_tokens = 1, 32, 4
    questions = small_corpus[2][:3]
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in questions))
    out = tmp_path / "answers.jsonl"
    summary = run_questions(Pipeline.from_config(small_index, cfg), qfile, out)
    assert (summary.answered, summary.failed) == (3, 0)
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == [q["id"] for q in questions]  # written batch by batch, in input order
    traces = [json.loads(line) for line in sidecar(out, "traces").read_text().splitlines()]
    assert [t["id"] for t in traces] == ids and all(t["context_ids"] for t in traces)
