"""The WordLlama static encoder (bundled in the wordllama package) as an index embedder."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("wordllama")

from conftest import TEST_OVERRIDES  # noqa: E402

from preqrag.core.config import load_config  # noqa: E402
from preqrag.models.encoders import load_encoder  # noqa: E402
from preqrag.index.embedded import Index, IndexOpenError, build_index  # noqa: E402


def test_encodes_unit_vectors_that_rank_paraphrases_first():
    cfg = load_config(None, {"embedder": {"name": "wordllama"}})
    enc = load_encoder(cfg.embedder)
    texts = ["The vaccine trains the immune system to recognise a virus.",
             "Immunisation teaches the body's immune defences to spot viruses.",
             "The stock market fell sharply on Tuesday after the rate decision."]
    v = enc.encode(texts, is_query=False)
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    assert enc.encode([], is_query=True).shape == (0, 256)
    assert enc.count_tokens("hello world") >= 2


def test_encode_equals_wordllamas_own_embed_on_smoke_passages(small_corpus):
    """preqrag pools with a sparse count matrix instead of WordLlamaInference.embed (2.5x faster on
    bench passages, bench/wordllama_encode.py): the vectors must be the library's own, including a
    text with no token (all zero), texts longer than one batch of the other, and a repeated token."""
    import json

    docs = [json.loads(line)["text"] for line in small_corpus[0].read_text(encoding="utf-8").splitlines()]
    texts = docs + ["", "the the the the", "x" * 3000] + [d[:200] for d in docs] * 40  # > one batch of either
    enc = load_encoder(load_config(None, {"embedder": {"name": "wordllama"}}).embedder)
    ours = enc.encode(texts, is_query=False, batch_size=32)
    # the library pads each batch to its longest text: batches of 64 (not 256) keep the padded long documents few
    library = np.nan_to_num(np.asarray(enc._load().embed(texts, norm=True, batch_size=64), np.float32))
    assert ours.shape == library.shape == (len(texts), 256) and ours.dtype == np.float32
    assert np.abs(ours - library).max() <= 1e-6
    assert not ours[len(docs)].any()  # the empty text
    assert np.allclose(np.linalg.norm(ours[: len(docs)], axis=1), 1.0, atol=1e-5)


def test_index_built_with_wordllama_finds_gold_documents(small_corpus, tmp_path):
    cfg = load_config(None, {**TEST_OVERRIDES, "embedder": {"name": "wordllama"}})
    out = tmp_path / "idx"
    manifest = build_index(small_corpus[0], out, cfg)
    assert manifest["embedder"]["name"] == "wordllama" and manifest["embedder"]["dim"] == 256
    assert manifest["embedder"]["model_sha256"]
    index = Index.open(out, cfg)
    questions = small_corpus[2]
    found = index.dense.search([q["question"] for q in questions], 10)
    hits = sum(bool({index.passages[p].doc_id for p in r.ids} & set(q["gold_doc_ids"]))
               for r, q in zip(found, questions))
    assert hits >= len(questions) // 2  # a weak static model, 18 documents: most gold documents in the top 10
    with pytest.raises(IndexOpenError, match="embedder"):
        Index.open(out, load_config(None, TEST_OVERRIDES))
