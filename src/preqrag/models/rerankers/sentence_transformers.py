"""sentence-transformers CrossEncoder backend (any hub cross-encoder, e.g. bge-reranker-v2-m3)."""

from __future__ import annotations

import numpy as np

from ...core.timing import model_time


class STCrossEncoder:
    """Scores pairs with ``sentence_transformers.CrossEncoder.predict`` on CPU.

    Returns ``float32`` scores of shape ``(len(pairs),)``.
    """

    def __init__(self, location: str, name: str, max_length: int = 512, batch_size: int = 16):
        self.location = str(location)
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        self._model = None

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as e:  # pragma: no cover
                raise ImportError('sentence-transformers cross-encoders need: pip install "sentence-transformers==6.2.0" "torch==2.13.0"') from e
            self._model = CrossEncoder(self.location, max_length=self.max_length, device="cpu")
        return self._model

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        self._load()
        with model_time("cross-encoder"):
            scores = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs))
