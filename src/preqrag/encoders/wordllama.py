"""A static word-embedding encoder: WordLlama (``pip install wordllama``; weights inside the package).

WordLlama (Miller, 2024, https://github.com/dleemiller/WordLlama) keeps the token-embedding table of a
large LLM, trained with a contrastive objective to be averaged: a text's vector is the mean of its
token vectors, L2-normalised. The bundled ``l2_supercat`` model has 256 dimensions (Matryoshka:
truncatable) and a 32k-token vocabulary. Encoding costs a table lookup and a mean per text — tens of
thousands of passages per second on one CPU core against ~16–33 for all-MiniLM-L6-v2 on two — and
retrieval quality is far lower. Use it where encoding speed matters more than ranking: scale tests
(issue 11's 1M–5M-passage rows) and very large indexes on CPU-only machines.

The model is loaded here from the package's own files (``weights/l2_supercat_256.safetensors``,
``tokenizers/l2_supercat_tokenizer_config.json``) with ``WordLlamaInference``: wordllama 0.4.0's
``WordLlama.load`` looks for the tokenizer under ``tokenizer/`` while the wheel ships it under
``tokenizers/``, so with downloads disabled it fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class WordLlamaEncoder:
    """Mean-of-token-embeddings encoder (WordLlama ``l2_supercat``, 256-d).

    Args:
        weights: path to the package's ``l2_supercat_256.safetensors``.
        name: the configured name (recorded in the index manifest).
        dim: keep the first ``dim`` dimensions (Matryoshka truncation; 64..256).

    ``encode`` returns ``float32`` of shape ``(len(texts), dim)`` with unit-norm rows (an all-zero
    row for a text with no known token). ``max_seq_length`` (512) only bounds the passages of
    token-bounded chunking: WordLlama averages texts of any length. Queries and passages are
    encoded alike (no prefixes).
    """

    max_seq_length = 512

    def __init__(self, weights: str, name: str = "wordllama/l2_supercat_256", dim: int = 256):
        self.weights = Path(weights)
        self.name = name
        self.dim = dim
        self._model = None

    def warm_up(self) -> None:
        self._load()

    def _load(self):
        if self._model is None:
            from safetensors import safe_open
            from tokenizers import Tokenizer
            from wordllama.inference import WordLlamaInference

            tokenizer_file = self.weights.parent.parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
            with safe_open(str(self.weights), framework="np", device="cpu") as f:
                table = f.get_tensor("embedding.weight")[:, : self.dim]
            self._model = WordLlamaInference(table, Tokenizer.from_file(str(tokenizer_file)))
        return self._model

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` (used for token-bounded chunking)."""
        return self._load().tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, texts: list[str], *, is_query: bool, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        out = np.asarray(model.embed(list(texts), norm=True, batch_size=max(batch_size, 256)), dtype=np.float32)
        return np.nan_to_num(out, copy=False)
