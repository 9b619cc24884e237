"""Shared onnxruntime + tokenizers plumbing for BERT-style ONNX models (embedder, cross-encoder)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from .threads import cpu_threads


def load_session_and_tokenizer(model_dir: str | Path, max_length: int, *, model: bytes | str | Path | None = None,
                               tokenizer_file: str | Path | None = None, intra_op_threads: int | None = None):
    """Open ``model_dir/model.onnx`` and ``model_dir/tokenizer.json``.

    The tokenizer truncates to ``max_length`` tokens (special tokens included) and pads
    to the longest sequence of a batch.

    Args:
        model: the graph to run instead of ``model_dir/model.onnx``: a path, or the serialized
            bytes (a caller that verified the file's sha256 passes the bytes it hashed).
        tokenizer_file: ``tokenizer.json`` to use instead of ``model_dir/tokenizer.json``.
        intra_op_threads: onnxruntime's intra-op threads; default :func:`cpu_threads` (a Ray
            actor's share, not the machine's cores). 1 for a session that several Python threads
            run at once (one text each: :class:`preqrag.models.encoders.onnx.OnnxEncoder` ``per_text``).

    Raises:
        ImportError: onnxruntime/tokenizers missing, with the pip command.
        FileNotFoundError: a file is missing.
    """
    try:
        import onnxruntime as ort
    except ImportError as e:  # pragma: no cover
        raise ImportError('ONNX models need: pip install onnxruntime tokenizers') from e
    model_dir = Path(model_dir)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_op_threads or cpu_threads()  # a Ray actor's share, not the machine's cores
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    graph = model if isinstance(model, bytes) else str(model or model_dir / "model.onnx")
    session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
    return session, load_tokenizer(tokenizer_file or model_dir / "tokenizer.json", max_length)


def load_tokenizer(path: str | Path, max_length: int):
    """The ``tokenizers.Tokenizer`` of ``path`` (a ``tokenizer.json``), truncating to ``max_length``
    tokens (special tokens included) and padding to the longest sequence of a batch.

    Raises:
        ImportError: tokenizers missing, with the pip command.
        FileNotFoundError: no such file.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover
        raise ImportError('ONNX models need: pip install onnxruntime tokenizers') from e
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def model_max_length(model_dir: str | Path, default: int = 512) -> int:
    """``max_length`` from ``vectrix_config.json``/``tokenizer_config.json``, else ``default``."""
    for name, key in (("vectrix_config.json", "max_length"), ("tokenizer_config.json", "model_max_length")):
        p = Path(model_dir) / name
        if p.exists():
            value = json.loads(p.read_text()).get(key)
            if isinstance(value, int) and value < 100_000:
                return value
    return default


def run_batch(session, encodings) -> np.ndarray:
    """Run one padded batch of ``tokenizers.Encoding`` through the session; first output."""
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
    if any(i.name == "token_type_ids" for i in session.get_inputs()):
        feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
    return session.run(None, feeds)[0]


T = TypeVar("T")


def run_alone(run_one: Callable[[int], T], lengths: Sequence[int], threads: int) -> Iterator[tuple[int, T]]:
    """``run_one(i)`` for every index of ``lengths`` (one input each, a batch of one: no padding),
    longest first so that the threads end together, on ``threads`` Python threads; yields
    ``(i, result)`` in that order. The threads share one single-threaded session (onnxruntime
    releases the GIL while it runs): the int8 embedder's ``per_text`` mode and the cross-encoder's
    ``batch_size`` 1, where an input's output then does not depend on the other inputs of a call."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if threads > 1 and len(order) > 1:
        with ThreadPoolExecutor(min(threads, len(order)), thread_name_prefix="onnx-alone") as ex:
            yield from zip(order, ex.map(run_one, order))
    else:
        for i in order:
            yield i, run_one(i)


RESERVE_PEAK_AT_WARM_UP = False
"""When True, ``warm_up()`` of the ONNX cross-encoder also runs :func:`reserve_peak`.
``preqrag serve`` sets it (a long-running process whose memory should stay flat); batch jobs
leave it off and save the extra forward pass per pipeline."""


def reserve_peak(session, batch_size: int, length: int) -> None:
    """Run one synthetic batch of the largest shape the caller will feed (``batch_size`` ×
    ``length`` tokens), so that onnxruntime's CPU arena reaches its peak size at load time.

    The arena (BFC, power-of-two extensions) never returns memory, and grows each time a
    request's shape exceeds everything seen before: without this, a long-running server's
    resident memory climbs for hundreds of requests as rarer, larger shapes arrive (issue 25's
    soak, docs/reliability.md). Reserved up front, the footprint is visible at start and later
    growth is fragmentation only (measured: 150 calls of random shapes, 16-40 pairs, grew RSS
    +272 MiB without it, +91 MiB after it). Costs one forward pass (about 1-2 s for MiniLM-L12 at 16 ×
    512 on 2 cores). Token id 1000 is an ordinary vocabulary entry of BERT-style vocabularies.
    """
    ids = np.full((batch_size, length), 1000, dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if any(i.name == "token_type_ids" for i in session.get_inputs()):
        feeds["token_type_ids"] = np.zeros_like(ids)
    session.run(None, feeds)


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Index batches in decreasing length order, so each batch pads little."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
