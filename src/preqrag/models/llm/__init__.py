"""LLM backends: in-process llama-cpp-python (default) and OpenAI-compatible HTTP servers.

``load_llm(cfg)`` builds the configured backend, wrapped in the content-addressed call
cache when ``cfg.cache_dir`` is set.
"""

from __future__ import annotations

from ...core.config import LLMConfig
from ...core.contracts import LLM, LLMError
from .cache import CachedLLM


def load_llm(cfg: LLMConfig | None = None, cache_dir: str | None = None) -> LLM:
    """Build the LLM of ``cfg`` (default: SmolLM2-135M-Instruct GGUF in-process).

    Args:
        cache_dir: cache directory used when ``cfg.cache_dir`` is unset (``run.cache_dir``).

    Raises:
        ValueError: unknown backend.
        ImportError: the backend's package is missing (message gives the pip command).
    """
    cfg = cfg or LLMConfig()
    if cfg.backend == "llama-cpp":
        from .llamacpp import LlamaCppLLM

        llm: LLM = LlamaCppLLM(cfg)
    elif cfg.backend == "openai":
        from .openai_backend import OpenAICompatibleLLM

        llm = OpenAICompatibleLLM(cfg)
    else:  # pragma: no cover - pydantic restricts the values
        raise ValueError(f"unknown LLM backend {cfg.backend!r}; use 'llama-cpp' or 'openai'")
    if cfg.cache_dir or cache_dir:
        llm = CachedLLM(llm, cfg.cache_dir or cache_dir)
    return llm


__all__ = ["LLM", "LLMError", "load_llm", "CachedLLM"]
