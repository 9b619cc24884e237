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


def _mmr(ctx: Context) -> RerankStep:
    from .rerankers.mmr import load_mmr_step

    return load_mmr_step(ctx.cfg, ctx.index)


def _cir_generator(ctx: Context) -> Generator:
    from .generation_cir import CIRGenerator

    return CIRGenerator(ctx.llm, ctx.cfg.generator, ctx.cfg.cir)


def _dota_rewriter(ctx: Context) -> Rewriter:
    from .dota import build_rewriter

    return build_rewriter(ctx)


def _bm25_prune(ctx: Context) -> RerankStep:
    from .dota import build_prune_step

    return build_prune_step(ctx)


def _dota_generator(ctx: Context) -> Generator:
    from .dota import build_generator

    return build_generator(ctx)


def _ginger_rewriter(ctx: Context) -> Rewriter:
    from .ginger.build import build_rewriter

    return build_rewriter(ctx)


def _pairwise(ctx: Context) -> RerankStep:
    from .ginger.build import build_pairwise_step

    return build_pairwise_step(ctx)


def _ginger_generator(ctx: Context) -> Generator:
    from .ginger.build import build_generator

    return build_generator(ctx)


def _preqrag_generator(ctx: Context) -> Generator:
    from .generation import LLMGenerator

    return LLMGenerator(ctx.llm, ctx.cfg.generator)


REWRITERS: dict[str, Callable[[Context], Rewriter]] = {
    "preqrag": _preqrag_rewriter,
    "none": _identity_rewriter,
    "dota": _dota_rewriter,  # DoTA-RAG §2.1-2.2: typo fix + namespace routing ([dota])
    "ginger": _ginger_rewriter,  # GINGER §3.1: original + n rewrites ([ginger])
}
"""``[rewriter] name`` → builder (plan slot)."""

RERANK_STEPS: dict[str, Callable[[Context], RerankStep | None]] = {
    "cross-encoder": _cross_encoder,
    "mmr": _mmr,  # CIR §2.1: MMR diversification ([mmr])
    "bm25-prune": _bm25_prune,  # DoTA-RAG §2.3: BM25 pruning to dota.prune_keep
    "pairwise": _pairwise,  # GINGER §3.1: duoT5-style pairwise, sym-sum ([ginger])
}
"""``[rerank] chain`` entries → builder (``None``: the step is off, e.g. reranker.name = 'none')."""

GENERATORS: dict[str, Callable[[Context], Generator]] = {
    "preqrag": _preqrag_generator,
    "cir": _cir_generator,  # CIR §2.2: expertise prompts, cited JSON answer ([cir])
    "dota": _dota_generator,  # DoTA-RAG §2.4-2.5: 8k aggregation, Fig. 5 prompt
    "ginger": _ginger_generator,  # GINGER §3.2-3.3: nuggets, clusters, summaries ([ginger])
}
"""``[generator] name`` → builder (generate slot)."""


def _interleave_merge(ctx: Context):
    from .learned.ranker import InterleaveMerge

    return InterleaveMerge()


def _learned_merge(ctx: Context):
    from .learned.ranker import LearnedMerge

    return LearnedMerge(ctx.cfg.merge.model)


MERGERS: dict[str, Callable[[Context], Any]] = {
    "interleave": _interleave_merge,  # PreQRAG §2.2.2: round-robin of the sub-queries' lists
    "learned": _learned_merge,  # LightGBM LambdaMART over candidate documents ([merge] model)
}
"""``[merge] name`` → builder (merge slot)."""


def build(registry: dict[str, Callable[[Context], Any]], field: str, name: str, ctx: Context) -> Any:
    """``registry[name](ctx)``.

    Raises:
        ValueError: unknown ``name``, naming the configuration ``field`` and the valid names.
    """
    if name not in registry:
        raise ValueError(f"{field}: unknown component {name!r}; valid: {', '.join(registry)}")
    return registry[name](ctx)
