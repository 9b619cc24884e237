"""Single- vs multi-document question classifiers (PreQRAG §2.1, Table 1).

Names (``[classifier] name`` in ``preqrag.toml``):

* ``learned`` (default): TF-IDF + structural features, logistic regression, shipped in
  the package (:mod:`.learned`).
* ``rules``: the published PreQRAG rules, exactly as published (:mod:`.rules`).
* ``llm``: asks the configured LLM, rules as fallback (:mod:`.llm`).
* ``combined``: multi if the rules OR the LLM say multi (:mod:`.combined`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import Context, build, register
from ...core.contracts import LLM, Classifier
from .combined import CombinedClassifier
from .learned import LearnedClassifier
from .llm import LLMClassifier
from .rules import RulesClassifier, is_multi_by_rules
from .subquestions import estimate_n_sub_questions

if TYPE_CHECKING:
    from ...core.config import PipelineConfig



@register("classifier", "learned")
def _learned(ctx: Context) -> Classifier:
    return LearnedClassifier(ctx.cfg.classifier.model_path)


@register("classifier", "rules")
def _rules(ctx: Context) -> Classifier:
    return RulesClassifier()


@register("classifier", "llm")
def _llm(ctx: Context) -> Classifier:
    return LLMClassifier(ctx.get_llm())


@register("classifier", "combined")
def _combined(ctx: Context) -> Classifier:
    return CombinedClassifier(ctx.get_llm())


def load_classifier(cfg: "PipelineConfig", llm: LLM | None = None) -> Classifier:
    """Build the classifier named by ``cfg.classifier.name`` (nothing is loaded yet).

    Args:
        cfg: the pipeline configuration; ``cfg.classifier.model_path`` is used by ``learned``.
        llm: the LLM for ``llm``/``combined``; ``None`` (default) builds
            ``preqrag.models.llm.load_llm(cfg.llm)`` (its weights load on first use).

    Returns:
        A :class:`preqrag.core.contracts.Classifier`.

    Raises:
        ValueError: unknown name (the message names ``classifier.name`` and lists the valid names).
    """
    return build("classifier", cfg.classifier.name, Context(cfg, llm=llm))


__all__ = [
    "CombinedClassifier", "LLMClassifier", "LearnedClassifier", "RulesClassifier",
    "estimate_n_sub_questions", "is_multi_by_rules", "load_classifier",
]
