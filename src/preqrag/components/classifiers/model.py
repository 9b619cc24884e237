"""The shipped single/multi-document question model: file format and CPU inference.

The model is a logistic regression over three feature blocks (chosen by 5-fold
cross-validation on ``liverag-bench/dev.jsonl``, see ``docs/results/classifier.md``):

* ``word``: TF-IDF of word 1-2-grams (scikit-learn ``TfidfVectorizer``, sublinear tf);
* ``char``: TF-IDF of character 2-5-grams inside word boundaries (``analyzer="char_wb"``);
* ``structural``: :func:`preqrag.components.classifiers.features.structural_features`, standardised
  and multiplied by a block weight.

``p(multi) = sigmoid(sum_b X_b @ coef_b + intercept)``; the question is ``"multi"`` when
``p >= threshold`` (tuned for balanced accuracy by inner cross-validation at training time).

File format (``preqrag-question-classifier`` version 1): one UTF-8 JSON object, written
with sorted keys so that training twice gives identical bytes. Arrays are base64 of
little-endian ``float64``; the vocabularies are term lists in column order. Loading it
never unpickles anything, so a model file cannot run code, and it does not depend on the
scikit-learn version that trained it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .features import FEATURE_NAMES, structural_features

FORMAT = "preqrag-question-classifier"
VERSION = 1
BUNDLED_MODEL = Path(__file__).resolve().parents[2] / "data" / "classifier.json"
"""The model shipped inside the package (trained on ``liverag-bench/dev.jsonl``)."""


def encode_array(a: np.ndarray) -> str:
    """``float64`` little-endian bytes of ``a`` (flattened), base64-encoded."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def decode_array(s: str) -> np.ndarray:
    """Inverse of :func:`encode_array`: a 1-D ``float64`` array."""
    return np.frombuffer(base64.b64decode(s), dtype="<f8").astype(np.float64)


@dataclass
class TextBlock:
    """A fitted TF-IDF block: vectoriser parameters, vocabulary (column order), idf, coefficients."""

    params: dict[str, Any]
    vocabulary: list[str]
    idf: np.ndarray
    coef: np.ndarray
    _vectorizer: Any = field(default=None, repr=False, compare=False)

    def vectorizer(self):
        """The scikit-learn ``TfidfVectorizer`` rebuilt from the stored vocabulary and idf."""
        if self._vectorizer is None:
            from sklearn.feature_extraction.text import TfidfVectorizer

            params = dict(self.params)
            params["ngram_range"] = tuple(params["ngram_range"])
            vec = TfidfVectorizer(**params, vocabulary=self.vocabulary)
            vec.idf_ = self.idf
            self._vectorizer = vec
        return self._vectorizer

    def decision(self, questions: list[str]) -> np.ndarray:
        """Contribution of this block to the logit, shape ``(n,)``."""
        return np.asarray(self.vectorizer().transform(questions) @ self.coef, dtype=np.float64).ravel()


@dataclass
class QuestionTypeModel:
    """A loaded question-type model (see the module docstring for the maths and format).

    Attributes:
        word, char: the TF-IDF blocks.
        struct_mean, struct_scale, struct_weight, struct_coef: standardisation and
            coefficients of the structural block (``len(FEATURE_NAMES)`` each, weight scalar).
        intercept: logistic-regression intercept.
        threshold: ``p(multi)`` at or above which a question is ``"multi"``.
        metadata: how it was trained (candidate, seed, data hash, counts, library versions).
    """

    word: TextBlock
    char: TextBlock
    struct_mean: np.ndarray
    struct_scale: np.ndarray
    struct_weight: float
    struct_coef: np.ndarray
    intercept: float
    threshold: float
    metadata: dict[str, Any] = field(default_factory=dict)

    def predict_proba(self, questions: list[str]) -> np.ndarray:
        """``p(multi)`` per question.

        Args:
            questions: ``n`` question texts.

        Returns:
            ``float64`` array of shape ``(n,)`` in ``[0, 1]``.
        """
        if not questions:
            return np.zeros(0, dtype=np.float64)
        s = (structural_features(questions) - self.struct_mean) / self.struct_scale * self.struct_weight
        z = self.word.decision(questions) + self.char.decision(questions) + s @ self.struct_coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> str:
        """Serialise (deterministic: sorted keys, exact float64 arrays)."""
        def block(b: TextBlock) -> dict:
            return {"params": b.params, "vocabulary": b.vocabulary, "idf": encode_array(b.idf),
                    "coef": encode_array(b.coef)}

        obj = {
            "format": FORMAT, "version": VERSION,
            "word": block(self.word), "char": block(self.char),
            "structural": {"features": list(FEATURE_NAMES), "mean": encode_array(self.struct_mean),
                           "scale": encode_array(self.struct_scale), "weight": self.struct_weight,
                           "coef": encode_array(self.struct_coef)},
            "intercept": self.intercept, "threshold": self.threshold, "metadata": self.metadata,
        }
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "<string>") -> "QuestionTypeModel":
        """Parse a model file's text.

        Raises:
            ValueError: not a version-1 ``preqrag-question-classifier`` file, a missing key,
                or structural features that differ from this version of the code
                (``source`` is named in the message).
        """
        try:
            obj = json.loads(text)
            if obj.get("format") != FORMAT or obj.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} v{VERSION} file")
            st = obj["structural"]
            if st["features"] != list(FEATURE_NAMES):
                raise ValueError("structural features differ from this preqrag version; retrain with "
                                 "`preqrag train-classifier`")

            def block(b: dict) -> TextBlock:
                return TextBlock(b["params"], list(b["vocabulary"]), decode_array(b["idf"]), decode_array(b["coef"]))

            return cls(word=block(obj["word"]), char=block(obj["char"]),
                       struct_mean=decode_array(st["mean"]), struct_scale=decode_array(st["scale"]),
                       struct_weight=float(st["weight"]), struct_coef=decode_array(st["coef"]),
                       intercept=float(obj["intercept"]), threshold=float(obj["threshold"]),
                       metadata=dict(obj.get("metadata", {})))
        except (KeyError, TypeError, json.JSONDecodeError, ValueError) as e:
            raise ValueError(f"{source}: invalid question-classifier model: {e}") from e

    @classmethod
    def load(cls, path: str | Path | None = None) -> "QuestionTypeModel":
        """Load a model file; ``None`` loads the bundled :data:`BUNDLED_MODEL`.

        Raises:
            FileNotFoundError: the file does not exist.
            ValueError: see :meth:`from_json`.
        """
        p = Path(path) if path is not None else BUNDLED_MODEL
        return cls.from_json(p.read_text(encoding="utf-8"), source=str(p))
