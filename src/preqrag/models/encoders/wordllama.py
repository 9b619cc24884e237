"""A static word-embedding encoder: WordLlama (``pip install wordllama``; weights inside the package).

WordLlama (Miller, 2024, https://github.com/dleemiller/WordLlama) keeps the token-embedding table of a
large LLM, trained with a contrastive objective to be averaged: a text's vector is the mean of its
token vectors, L2-normalised. The bundled ``l2_supercat`` model has 256 dimensions (Matryoshka:
truncatable) and a 32k-token vocabulary. Encoding costs tokenisation, a table lookup and a mean per
text — about 3,600 passages of ~240 tokens per second on two CPU cores against ~16–33 for
all-MiniLM-L6-v2 — and retrieval quality is far lower. Use it where encoding speed matters more than ranking: scale tests
(issue 11's 1M–5M-passage rows) and very large indexes on CPU-only machines.

The model is loaded here from the package's own files (``weights/l2_supercat_256.safetensors``,
``tokenizers/l2_supercat_tokenizer_config.json``) with ``WordLlamaInference``: wordllama 0.4.0's
``WordLlama.load`` looks for the tokenizer under ``tokenizer/`` while the wheel ships it under
``tokenizers/``, so with downloads disabled it fails.

The mean is computed here, not by ``WordLlamaInference.embed``: that pads every batch to its
longest text and multiplies a ``(batch, length, dim)`` array by the mask, so on passages
it spends most of its time on padding. Here each batch is a sparse (texts × vocabulary) matrix of
token counts (SciPy CSR) times the table — the same vectors (bit-identical on 20,000 bench passages
of 236 tokens on average) at 2.5 times the rate: 1,451 → 3,597 passages/s on two AVX2 cores, where
tokenisation is now most of the time (``bench/wordllama_encode.py``, docs/bench/wordllama_encode.json).
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

    learned_models: tuple[dict[str, str], ...] = ()
    """The fine-tuned encoder's identity when this model was trained on the user's questions
    (set by :func:`~preqrag.models.encoders.load_encoder`); ``()`` for any other model."""

    def __init__(self, weights: str, name: str = "wordllama/l2_supercat_256", dim: int = 256):
        self.weights = Path(weights)
        self.name = name
        self.dim = dim
        self._model = None
        self._tok = None

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
        import itertools

        import scipy.sparse as sp

        model = self._load()
        if self._tok is None:  # the model's tokenizer pads (WordLlamaInference sets it); a copy that does not
            self._tok = model.tokenizer.__class__.from_str(model.tokenizer.to_str())
            self._tok.no_padding()
            self._tok.no_truncation()
        table = model.embedding  # (vocabulary, dim) float32, already truncated to dim
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        step = max(batch_size, 1024)  # the CSR product's cost is per token: a large batch only saves calls
        for i in range(0, len(texts), step):
            encs = self._tok.encode_batch_fast(texts[i:i + step], add_special_tokens=False)
            lens = np.fromiter((len(e.ids) for e in encs), np.int64, len(encs))
            indptr = np.zeros(len(encs) + 1, np.int64)
            np.cumsum(lens, out=indptr[1:])
            ids = np.fromiter(itertools.chain.from_iterable(e.ids for e in encs), np.int64, int(indptr[-1]))
            np.clip(ids, 0, table.shape[0] - 1, out=ids)  # as WordLlamaInference: out-of-table ids clamped
            counts = sp.csr_matrix((np.ones(len(ids), np.float32), ids, indptr), shape=(len(encs), table.shape[0]))
            sums = np.asarray(counts @ table, dtype=np.float32)
            sums /= np.maximum(lens, 1)[:, None]  # mean over the text's tokens
            with np.errstate(invalid="ignore", divide="ignore"):
                sums /= np.linalg.norm(sums, axis=1, keepdims=True)
            out[i:i + len(encs)] = sums
        return np.nan_to_num(out, copy=False)
