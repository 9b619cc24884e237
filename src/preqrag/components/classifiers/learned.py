"""The learned single/multi-document classifier, default of the pipeline (PreQRAG §2.1).

PreQRAG classified questions with Falcon3-10B-Instruct, then with published rules (§2.1,
Table 1). Here the default is a small linear model trained on DataMorgana questions
(``liverag-bench/dev.jsonl``): TF-IDF word and character n-grams plus structural features,
logistic regression, threshold tuned for balanced accuracy; see
:mod:`preqrag.components.classifiers.model` for the model and ``docs/results/classifier.md`` for how it
was chosen and how accurate it is. The trained parameters ship inside the package
(``preqrag/data/classifier.json``); retrain with ``preqrag train-classifier``.
"""

from __future__ import annotations

from pathlib import Path

from ...core.records import Classification
from .model import QuestionTypeModel


class LearnedClassifier:
    """Classify questions with a trained :class:`QuestionTypeModel`.

    ``__init__`` only stores the path; the model is loaded on the first ``classify`` call.

    Args:
        model_path: a model file written by ``preqrag train-classifier``; ``None`` (default)
            uses the model bundled in the package.
    """

    name = "learned"

    def __init__(self, model_path: str | Path | None = None) -> None:
        self.model_path = None if model_path is None else str(model_path)
        self._model: QuestionTypeModel | None = None

    @property
    def model(self) -> QuestionTypeModel:
        """The loaded model (loaded now if needed).

        Raises:
            FileNotFoundError: ``model_path`` does not exist.
            ValueError: the file is not a valid model.
        """
        if self._model is None:
            self._model = QuestionTypeModel.load(self.model_path)
        return self._model

    def classify(self, questions: list[str]) -> list[Classification]:
        """Classify each question.

        Args:
            questions: ``n`` question texts.

        Returns:
            ``n`` Classification objects (``classifier="learned"``, ``score`` = p(multi)),
            ``"multi"`` when ``score >= model.threshold``.
        """
        model = self.model
        probs = model.predict_proba(list(questions))
        return [
            Classification(question_type="multi" if p >= model.threshold else "single",
                           classifier=self.name, score=float(p))
            for p in probs
        ]
