"""[embedder] device: where sentence-transformers embedders run (issue 24: GPU encoding for builds).

CI has a CPU-only torch, so the CUDA path is checked here through its errors and through ``auto``
falling back to the CPU; the GPU figures (rate, cosine to the CPU's float32 vectors) come from
bench/gpu_encode_ann.py on a GPU machine (docs/indexing.md, "Encoding on one GPU").
"""

import numpy as np
import pytest
import torch

from preqrag.core.config import ConfigError, load_config
from preqrag.models.encoders import load_encoder

TEXTS = ["Honey never spoils when it is stored sealed.", "The Treaty of Westphalia was signed in 1648."]


def test_device_setting_is_validated_by_name():
    for bad in ("gpu", "cuda:x", "CUDA"):
        with pytest.raises(ConfigError, match="device"):
            load_config(None, {"embedder": {"device": bad}})
    assert load_config(None, {"embedder": {"device": "cuda:1"}}).embedder.device == "cuda:1"
    assert load_config(None).embedder.device == "auto"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error a machine without CUDA gives")
def test_cuda_without_a_cuda_device_fails_when_the_encoder_is_built():
    cfg = load_config(None, {"embedder": {"device": "cuda"}})
    with pytest.raises(RuntimeError, match=r"\[embedder\] device = 'cuda'.*no CUDA device"):
        load_encoder(cfg.embedder)


def test_cuda_for_a_cpu_only_backend_is_a_configuration_error():
    cfg = load_config(None, {"embedder": {"name": "wordllama", "device": "cuda"}})
    with pytest.raises(ValueError, match="runs on the CPU only"):
        load_encoder(cfg.embedder)


def test_auto_encodes_on_what_torch_sees_and_matches_an_explicit_device():
    # the torch backend (on a CPU, backend "auto" runs the default model as ONNX int8: test_onnx_export.py)
    auto = load_encoder(load_config(None, {"embedder": {"backend": "torch"}}).embedder)
    va = auto.encode(TEXTS, is_query=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert auto.device == expected
    explicit = load_encoder(load_config(None, {"embedder": {"device": "cpu", "backend": "torch"}}).embedder)
    vc = explicit.encode(TEXTS, is_query=False)
    assert va.dtype == np.float32 and va.shape == vc.shape == (2, 384)
    cos = (va * vc).sum(axis=1)  # unit-norm rows: float16 on a GPU agrees to a cosine near 1
    assert cos.min() > (0.999 if expected == "cuda" else 0.999999), cos
