"""Components by name: what each configuration name builds, for every pipeline slot.

A builder takes the :class:`Context` (configuration, opened index, shared LLM) and returns
the component; :meth:`preqrag.pipeline.Pipeline.from_config` looks every configured name
up here, so an unknown name fails before the first question with the valid names listed.
Adding a component is one function and one entry below (no plugin machinery).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import PipelineConfig
from .stages import LLM, Generator, RerankStep, Rewriter


@dataclass
class Context:
    """What builders share: ``cfg``, the opened ``index`` and the ``llm`` (one instance for
    every component that needs one; it loads its weights once, at warm-up)."""

    cfg: PipelineConfig
    index: Any
    llm: LLM


def _preqrag_rewriter(ctx: Context) -> Rewriter:
    from .rewriting import PreQRAGRewriter

    return PreQRAGRewriter(ctx.llm, ctx.cfg.rewriter)


def _identity_rewriter(ctx: Context) -> Rewriter:
    from .rewriting import IdentityRewriter

    return IdentityRewriter()


def _cross_encoder(ctx: Context) -> RerankStep | None:
    from .rerankers import load_reranker
    from .rerankers.steps import CrossEncoderStep

    reranker = load_reranker(ctx.cfg.reranker, ctx.cfg.run.cache_dir)
    return None if reranker is None else CrossEncoderStep(reranker, ctx.cfg.reranker.depth)


def _preqrag_generator(ctx: Context) -> Generator:
    from .generation import LLMGenerator

    return LLMGenerator(ctx.llm, ctx.cfg.generator)


REWRITERS: dict[str, Callable[[Context], Rewriter]] = {
    "preqrag": _preqrag_rewriter,
    "none": _identity_rewriter,
}
"""``[rewriter] name`` → builder (plan slot)."""

RERANK_STEPS: dict[str, Callable[[Context], RerankStep | None]] = {
    "cross-encoder": _cross_encoder,
}
"""``[rerank] chain`` entries → builder (``None``: the step is off, e.g. reranker.name = 'none')."""

GENERATORS: dict[str, Callable[[Context], Generator]] = {
    "preqrag": _preqrag_generator,
}
"""``[generator] name`` → builder (generate slot)."""


def build(registry: dict[str, Callable[[Context], Any]], field: str, name: str, ctx: Context) -> Any:
    """``registry[name](ctx)``.

    Raises:
        ValueError: unknown ``name``, naming the configuration ``field`` and the valid names.
    """
    if name not in registry:
        raise ValueError(f"{field}: unknown component {name!r}; valid: {', '.join(registry)}")
    return registry[name](ctx)
