"""The learned final ranking: LightGBM LambdaMART over candidate documents (issue 14).

Model file (``preqrag-learned-ranker`` version 1): one UTF-8 JSON object with sorted keys:

* ``lightgbm``: the booster as text (``Booster.model_to_string()``; loaded with
  ``Booster(model_str=...)``: plain data, never unpickled, so a model file cannot run code);
* ``features``: the feature names in column order (:data:`~preqrag.learned.features.FEATURE_NAMES`)
  and ``feature_version``; ``candidate_depth``: the depth candidates were cut at;
* ``params``: the training parameters (:class:`RankerParams`); ``training``: counts, the
  pipeline configuration whose retrieval produced the features, wall seconds, peak RSS,
  LightGBM version;
* ``trained_on``: the training questions (``ids`` and ``question_sha256`` of their
  normalised text), so that evaluation can refuse them (:mod:`preqrag.learned.guard`);
* ``sha256``: SHA-256 of the file's JSON without this key (detects edits and truncation).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..components.registry import Context, register
from ..core.config import ConfigError
from ..components.fusion.interleave import InterleaveMerge  # noqa: F401 (the default merge, re-exported)
from ..core.io import atomic_write_text
from ..core.records import Classification, Ranking
from .features import FEATURE_NAMES, FEATURE_VERSION, Candidates, baseline_final, extract

FORMAT = "preqrag-learned-ranker"
VERSION = 1


class RankerFileError(ValueError):
    """A ranker model file that is missing, unreadable or not a valid model (names the file)."""


@dataclass
class RankerParams:
    """LightGBM LambdaMART parameters (``objective = lambdarank``).

    Defaults are deliberately conservative (shallow trees, a minimum leaf size, feature and
    row subsampling off) to generalise from a few thousand questions rather than fit dev.

    Attributes:
        num_trees: boosting rounds (default 300).
        learning_rate: shrinkage (default 0.05).
        num_leaves: leaves per tree (default 15).
        min_data_in_leaf: minimum documents per leaf (default 20; tests use 1).
        lambdarank_truncation_level: pairs considered per query head (default 20).
        seed: every LightGBM seed (default 0).
        num_threads: LightGBM threads (default 2; results are reproducible for a fixed value).
    """

    num_trees: int = 300
    learning_rate: float = 0.05
    num_leaves: int = 15
    min_data_in_leaf: int = 20
    lambdarank_truncation_level: int = 20
    seed: int = 0
    num_threads: int = 2

    def lightgbm(self) -> dict[str, Any]:
        """The LightGBM parameter dict (deterministic, row-wise, quiet)."""
        return {"objective": "lambdarank", "metric": "ndcg", "eval_at": [1, 10],
                "learning_rate": self.learning_rate, "num_leaves": self.num_leaves,
                "min_data_in_leaf": self.min_data_in_leaf,
                "lambdarank_truncation_level": self.lambdarank_truncation_level,
                "seed": self.seed, "deterministic": True, "force_row_wise": True,
                "num_threads": self.num_threads, "verbosity": -1}


def question_sha256(text: str) -> str:
    """SHA-256 of a question's text, lower-cased with whitespace collapsed (catches renamed copies)."""
    return hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).hexdigest()


def _content_sha256(obj: dict) -> str:
    body = {k: v for k, v in obj.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode("utf-8")).hexdigest()


@dataclass
class LearnedRanker:
    """A loaded ranker: the LightGBM booster and what it was trained on.

    Attributes:
        booster: ``lightgbm.Booster``.
        candidate_depth: lists are cut at this depth before features are computed.
        params: the training parameters.
        training: training metadata (see the module docstring).
        trained_on: ``{"ids": [...], "question_sha256": [...]}``.
        sha256: the file's content hash.
    """

    booster: Any
    candidate_depth: int
    params: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    trained_on: dict[str, list[str]] = field(default_factory=dict)
    sha256: str = ""

    def score(self, X: np.ndarray) -> np.ndarray:
        """Learned scores of feature rows.

        Args:
            X: ``float64`` array of shape ``(n, len(FEATURE_NAMES))``.

        Returns:
            ``float64`` array of shape ``(n,)`` (higher is better; comparable within a question).
        """
        if len(X) == 0:
            return np.zeros(0)
        return np.asarray(self.booster.predict(X, num_threads=1), dtype=np.float64)

    def to_json(self) -> str:
        """The model file's text (deterministic: sorted keys)."""
        obj = {"format": FORMAT, "version": VERSION, "features": list(FEATURE_NAMES),
               "feature_version": FEATURE_VERSION, "candidate_depth": self.candidate_depth,
               "lightgbm": self.booster.model_to_string(), "params": self.params,
               "training": self.training, "trained_on": self.trained_on}
        obj["sha256"] = _content_sha256(obj)
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=1) + "\n"

    def save(self, path: str | Path) -> str:
        """Write the model file atomically; returns its content hash."""
        text = self.to_json()
        atomic_write_text(path, text)
        self.sha256 = json.loads(text)["sha256"]
        return self.sha256

    @classmethod
    def load(cls, path: str | Path) -> "LearnedRanker":
        """Read a model file written by :meth:`save` (``preqrag train-ranker``).

        Raises:
            RankerFileError: missing or unreadable file, not JSON, another format or version,
                features that differ from this preqrag version, a content hash that does not
                match, or a booster LightGBM cannot parse (the message names the file).
        """
        import lightgbm as lgb

        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise RankerFileError(f"{path}: cannot read the ranker model: {e}") from e
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise RankerFileError(f"{path}: not a ranker model (not JSON: {e}); train one with "
                                  "`preqrag train-ranker`") from e
        if not isinstance(obj, dict) or obj.get("format") != FORMAT or obj.get("version") != VERSION:
            raise RankerFileError(f"{path}: not a {FORMAT} v{VERSION} file; train one with `preqrag train-ranker`")
        if obj.get("features") != list(FEATURE_NAMES) or obj.get("feature_version") != FEATURE_VERSION:
            raise RankerFileError(f"{path}: its features differ from this preqrag version's; retrain with "
                                  "`preqrag train-ranker`")
        if obj.get("sha256") != _content_sha256(obj):
            raise RankerFileError(f"{path}: content hash mismatch (file edited or damaged); retrain it")
        try:
            booster = lgb.Booster(model_str=obj["lightgbm"])
        except (lgb.basic.LightGBMError, KeyError, TypeError) as e:
            raise RankerFileError(f"{path}: LightGBM cannot read the model: {e}") from e
        if booster.num_feature() != len(FEATURE_NAMES):
            raise RankerFileError(f"{path}: the booster has {booster.num_feature()} features, "
                                  f"expected {len(FEATURE_NAMES)}")
        return cls(booster, int(obj["candidate_depth"]), obj.get("params", {}), obj.get("training", {}),
                   obj.get("trained_on", {}), obj["sha256"])


def train_booster(groups: Sequence[tuple[np.ndarray, np.ndarray]], params: RankerParams):
    """Fit LambdaMART on per-question groups.

    Args:
        groups: one ``(X, y)`` per question: ``X`` of shape ``(n_docs, len(FEATURE_NAMES))``,
            ``y`` of shape ``(n_docs,)`` with 1 for gold documents, 0 otherwise. Groups
            without a positive or with fewer than 2 documents are left out (no pair to learn).

    Returns:
        A ``lightgbm.Booster``.

    Raises:
        ValueError: no group has both a gold and a non-gold candidate.
    """
    import lightgbm as lgb

    kept = [(X, y) for X, y in groups if len(y) >= 2 and 0 < y.sum() < len(y)]
    if not kept:
        raise ValueError("no training question has both a gold and a non-gold candidate document "
                         "(are gold_doc_ids in the index?)")
    X = np.vstack([g[0] for g in kept])
    y = np.concatenate([g[1] for g in kept])
    data = lgb.Dataset(X, label=y, group=[len(g[1]) for g in kept], feature_name=list(FEATURE_NAMES),
                       params={"verbosity": -1, "min_data_in_bin": 1, "feature_pre_filter": False},
                       free_raw_data=True)
    return lgb.train(params.lightgbm(), data, num_boost_round=params.num_trees)


def rank_candidates(ranker: LearnedRanker, cands: Candidates) -> tuple[list[str], np.ndarray]:
    """Candidate documents sorted by learned score (ties: baseline order) and their scores."""
    scores = ranker.score(cands.features)
    order = sorted(range(len(cands.doc_ids)), key=lambda i: (-scores[i], i))
    return [cands.doc_ids[i] for i in order], scores[order]


class LearnedMerge:
    """The ``learned`` merge: documents by learned score, each document's passages best first.

    The final passage ranking lists the candidate documents (see
    :mod:`preqrag.learned.features`) by the model's score; inside a document, passages are
    ordered by their best available score (cross-encoder logit, then fused rank, then any
    rank). Each passage's score is its document's learned score. Query-time cost: feature
    extraction plus one ``Booster.predict`` call per batch (measured by ``bench/learned.py``).

    Args:
        model_path: a model file written by ``preqrag train-ranker``.

    Raises:
        ConfigError: the file is missing or invalid (names ``merge.model``).
    """

    name = "learned"
    documents_key = "final_documents"
    """Trace key of the learned document ranking (ids are document ids, scores learned)."""

    def __init__(self, model_path: str | Path):
        self.model_path = str(model_path)
        try:
            self.ranker = LearnedRanker.load(model_path)
        except RankerFileError as e:
            raise ConfigError(f"merge.model: {e}") from e

    @property
    def identity(self) -> dict[str, str]:
        """``{"kind": "ranker", "path", "sha256"}``: what traces record about this model."""
        return {"kind": "ranker", "path": os.path.abspath(self.model_path), "sha256": self.ranker.sha256}

    @property
    def learned_models(self) -> tuple[dict[str, str], ...]:
        """``(identity,)``: the ranker, trained on the user's questions
        (:class:`~preqrag.core.contracts.Merger`)."""
        return (self.identity,)

    def merge(self, questions: Sequence[str], classifications: Sequence[Classification | None],
              rankings: Sequence[dict[str, list[Ranking]]], finals: Sequence[Sequence[Ranking]]
              ) -> list[tuple[Ranking, dict[str, list[Ranking]]]]:
        """Final rankings for a batch of questions.

        Args:
            questions: ``n`` question texts.
            classifications: their classifier outputs.
            rankings: per question, trace key → one (uncut) Ranking per sub-query.
            finals: per question, the rerank chain's output per sub-query.

        Returns:
            Per question: the final passage Ranking and extra trace rankings
            (``{"final_documents": [Ranking of document ids with learned scores]}``).
        """
        depth = self.ranker.candidate_depth
        cands = [extract(q, c, r, baseline_final(f), depth)
                 for q, c, r, f in zip(questions, classifications, rankings, finals)]
        sizes = [len(c.doc_ids) for c in cands]
        X = np.vstack([c.features for c in cands]) if sum(sizes) else np.zeros((0, len(FEATURE_NAMES)))
        all_scores = self.ranker.score(X)
        out = []
        start = 0
        for c, n in zip(cands, sizes):
            scores = all_scores[start:start + n]
            start += n
            order = sorted(range(n), key=lambda i: (-scores[i], i))
            ids: list[str] = []
            pscores: list[float] = []
            for i in order:
                for pid in c.passages[c.doc_ids[i]]:
                    ids.append(pid)
                    pscores.append(float(scores[i]))
            docs = Ranking(ids=[c.doc_ids[i] for i in order], scores=[float(scores[i]) for i in order])
            out.append((Ranking(ids=ids, scores=pscores), {self.documents_key: [docs]}))
        return out


@register("merge", "learned")
def _learned(ctx: Context) -> LearnedMerge:
    """Candidate documents ranked by a LightGBM LambdaMART model (``merge.model``)."""
    return LearnedMerge(ctx.cfg.merge.model)
