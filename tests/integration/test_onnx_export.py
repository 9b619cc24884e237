"""The default embedder's ONNX int8 backend (preqrag.models.encoders.onnx_export, issue: dense encoding speed).

One real export (all-MiniLM-L6-v2 → ONNX → int8, ~8 s on 2 cores) is made per module into a fresh
``PREQRAG_MODEL_DIR``; the tests check that it is reused and verified by sha256, that damage is
detected and rebuilt (or reported when it cannot be), that its vectors agree with torch float32 on
real passages, and that pooling and the graph respect the attention mask.
"""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pytest

from preqrag.core.config import load_config
from preqrag.models.encoders import choose_backend, load_encoder, onnx_export_encoder
from preqrag.models.encoders import onnx_export as ox
from preqrag.models.encoders.onnx import OnnxEncoder, pool
from preqrag.models.files import resolve

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A fresh model cache holding one real int8 export of the default embedder."""
    d = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREQRAG_MODEL_DIR", str(d))
        ox.ensure_exported(source())
        yield d


def source() -> ox.SourceModel:
    return ox.read_source(MODEL, resolve(MODEL).location)


@pytest.fixture
def cache(model_dir, monkeypatch):
    monkeypatch.setenv("PREQRAG_MODEL_DIR", str(model_dir))
    return ox.export_dir(source(), "int8")


def real_texts(n: int = 6) -> list[str]:
    """The first ``n`` smoke-corpus documents (real FineWeb pages; the encoders truncate each to 256 tokens)."""
    from _bench import SMOKE_CORPUS, bench_file

    with gzip.open(bench_file(SMOKE_CORPUS), "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(n), fh)]


def test_export_is_made_once_then_reused_and_verified(cache, monkeypatch):
    record = json.loads((cache / "export.json").read_text())
    model = (cache / "model.onnx").read_bytes()
    assert record["source_model"] == MODEL and record["opset"] == ox.OPSET and record["pooling"] == "mean"
    assert record["quantization"]["weight_type"] == "QInt8" and record["quantization"]["per_channel"]
    assert record["size"] == len(model) and record["max_seq_length"] == 256 and record["dim"] == 384
    import hashlib

    assert record["sha256"] == hashlib.sha256(model).hexdigest()
    assert not list(cache.glob("*.tmp")) and not list(cache.glob(".export-*"))  # nothing left half-written

    def no_export(*a, **k):
        raise AssertionError("a verified export was exported again")

    monkeypatch.setattr(ox, "export", no_export)
    mtime = (cache / "model.onnx").stat().st_mtime_ns
    got = ox.ensure_exported(source())
    assert got.data == model and (cache / "model.onnx").stat().st_mtime_ns == mtime


def test_a_damaged_export_is_detected_and_rebuilt(cache, caplog):
    path = cache / "model.onnx"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(data))
    with pytest.raises(ox.OnnxExportError, match=r"model\.onnx has sha256 .* \(damaged\)"):
        ox.load_verified(source())
    with caplog.at_level(logging.WARNING, logger="preqrag.encoders"):
        got = ox.ensure_exported(source())  # a real export again
    assert "unusable" in caplog.text and "rebuilding" in caplog.text
    assert got.record["sha256"] == json.loads((cache / "export.json").read_text())["sha256"]
    ox.load_verified(source())  # verifies now


def test_an_export_that_cannot_be_rebuilt_is_reported(cache, monkeypatch):
    record = (cache / "export.json").read_text()
    (cache / "export.json").write_text("{not json")

    def no_torch(*a):  # a machine without torch: the entry cannot be repaired
        raise ImportError("No module named 'torch'")

    monkeypatch.setattr(ox, "_torch_export", no_torch)
    try:
        with pytest.raises(ox.OnnxExportError, match=r"could not export .*all-MiniLM-L6-v2.*backend = 'torch'"):
            ox.ensure_exported(source())
    finally:
        (cache / "export.json").write_text(record)  # the model file is intact: the entry verifies again
    ox.load_verified(source())


def test_int8_vectors_agree_with_torch_fp32_on_real_texts(cache):
    from preqrag.models.encoders.sentence_transformers import SentenceTransformerEncoder

    texts = real_texts() + ["How does moss spread on lawns?", "treaty of westphalia 1648"]
    cfg = load_config(None).embedder
    int8 = onnx_export_encoder(cfg, resolve(MODEL))
    ref = SentenceTransformerEncoder(resolve(MODEL).location, name=MODEL, bf16=False, device="cpu")
    a, b = int8.encode(texts, is_query=False), ref.encode(texts, is_query=False)
    assert a.dtype == np.float32 and a.shape == b.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.98 and cos.mean() > 0.99, cos
    # each text runs alone: its vector does not depend on the other texts of the call
    assert np.array_equal(int8.encode(texts[::-1], is_query=False)[::-1], a)
    assert np.array_equal(int8.encode(texts[-1:], is_query=True), a[-1:])


def test_mean_pooling_respects_the_attention_mask(cache):
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(2, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    v = pool(hidden, mask, "mean")
    hidden[0, 3:] = 1e6  # whatever the padded positions hold
    assert np.array_equal(pool(hidden, mask, "mean"), v)
    ref = hidden[0, :3].mean(axis=0)
    assert np.allclose(v[0], ref / np.linalg.norm(ref), atol=1e-6)
    assert np.allclose(pool(hidden, mask, "cls")[1], hidden[1, 0] / np.linalg.norm(hidden[1, 0]), atol=1e-6)

    # the exported graph takes the mask: a short text padded beside a long one keeps its vector (up
    # to int8 activation scales computed over the padded batch), while ignoring the mask does not
    enc = onnx_export_encoder(load_config(None).embedder, resolve(MODEL))
    short, long = "Honey never spoils when it is stored sealed.", real_texts(1)[0]
    alone = enc.encode([short], is_query=False)[0]
    session, tok = enc._load()
    e = tok.encode_batch([short, long])
    ids, m = np.array([x.ids for x in e]), np.array([x.attention_mask for x in e])
    assert m[0].sum() < m.shape[1]  # padded
    feeds = {"input_ids": ids, "token_type_ids": np.zeros_like(ids)}
    padded = pool(session.run(None, {**feeds, "attention_mask": m})[0], m, "mean")[0]
    unmasked = pool(session.run(None, {**feeds, "attention_mask": np.ones_like(m)})[0], m, "mean")[0]
    assert padded @ alone > 0.98 and unmasked @ alone < 0.95


def test_default_embedder_runs_on_onnx_on_a_cpu_and_torch_when_asked(monkeypatch):
    import preqrag.models.encoders.sentence_transformers as st

    model = resolve(MODEL)
    monkeypatch.setattr(st, "cuda_possible", lambda: False)
    enc = load_encoder(load_config(None).embedder)
    assert isinstance(enc, OnnxEncoder) and enc.backend == "onnx-int8" and enc.device == "cpu"
    assert enc.name == MODEL and enc.max_seq_length == 256 and enc.dim == 384 and enc.pooling == "mean"
    torch_cfg = load_config(None, {"embedder": {"backend": "torch"}}).embedder
    assert type(load_encoder(torch_cfg)).__name__ == "SentenceTransformerEncoder"
    monkeypatch.setattr(st, "cuda_possible", lambda: True)  # a CUDA machine: auto keeps torch (GPU)
    assert choose_backend(load_config(None).embedder, model) == "torch"
    assert choose_backend(load_config(None, {"embedder": {"device": "cpu"}}).embedder, model) == "onnx"
    with pytest.raises(ValueError, match="runs on the CPU"):
        load_encoder(load_config(None, {"embedder": {"backend": "onnx", "device": "cuda"}}).embedder)
    with pytest.raises(ValueError, match="one way to run"):
        load_encoder(load_config(None, {"embedder": {"name": "wordllama", "backend": "onnx"}}).embedder)


def test_query_cache_keeps_backends_apart(tmp_path, monkeypatch):
    """Query vectors cached by the torch backend are not served by the int8 one (same model name)."""
    import preqrag.models.encoders.sentence_transformers as st

    monkeypatch.setattr(st, "cuda_possible", lambda: False)
    onnx = load_encoder(load_config(None).embedder, str(tmp_path))
    torch_ = load_encoder(load_config(None, {"embedder": {"backend": "torch"}}).embedder, str(tmp_path))
    monkeypatch.setattr(type(torch_.encoder), "encode", lambda self, texts, **k: np.ones((len(texts), 384), np.float32))
    torch_.encode(["a question"], is_query=True)  # cached under the torch backend's key
    calls = []
    monkeypatch.setattr(type(onnx.encoder), "encode", lambda self, texts, **k: calls.append(texts) or
                        np.zeros((len(texts), 384), np.float32))
    assert not onnx.encode(["a question"], is_query=True).any() and calls == [["a question"]]
